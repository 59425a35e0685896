#include "node/ledger/activity.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <limits>

#include "base/error.h"

namespace gpumux::node {
namespace {

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

}  // namespace

ActivityWriter::ActivityWriter(const std::string& path) {
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) throw Unavailable(Errno(path + ": cannot open the tenant's activity file"));
  struct stat st;
  if (fstat(fd, &st) != 0 || size_t(st.st_size) < sizeof(ActivityWords)) {
    close(fd);
    throw Unavailable(path + ": the tenant's activity file is cut short");
  }
  void* p = mmap(nullptr, sizeof(ActivityWords), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) throw Unavailable(Errno(path + ": cannot map the tenant's activity file"));
  words_ = static_cast<ActivityWords*>(p);
}

ActivityWriter::~ActivityWriter() {
  if (words_) munmap(words_, sizeof(ActivityWords));
}

ActivityReader::ActivityReader(const std::string& path, uid_t owner) : path_(path), owner_(owner) {
  // Only root can give a file away; otherwise it is gpumuxd's user's own.
  const uid_t file_owner = geteuid() == 0 ? owner : geteuid();
  // O_NONBLOCK: a lease its owner holds on the file makes this fail at once (EWOULDBLOCK) rather
  // than wait out lease-break-time; the file is then made anew. Once gpumuxd holds it open for
  // writing, no lease can be taken on it.
  fd_ = open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  struct stat st;
  if (fd_ >= 0 && (fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != file_owner)) {
    close(fd_);
    fd_ = -1;
  }
  // A file of the layout before records per GPU is this one cut short: extended in place, it keeps
  // what the processes that still map it publish.
  if (fd_ >= 0 && size_t(st.st_size) == kActivityBytesOfOneGpu)
    (void)!posix_fallocate(fd_, 0, sizeof(ActivityWords));
  if (fd_ >= 0 && (fstat(fd_, &st) != 0 || size_t(st.st_size) != sizeof(ActivityWords))) {
    close(fd_);
    fd_ = -1;
  }
  if (fd_ >= 0) return;
  unlink(path.c_str());
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) throw Unavailable(Errno(path + ": cannot make the tenant's activity file"));
  // Every page allocated now: the tenant's processes never fault on a full filesystem.
  int allocated = posix_fallocate(fd, 0, sizeof(ActivityWords));
  if (allocated != 0) errno = allocated;
  bool made = allocated == 0 &&
              (geteuid() != 0 || fchown(fd, file_owner, gid_t(-1)) == 0) && fchmod(fd, 0600) == 0;
  if (!made) {
    std::string why = Errno(path + ": cannot make the tenant's activity file");
    close(fd);
    unlink(path.c_str());
    throw Unavailable(why);
  }
  fd_ = fd;
}

ActivityReader::~ActivityReader() {
  if (fd_ >= 0) close(fd_);
}

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

bool ActivityReader::KeepSize() {
  struct stat st;
  if (fd_ < 0 || fstat(fd_, &st) != 0) return false;
  // The bytes a file of exactly its size takes: whole pages.
  const off_t page = sysconf(_SC_PAGESIZE);
  const off_t allocated = (off_t(sizeof(ActivityWords)) + page - 1) / page * page;
  if (st.st_size <= off_t(sizeof(ActivityWords)) && off_t(st.st_blocks) * 512 <= allocated)
    return false;
  // Cut back: also frees what was allocated past the end (fallocate with FALLOC_FL_KEEP_SIZE),
  // which ftruncate to the size it has does on tmpfs, and the punch does elsewhere.
  (void)!ftruncate(fd_, sizeof(ActivityWords));
  (void)!fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, allocated,
                   std::numeric_limits<off_t>::max() - allocated);
  (void)!posix_fallocate(fd_, 0, sizeof(ActivityWords));
  return true;
}

void ActivityReader::Remove() { unlink(path_.c_str()); }

}  // namespace gpumux::node
