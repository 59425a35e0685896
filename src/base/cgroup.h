// Which control groups a process is in, as gpumuxd binds a tenant to a Kubernetes pod's: by the
// group's name, and only where the group is one that no user but root could have made.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace gpumux {

// One hierarchy's control group of a process: where its directory is in this mount namespace
// (`mount`, the hierarchy's mount point, then `path` within it, "/kubepods/besteffort/pod<UID>").
struct CgroupDir {
  std::string mount, path;
  bool v2 = false;  // of the unified hierarchy (cgroup v2)
  std::string full() const { return mount + path; }
};

// The control groups of a process from its /proc/PID/cgroup text, placed by this mount
// namespace's /proc/self/mountinfo text. A hierarchy that is not mounted here, or a path outside
// the reader's cgroup namespace ("/../x"), is left out: it cannot be checked.
std::vector<CgroupDir> ParseCgroupDirs(const std::string& proc_cgroup,
                                       const std::string& mountinfo);

// Process `pid`'s control groups (ParseCgroupDirs of its /proc/PID/cgroup and of this mount
// namespace's mountinfo, which is read again at most every 10 s); empty when it is gone.
// Thread-safe.
std::vector<CgroupDir> CgroupDirsOf(pid_t pid);

// Whether one of `dirs` lies in a group named `name`: a path component that is `name`, or ends in
// "-<name>.slice" as systemd names a Kubernetes pod's ("kubepods-burstable-pod<UID>.slice"), with
// '-' and '_' alike (systemd writes the UID with underscores) — and whose directory is root's. A
// user to whom a subtree is delegated (systemd's user@UID.service) can make a group of any name
// there, but it is that user's; so is a group it renames. Thread-safe.
bool InCgroupNamed(const std::vector<CgroupDir>& dirs, const std::string& name);

// The directory (its full path here) of the group named `name` (as InCgroupNamed matches it) of
// the cgroup v2 hierarchy among `dirs`; nullopt where there is none. What NVIDIA's driver takes
// as a memory limit's namespace. Thread-safe.
std::optional<std::string> V2GroupNamed(const std::vector<CgroupDir>& dirs,
                                        const std::string& name);

// Whether the cgroup v2 hierarchy is mounted in this mount namespace. Thread-safe.
bool CgroupV2Mounted();

// The directory (its full path here) of process `pid`'s group of the cgroup v2 hierarchy; nullopt
// where it is gone or cgroup v2 is not mounted here. Thread-safe.
std::optional<std::string> V2GroupOf(pid_t pid);

// The text of /proc/PID/cgroup, which names every group process `pid` is in: the same for the
// processes of one container, and for no process of another. Empty when it is gone. Thread-safe.
std::string ProcessGroupsText(pid_t pid);

// InCgroupNamed(CgroupDirsOf(pid), name).
bool ProcessInCgroup(pid_t pid, const std::string& name);

// Moves the calling thread into the cgroup namespace of `ns_file` ("/proc/1/ns/cgroup": the
// node's, for a gpumuxd that shares the node's PID namespace) when it is in another, so that
// /proc/PID/cgroup reads whole paths, not paths relative to a container's own group. Call it
// before starting threads (each thread has its own). Returns false, saying why, where it cannot
// (not root, or the file cannot be opened).
bool JoinCgroupNamespace(const std::string& ns_file, std::string* why);

}  // namespace gpumux
