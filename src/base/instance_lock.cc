#include "base/instance_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>

#include "base/error.h"
#include "base/process.h"

namespace gpumux {
namespace {

// Whether `st` is a file only its owner, the caller, can open: regular, one name, mode 0600 or
// less.
bool OnlyMine(const struct stat& st) {
  return S_ISREG(st.st_mode) && st.st_uid == geteuid() && (st.st_mode & 077) == 0 &&
         st.st_nlink == 1;
}

std::string PidIn(int fd) {
  char pid[32] = {0};
  (void)!pread(fd, pid, sizeof(pid) - 1, 0);
  return std::string(pid, strcspn(pid, "\n"));
}

// Whether process `pid` is a live `program` of the caller's user.
bool LiveInstance(const std::string& pid_text, const std::string& program) {
  char* end = nullptr;
  long pid = std::strtol(pid_text.c_str(), &end, 10);
  if (pid <= 0 || end == pid_text.c_str() || *end) return false;
  if (ProcessUid(pid_t(pid)) != geteuid()) return false;
  std::ifstream comm("/proc/" + pid_text + "/comm");
  std::string name;
  return std::getline(comm, name) && name == program.substr(0, 15);  // comm is cut at 15
}

[[noreturn]] void Held(int fd, const std::string& path, const std::string& what) {
  std::string pid = PidIn(fd);
  close(fd);
  throw Conflict("another gpumuxd (pid " + pid + ") already serves " + what + " (lock " + path +
                 ")");
}

}  // namespace

void LockInstance(const std::string& path, const std::string& what, const std::string& program) {
  // Removes what is at `path` (`what_is_there`, for the message) so that a file of ours is made.
  auto replace = [&](const char* what_is_there) {
    if (unlink(path.c_str()) != 0 && errno != ENOENT)
      throw Unavailable(path + ": cannot replace " + what_is_there + ": " + std::strerror(errno));
  };
  for (int attempt = 0; attempt < 16; ++attempt) {
    int fd = open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && !OnlyMine(st)) {
      // Another user may hold it open. An instance of ours that made it so (an older version)
      // still counts; anyone else's hold does not.
      if (S_ISREG(st.st_mode) && st.st_uid == geteuid() && flock(fd, LOCK_EX | LOCK_NB) != 0 &&
          LiveInstance(PidIn(fd), program))
        Held(fd, path, what);
      close(fd);
      replace("a lock file others may open");
      continue;
    }
    if (fd < 0 && errno == ELOOP) {  // a symbolic link someone placed: not followed, replaced
      replace("a link at the lock file's path");
      continue;
    }
    if (fd < 0 && errno == ENOENT) {
      fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
      if (fd < 0 && errno == EEXIST) continue;  // another instance made it first: look again
    }
    if (fd < 0) throw Unavailable(path + ": cannot open the lock file: " + std::strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) Held(fd, path, what);
    // The path must still name what we locked (not unlinked and made anew meanwhile).
    struct stat named;
    if (stat(path.c_str(), &named) != 0 || fstat(fd, &st) != 0 || named.st_ino != st.st_ino ||
        named.st_dev != st.st_dev || !OnlyMine(st)) {
      close(fd);
      continue;
    }
    std::string mine = std::to_string(getpid()) + "\n";
    if (ftruncate(fd, 0) != 0 || pwrite(fd, mine.data(), mine.size(), 0) < 0) {
      // the lock holds without the pid in it
    }
    return;  // fd stays open (and locked) until the process ends
  }
  throw Unavailable(path + ": the lock file keeps changing under gpumuxd");
}

}  // namespace gpumux
