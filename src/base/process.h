// Facts about the host's processes that gpumux's accounting relies on.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace gpumux {

// The start time of process `pid` (clock ticks since boot, /proc/PID/stat field 22), or nullopt if
// it does not exist or has exited (a zombie). With the pid it names a process uniquely: a reused
// pid has another start time. Thread-safe.
std::optional<uint64_t> ProcessStartTime(pid_t pid);

// The effective uid of process `pid` (/proc/PID/status), or nullopt if it is gone. Thread-safe.
std::optional<uid_t> ProcessUid(pid_t pid);

// A live process that maps the file at `path` (by device and inode, in /proc/PID/maps of the
// processes this user may read), or nullopt if none does or the file does not exist. Reads every
// process's maps: for rare checks, not a hot path. Thread-safe.
std::optional<pid_t> ProcessMapping(const std::string& path);

// The value of variable `name` in the environment process `pid` was started with
// (/proc/PID/environ, readable by its own user and root), or nullopt where it has none or it
// cannot be read. The process may have rewritten that memory since: it says only what the process
// claims. Thread-safe.
std::optional<std::string> ProcessEnvironment(pid_t pid, const std::string& name);

// A process held by a pidfd: the process it names never changes, whatever later holds its pid.
// A pid names a process only while it lives: after it exits, its number may be another's within a
// second (pids wrap in about 1.4 s at 23,000 forks a second). Thread-safe; not copyable.
class ProcessHandle {
 public:
  // The process at the other end of Unix socket `socket_fd`, whose pid in this namespace
  // SO_PEERCRED reported as `pid`: the very process that connected (SO_PEERPIDFD, Linux 6.5), or
  // on older kernels the one holding `pid` now. Null if it has exited.
  static std::shared_ptr<const ProcessHandle> OfPeer(int socket_fd, pid_t pid);
  // The process holding `pid` now (pidfd_open), for a caller that knows which one that is (itself);
  // null if there is none.
  static std::shared_ptr<const ProcessHandle> Of(pid_t pid);
  ProcessHandle(const ProcessHandle&) = delete;
  ProcessHandle& operator=(const ProcessHandle&) = delete;
  ~ProcessHandle();

  pid_t pid() const { return pid_; }
  // Its start time (ProcessStartTime), read while it was known to be alive.
  uint64_t start_time() const { return start_time_; }
  // Whether it has not exited yet (a zombie has).
  bool Alive() const;

 private:
  ProcessHandle(int pidfd, pid_t pid, uint64_t start_time)
      : pidfd_(pidfd), pid_(pid), start_time_(start_time) {}
  // Takes `pidfd` (of `pid`); null, closing it, if its process has exited.
  static std::shared_ptr<const ProcessHandle> Held(int pidfd, pid_t pid);
  int pidfd_;
  pid_t pid_;
  uint64_t start_time_;
};

// Sends SIGKILL to process `pid` if it is still the one that started at `start_time`
// (ProcessStartTime): a pidfd holds the process while its start time is checked, so a pid reused
// meanwhile is never hit. Returns whether the signal was sent. Thread-safe.
bool KillProcess(pid_t pid, uint64_t start_time);

}  // namespace gpumux
