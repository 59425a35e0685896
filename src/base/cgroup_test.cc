#include "base/cgroup.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

namespace gpumux {
namespace {

namespace fs = std::filesystem;

// A node with cgroup v1 hierarchies (as Debian 11 and many GPU nodes still run) and the unified
// one, as /proc/self/mountinfo shows them.
constexpr char kMountinfo[] =
    "30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "31 30 0:28 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
    "38 30 0:35 / /sys/fs/cgroup/pids rw,relatime shared:9 - cgroup cgroup rw,pids\n"
    "39 30 0:36 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd\n"
    "40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw,nsdelegate\n"
    "41 22 0:38 /kubepods /mnt/pods\\040here rw - cgroup cgroup rw,memory\n";

TEST(CgroupDirs, EachHierarchyIsPlacedUnderItsMountAndWhatCannotBeCheckedIsLeftOut) {
  std::vector<CgroupDir> dirs = ParseCgroupDirs(
      "12:pids:/kubepods/besteffort/pod1234/abc\n"
      "11:cpu,cpuacct:/kubepods/besteffort/pod1234/abc\n"
      "10:name=systemd:/system.slice/containerd.service\n"
      "9:memory:/kubepods/burstable/pod5678\n"
      "7:freezer:/kubepods/x\n"  // not mounted here
      "0::/user.slice/a:b\n",
      kMountinfo);
  ASSERT_EQ(dirs.size(), 5u);
  EXPECT_EQ(dirs[0].full(), "/sys/fs/cgroup/pids/kubepods/besteffort/pod1234/abc");
  EXPECT_EQ(dirs[1].full(), "/sys/fs/cgroup/cpu,cpuacct/kubepods/besteffort/pod1234/abc");
  EXPECT_EQ(dirs[2].full(), "/sys/fs/cgroup/systemd/system.slice/containerd.service");
  EXPECT_EQ(dirs[3].mount, "/mnt/pods here") << "mountinfo's \\040 is a space";
  EXPECT_EQ(dirs[3].path, "/burstable/pod5678");
  EXPECT_EQ(dirs[4].full(), "/sys/fs/cgroup/unified/user.slice/a:b");
  EXPECT_TRUE(ParseCgroupDirs("9:memory:/elsewhere\n", kMountinfo).empty())
      << "outside the only memory mount's root";
  EXPECT_TRUE(ParseCgroupDirs("0::/../../kubepods/pod9\n", kMountinfo).empty())
      << "outside this cgroup namespace";
}

// Before Linux 5.2 a group's name could hold a newline, and a user's group so forge a line of its
// own (here naming a pod's group); each hierarchy is listed once, so such a file is believed in
// nothing.
TEST(CgroupDirs, AFileThatListsAHierarchyTwiceIsBelievedInNothing) {
  const std::string forged = "0::/user.slice/user-1000.slice/x\n0::/kubepods/besteffort/pod1234\n";
  EXPECT_TRUE(ParseCgroupDirs("12:pids:/a\n" + forged, kMountinfo).empty());
  EXPECT_TRUE(ParseCgroupDirs("12:pids:/a\n13:pids:/kubepods/pod1234\n", kMountinfo).empty());
  EXPECT_TRUE(
      ParseCgroupDirs("11:cpu,cpuacct:/a\n14:cpuacct:/kubepods/pod1234\n", kMountinfo).empty());
  EXPECT_EQ(ParseCgroupDirs("12:pids:/a\n0::/b\n", kMountinfo).size(), 2u);
}

class CgroupNameTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root: it makes groups root owns and others own";
    mount_ = fs::temp_directory_path() / ("gpumux-cgroup-test-" + std::to_string(getpid()));
    fs::remove_all(mount_);
  }
  void TearDown() override {
    if (!mount_.empty()) fs::remove_all(mount_);
  }
  // Makes `path` under the fake mount (as root) and answers whether a process there is in `name`.
  bool In(const std::string& path, const std::string& name) {
    fs::create_directories(mount_.string() + path);
    return InCgroupNamed({{mount_.string(), path}}, name);
  }
  fs::path mount_;
};

TEST_F(CgroupNameTest, AGroupIsNamedByAWholeComponentOrASystemdPodSlice) {
  const std::string pod = "pod0a1b-2c3d";
  EXPECT_TRUE(In("/kubepods/besteffort/pod0a1b-2c3d/abc", pod)) << "cgroupfs";
  EXPECT_TRUE(
      In("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0a1b_2c3d.slice/"
         "cri-containerd-abc.scope",
         pod))
      << "systemd, the UID with underscores";
  EXPECT_TRUE(In("/kubepods.slice/kubepods-pod0a1b_2c3d.slice", pod)) << "a Guaranteed pod";
  EXPECT_FALSE(In("/kubepods/besteffort/pod0a1b-2c3d0/abc", pod)) << "another pod, longer";
  EXPECT_FALSE(In("/kubepods/besteffort/xpod0a1b-2c3d/abc", pod));
  EXPECT_FALSE(In("/kubepods/pod0a1b-2c3d.slice", pod)) << "a slice named only so";
  EXPECT_FALSE(In("/kubepods/pod0a1b-2c3d-x.slice", pod));
  EXPECT_FALSE(In("/kubepods/besteffort/pod0a1b-2c3d", ""));
  EXPECT_FALSE(InCgroupNamed({{mount_.string(), "/not/made/pod0a1b-2c3d"}}, pod))
      << "a group gpumuxd cannot see";
}

// A user to whom systemd delegates a subtree (user@UID.service) can make a group of any name in
// it; such a group is the user's, and names no pod.
TEST_F(CgroupNameTest, AGroupAUserMadeInItsDelegatedSubtreeIsNoPods) {
  const std::string pod = "pod0a1b-2c3d";
  const std::string delegated = "/user.slice/user-65534.slice/user@65534.service";
  fs::create_directories(mount_.string() + delegated);
  ASSERT_EQ(chown((mount_.string() + delegated).c_str(), 65534, 65534), 0);
  for (std::string made : {"/pod0a1b-2c3d", "/kubepods-besteffort-pod0a1b_2c3d.slice"}) {
    std::string dir = mount_.string() + delegated + made;
    fs::create_directories(dir);
    ASSERT_EQ(chown(dir.c_str(), 65534, 65534), 0);  // as mkdir by that user leaves it
    EXPECT_FALSE(InCgroupNamed({{mount_.string(), delegated + made + "/app"}}, pod)) << made;
  }
  // The same names, made by root (the kubelet), are the pod's.
  EXPECT_TRUE(In("/kubepods/pod0a1b-2c3d", pod));
}

TEST(ProcessCgroups, ThisProcessIsInItsOwnGroupsAndAGoneOneInNone) {
  std::vector<CgroupDir> mine = CgroupDirsOf(getpid());
  EXPECT_TRUE(CgroupDirsOf(-1).empty());
  EXPECT_TRUE(CgroupDirsOf(999999999).empty());
  for (const CgroupDir& d : mine) {
    EXPECT_TRUE(fs::is_directory(d.full())) << d.full();
    std::string last = d.path.substr(d.path.rfind('/') + 1);
    struct stat st;
    if (!last.empty() && stat(d.full().c_str(), &st) == 0 && st.st_uid == 0) {
      EXPECT_TRUE(ProcessInCgroup(getpid(), last)) << d.full();
    }
  }
}

}  // namespace
}  // namespace gpumux
