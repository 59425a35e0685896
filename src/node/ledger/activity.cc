#include "node/ledger/activity.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>

#include "base/error.h"

namespace gpumux::node {
namespace {

// How /proc/PID/fd names the file: memfd_create's name, as the kernel shows it.
constexpr char kName[] = "gpumux-activity";
constexpr char kLink[] = "/memfd:gpumux-activity (deleted)";
// No one may grow, shrink or unseal it; its bytes stay writable (the tenant's processes count).
constexpr int kSeals = F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL;

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

// Whether `fd` is a file as ActivityReader makes it: sealed so, and of its size.
bool SealedAtSize(int fd) {
  struct stat st;
  return fcntl(fd, F_GET_SEALS) == kSeals && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
         size_t(st.st_size) == sizeof(ActivityWords);
}

}  // namespace

ActivityWriter::ActivityWriter(int fd) : fd_(fd) {
  struct stat st;
  if (fstat(fd, &st) != 0 || size_t(st.st_size) < sizeof(ActivityWords)) {
    close(fd);
    throw Unavailable("the tenant's activity file gpumuxd handed is cut short");
  }
  void* p = mmap(nullptr, sizeof(ActivityWords), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    std::string why = Errno("cannot map the tenant's activity file");
    close(fd);
    throw Unavailable(why);
  }
  words_ = static_cast<ActivityWords*>(p);
}

ActivityWriter::~ActivityWriter() {
  munmap(words_, sizeof(ActivityWords));
  close(fd_);
}

ActivityReader::ActivityReader() {
  fd_ = memfd_create(kName, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd_ < 0) throw Unavailable(Errno("cannot make a tenant's activity file"));
  // Every page allocated now, then sealed: nothing the tenant does takes more.
  int allocated = posix_fallocate(fd_, 0, sizeof(ActivityWords));
  if (allocated != 0) errno = allocated;
  if (allocated != 0 || fcntl(fd_, F_ADD_SEALS, kSeals) != 0) {
    std::string why = Errno("cannot make a tenant's activity file");
    close(fd_);
    throw Unavailable(why);
  }
}

std::unique_ptr<ActivityReader> ActivityReader::FoundIn(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = opendir(dir.c_str());
  if (!d) return nullptr;
  std::unique_ptr<ActivityReader> found;
  while (dirent* e = readdir(d)) {
    std::string path = dir + "/" + e->d_name;
    char link[64];
    ssize_t n = readlink(path.c_str(), link, sizeof(link));
    if (n != ssize_t(sizeof(kLink) - 1) || std::memcmp(link, kLink, size_t(n)) != 0) continue;
    // Opening the process's descriptor opens the same file (its pages, its seals). Non-blocking:
    // a lease its holder took (a container's root may: the file is root's) fails it at once
    // rather than wait out lease-break-time.
    int fd = open(path.c_str(), O_RDWR | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) continue;
    if (SealedAtSize(fd)) {
      found.reset(new ActivityReader(fd));
      break;
    }
    close(fd);
  }
  closedir(d);
  return found;
}

ActivityReader::~ActivityReader() { close(fd_); }

ActivityReader::Reading ActivityReader::Read(int gpu) const {
  if (gpu < 0 || gpu >= kMaxTenantGpus) return {};
  // The file as bytes; the counters and the burst words copied out of them.
  alignas(ActivityWords) unsigned char bytes[sizeof(ActivityWords)];
  if (pread(fd_, bytes, sizeof(bytes), 0) != ssize_t(sizeof(bytes))) return {};
  const size_t more = offsetof(ActivityWords, more) + size_t(gpu - 1) * sizeof(GpuActivity);
  const size_t ticks_at =
      gpu == 0 ? offsetof(ActivityWords, active_ticks) : more + offsetof(GpuActivity, active_ticks);
  const size_t burst_at =
      gpu == 0 ? offsetof(ActivityWords, burst) : more + offsetof(GpuActivity, burst);
  Reading r;
  std::memcpy(&r.held, bytes + offsetof(ActivityWords, held), sizeof(uint64_t));
  std::memcpy(&r.active_ticks, bytes + ticks_at, sizeof(uint64_t));
  std::memcpy(&r.burst, bytes + burst_at, sizeof(BurstWords));
  return r;
}

int ActivityReader::Share() const { return fcntl(fd_, F_DUPFD_CLOEXEC, 0); }

}  // namespace gpumux::node
