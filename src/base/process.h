// Facts about the host's processes that gpumux's accounting relies on.
#pragma once

#include <sys/types.h>

#include <cstdint>
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

// Sends SIGKILL to process `pid` if it is still the one that started at `start_time`
// (ProcessStartTime): a pidfd holds the process while its start time is checked, so a pid reused
// meanwhile is never hit. Returns whether the signal was sent. Thread-safe.
bool KillProcess(pid_t pid, uint64_t start_time);

}  // namespace gpumux
