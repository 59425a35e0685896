#include "base/cgroup.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>

namespace gpumux {
namespace {

std::vector<std::string> Split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, separator)) parts.push_back(part);
  return parts;
}

// mountinfo writes ' ', '\t', '\n' and '\\' in paths as \ooo.
std::string Unescape(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 3 < text.size()) {
      int value = 0;
      bool octal = true;
      for (size_t k = 1; k <= 3; ++k) {
        octal = octal && text[i + k] >= '0' && text[i + k] <= '7';
        value = value * 8 + (text[i + k] - '0');
      }
      if (octal) {
        out += char(value);
        i += 3;
        continue;
      }
    }
    out += text[i];
  }
  return out;
}

struct CgroupMount {
  bool v2 = false;
  std::vector<std::string> options;  // v1: its super options ("rw", "pids", "name=systemd")
  std::string root, point;           // the group it shows, and where
};

std::vector<CgroupMount> CgroupMounts(const std::string& mountinfo) {
  std::vector<CgroupMount> mounts;
  std::istringstream in(mountinfo);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> f = Split(line, ' ');
    size_t dash = 6;
    while (dash < f.size() && f[dash] != "-") ++dash;
    if (f.size() < 5 || dash + 1 >= f.size()) continue;
    const std::string& type = f[dash + 1];
    if (type != "cgroup" && type != "cgroup2") continue;
    CgroupMount m;
    m.v2 = type == "cgroup2";
    if (dash + 3 < f.size()) m.options = Split(f[dash + 3], ',');
    m.root = Unescape(f[3]);
    m.point = Unescape(f[4]);
    mounts.push_back(std::move(m));
  }
  return mounts;
}

// Whether v1 mount `m` is of the hierarchy whose /proc/PID/cgroup controllers are `controllers`.
bool OfHierarchy(const CgroupMount& m, const std::string& controllers) {
  if (m.v2 || controllers.empty()) return m.v2 && controllers.empty();
  for (const std::string& c : Split(controllers, ','))
    if (std::find(m.options.begin(), m.options.end(), c) == m.options.end()) return false;
  return true;
}

bool SameName(const std::string& a, size_t from, const std::string& b) {
  if (a.size() - from != b.size()) return false;
  for (size_t i = 0; i < b.size(); ++i) {
    char x = a[from + i], y = b[i];
    bool dash = (x == '-' || x == '_') && (y == '-' || y == '_');
    if (x != y && !dash) return false;
  }
  return true;
}

// `component` is group `name`, or a systemd slice ending in "-<name>".
bool Names(const std::string& component, const std::string& name) {
  if (SameName(component, 0, name)) return true;
  const std::string suffix = ".slice";
  if (component.size() < name.size() + suffix.size() + 1 ||
      component.compare(component.size() - suffix.size(), suffix.size(), suffix) != 0)
    return false;
  std::string stem = component.substr(0, component.size() - suffix.size());
  return stem[stem.size() - name.size() - 1] == '-' &&
         SameName(stem, stem.size() - name.size(), name);
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// This mount namespace's cgroup mounts, read again at most every 10 s rather than at each call: a
// hierarchy is mounted at boot and rarely after, while a busy node's mountinfo (every pod's
// volumes, seen through gpumuxd's /host) runs to thousands of lines.
std::vector<CgroupMount> CurrentCgroupMounts() {
  static std::mutex mu;
  static std::vector<CgroupMount> mounts;
  static std::chrono::steady_clock::time_point read;
  std::lock_guard lock(mu);
  auto now = std::chrono::steady_clock::now();
  if (read == std::chrono::steady_clock::time_point() || now - read > std::chrono::seconds(10)) {
    mounts = CgroupMounts(ReadAll("/proc/self/mountinfo"));
    read = now;
  }
  return mounts;
}

std::vector<CgroupDir> DirsIn(const std::string& proc_cgroup,
                              const std::vector<CgroupMount>& mounts) {
  std::vector<CgroupDir> dirs;
  std::set<std::string> seen;  // hierarchy ids and controllers
  std::istringstream in(proc_cgroup);
  for (std::string line; std::getline(in, line);) {
    // "ID:CONTROLLERS:PATH"; the path may hold ':'.
    size_t first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    std::string controllers = line.substr(first + 1, second - first - 1);
    // Each hierarchy is listed once. A kernel before 5.2 let a group's name hold '\n', and so a
    // user's group forge a line of its own: a file that lists one twice is believed in nothing.
    std::vector<std::string> keys = Split(controllers, ',');
    keys.push_back("#" + line.substr(0, first));
    for (const std::string& key : keys)
      if (!seen.insert(key).second) return {};
    std::string path = line.substr(second + 1);
    if (path.empty() || path[0] != '/' || path.find("/..") != std::string::npos) continue;
    for (const CgroupMount& m : mounts) {
      if (!OfHierarchy(m, controllers)) continue;
      // A mount of a subtree shows only the groups under its root.
      std::string root = m.root == "/" ? "" : m.root;
      if (path.compare(0, root.size(), root) != 0 ||
          (path.size() > root.size() && path[root.size()] != '/'))
        continue;
      std::string point = m.point == "/" ? "" : m.point;
      dirs.push_back({point, path.substr(root.size()), m.v2});
      break;
    }
  }
  return dirs;
}

}  // namespace

std::vector<CgroupDir> ParseCgroupDirs(const std::string& proc_cgroup,
                                       const std::string& mountinfo) {
  return DirsIn(proc_cgroup, CgroupMounts(mountinfo));
}

std::vector<CgroupDir> CgroupDirsOf(pid_t pid) {
  std::string cgroups = ProcessGroupsText(pid);
  if (cgroups.empty()) return {};
  return DirsIn(cgroups, CurrentCgroupMounts());
}

std::string ProcessGroupsText(pid_t pid) {
  return pid > 0 ? ReadAll("/proc/" + std::to_string(pid) + "/cgroup") : "";
}

namespace {

// The full path of the first group of `dirs` named `name` whose directory is root's, among the
// v2 hierarchy's alone where `v2_only`.
std::optional<std::string> GroupNamed(const std::vector<CgroupDir>& dirs, const std::string& name,
                                      bool v2_only) {
  if (name.empty()) return std::nullopt;
  for (const CgroupDir& d : dirs) {
    if (v2_only && !d.v2) continue;
    std::string prefix = d.mount;
    for (const std::string& component : Split(d.path, '/')) {
      if (component.empty()) continue;
      prefix += "/" + component;
      if (!Names(component, name)) continue;
      struct stat st;
      if (lstat(prefix.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == 0) return prefix;
    }
  }
  return std::nullopt;
}

}  // namespace

bool InCgroupNamed(const std::vector<CgroupDir>& dirs, const std::string& name) {
  return GroupNamed(dirs, name, false).has_value();
}

std::optional<std::string> V2GroupNamed(const std::vector<CgroupDir>& dirs,
                                        const std::string& name) {
  return GroupNamed(dirs, name, true);
}

bool CgroupV2Mounted() {
  for (const CgroupMount& m : CurrentCgroupMounts())
    if (m.v2) return true;
  return false;
}

std::optional<std::string> V2GroupOf(pid_t pid) {
  for (const CgroupDir& d : CgroupDirsOf(pid))
    if (d.v2) return d.full();
  return std::nullopt;
}

bool ProcessInCgroup(pid_t pid, const std::string& name) {
  return InCgroupNamed(CgroupDirsOf(pid), name);
}

bool JoinCgroupNamespace(const std::string& ns_file, std::string* why) {
  struct stat target, self;
  if (stat(ns_file.c_str(), &target) != 0 || stat("/proc/self/ns/cgroup", &self) != 0) {
    *why = "cannot read " + ns_file + ": " + std::strerror(errno);
    return false;
  }
  if (target.st_ino == self.st_ino && target.st_dev == self.st_dev) return true;
  int fd = open(ns_file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || setns(fd, CLONE_NEWCGROUP) != 0) {
    *why = "cannot join the cgroup namespace of " + ns_file + ": " + std::strerror(errno);
    if (fd >= 0) close(fd);
    return false;
  }
  close(fd);
  return true;
}

}  // namespace gpumux
