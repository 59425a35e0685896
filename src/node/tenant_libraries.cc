#include "node/tenant_libraries.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "base/error.h"

namespace gpumux::node {
namespace {

namespace fs = std::filesystem;

std::string Why() { return std::strerror(errno); }

// `dir` as a folder only the caller or root can change: made (0755) if missing; refused if it is a
// link, not a folder, or another user owns it or may write it.
void MakeOwnFolder(const std::string& dir) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    throw Unavailable("install-shim: cannot make " + dir + ": " + Why());
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0) throw Unavailable("install-shim: " + dir + ": " + Why());
  if (S_ISLNK(st.st_mode)) throw BadInput("install-shim: " + dir + " is a link: not followed");
  if (!S_ISDIR(st.st_mode)) throw BadInput("install-shim: " + dir + " is not a folder");
  if ((st.st_uid != 0 && st.st_uid != geteuid()) || (st.st_mode & 022))
    throw BadInput("install-shim: " + dir +
                   " is another user's or others may write it: whoever can would choose what "
                   "every tenant loads");
}

std::string Contents(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Unavailable("install-shim: cannot read " + path.string());
  return {std::istreambuf_iterator<char>(in), {}};
}

// Writes `bytes` to `target` whole: a new file beside it, renamed over it.
void ReplaceWhole(const fs::path& target, const std::string& bytes) {
  fs::path temporary = target.parent_path() / ("." + target.filename().string() + ".new");
  unlink(temporary.c_str());  // one left by an install that was cut short
  int fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) throw Unavailable("install-shim: cannot write " + temporary.string() + ": " + Why());
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += size_t(n);
  }
  bool whole = done == bytes.size() && fchmod(fd, 0644) == 0 && fsync(fd) == 0;
  std::string why = Why();
  close(fd);
  if (!whole || rename(temporary.c_str(), target.c_str()) != 0) {
    if (whole) why = Why();
    unlink(temporary.c_str());
    throw Unavailable("install-shim: cannot write " + target.string() + ": " + why);
  }
}

}  // namespace

std::vector<std::string> InstallTenantLibraries(const std::string& from_dir,
                                                const std::string& to_dir) {
  std::vector<fs::path> files = {"libgpumux.so"};
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(fs::path(from_dir) / "simgpu", error))
    if (entry.symlink_status().type() == fs::file_type::regular)  // not the build's .so links
      files.push_back(fs::path("simgpu") / entry.path().filename());
  if (!fs::exists(fs::path(from_dir) / "libgpumux.so"))
    throw Unavailable("install-shim: no libgpumux.so in " + from_dir);
  fs::create_directories(fs::path(to_dir).parent_path(), error);  // as the folder is checked
  MakeOwnFolder(to_dir);
  if (files.size() > 1) MakeOwnFolder(to_dir + "/simgpu");
  std::vector<std::string> replaced;
  for (const fs::path& file : files) {
    std::string bytes = Contents(fs::path(from_dir) / file);
    fs::path target = fs::path(to_dir) / file;
    struct stat st;
    if (lstat(target.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        size_t(st.st_size) == bytes.size() && Contents(target) == bytes)
      continue;
    ReplaceWhole(target, bytes);
    replaced.push_back(target.string());
  }
  return replaced;
}

bool HoldsTenantLibraries(const std::string& dir) {
  struct stat st;
  return stat((dir + "/libgpumux.so").c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace gpumux::node
