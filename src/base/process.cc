#include "base/process.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace gpumux {

std::optional<uint64_t> ProcessStartTime(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(in, text)) return std::nullopt;
  // The command name (field 2) may hold spaces: fields are counted after the last ')'.
  size_t close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(text.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && rest >> field; ++i) {
    if (i == 3 && field == "Z") return std::nullopt;  // a zombie has exited
    if (i == 22) return std::stoull(field);
  }
  return std::nullopt;
}

std::optional<uid_t> ProcessUid(pid_t pid) {
  if (pid <= 0) return std::nullopt;
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Uid:", 0) != 0) continue;
    std::istringstream fields(line.substr(4));
    unsigned long real = 0, effective = 0;
    if (fields >> real >> effective) return uid_t(effective);
  }
  return std::nullopt;
}

std::optional<pid_t> ProcessMapping(const std::string& path) {
  struct stat file;
  if (stat(path.c_str(), &file) != 0) return std::nullopt;
  // A maps line: address perms offset major:minor inode [path], the device in hex.
  char device[32];
  std::snprintf(device, sizeof(device), "%02x:%02x", major(file.st_dev), minor(file.st_dev));
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream maps(entry.path() / "maps");
    for (std::string line; std::getline(maps, line);) {
      std::istringstream fields(line);
      std::string address, perms, offset, dev;
      unsigned long long inode = 0;
      if (fields >> address >> perms >> offset >> dev >> inode && inode == file.st_ino &&
          dev == device)
        return pid_t(std::stol(name));
    }
  }
  return std::nullopt;
}

std::optional<std::string> ProcessEnvironment(pid_t pid, const std::string& name) {
  if (pid <= 0) return std::nullopt;
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  const std::string prefix = name + "=";
  for (std::string entry; std::getline(in, entry, '\0');) {
    if (entry.compare(0, prefix.size(), prefix) == 0) return entry.substr(prefix.size());
  }
  return std::nullopt;
}

}  // namespace gpumux

namespace gpumux {

std::shared_ptr<const ProcessHandle> ProcessHandle::OfPeer(int socket_fd, pid_t pid) {
  if (pid <= 0) return nullptr;
#ifndef SO_PEERPIDFD
  constexpr int SO_PEERPIDFD = 77;  // Linux 6.5; older headers lack it
#endif
  int pidfd = -1;
  socklen_t len = sizeof(pidfd);
  if (getsockopt(socket_fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) != 0) {
    // Only a kernel without the option falls back to the pid; any other failure means the process
    // that connected is gone, and whatever holds its pid now is someone else.
    return errno == ENOPROTOOPT ? Of(pid) : nullptr;
  }
  return Held(pidfd, pid);
}

std::shared_ptr<const ProcessHandle> ProcessHandle::Of(pid_t pid) {
  int pidfd = pid > 0 ? int(syscall(SYS_pidfd_open, pid, 0)) : -1;
  return pidfd >= 0 ? Held(pidfd, pid) : nullptr;
}

std::shared_ptr<const ProcessHandle> ProcessHandle::Held(int pidfd, pid_t pid) {
  std::optional<uint64_t> start = ProcessStartTime(pid);
  std::shared_ptr<const ProcessHandle> handle(new ProcessHandle(pidfd, pid, start.value_or(0)));
  // Read while the pidfd's process was alive: the start time is that process's.
  return start && handle->Alive() ? handle : nullptr;
}

ProcessHandle::~ProcessHandle() { close(pidfd_); }

bool ProcessHandle::Alive() const {
  // A pidfd polls readable once its process has exited.
  pollfd p{pidfd_, POLLIN, 0};
  return poll(&p, 1, 0) == 0;
}

bool KillProcess(pid_t pid, uint64_t start_time) {
  if (pid <= 0) return false;
  int fd = int(syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return false;
  bool sent = ProcessStartTime(pid) == start_time &&
              syscall(SYS_pidfd_send_signal, fd, SIGKILL, nullptr, 0) == 0;
  close(fd);
  return sent;
}

}  // namespace gpumux
