#include "base/instance_lock.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <functional>
#include <filesystem>
#include <string>

#include "base/error.h"

namespace gpumux {
namespace {

namespace fs = std::filesystem;

class InstanceLock : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpumux-lock-XXXXXX";
    dir_ = mkdtemp(tmpl);
    path_ = dir_ + "/x.lock";
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs `body` in a child process named `comm`; returns its exit status.
  static int InChild(const std::string& comm, const std::function<int()>& body) {
    pid_t pid = fork();
    if (pid == 0) {
      prctl(PR_SET_NAME, comm.c_str());
      _exit(body());
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  // A child named `comm` that holds an exclusive flock on `path` (opened read-only, as anyone
  // who can read a file can) until killed; returns its pid once it holds it.
  static pid_t Holder(const std::string& path, const std::string& comm) {
    int ready[2];
    if (pipe(ready) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
      prctl(PR_SET_NAME, comm.c_str());
      int fd = open(path.c_str(), O_RDONLY);
      char ok = fd >= 0 && flock(fd, LOCK_EX) == 0 ? 'y' : 'n';
      (void)!write(ready[1], &ok, 1);
      pause();
      _exit(0);
    }
    char ok = 0;
    (void)!read(ready[0], &ok, 1);
    close(ready[0]);
    close(ready[1]);
    return ok == 'y' ? pid : -1;
  }
  // The lock file as an older gpumuxd made it, 0644: anyone could open it and wait in flock.
  bool MakeOpenToAll() const {
    int fd = open(path_.c_str(), O_RDWR | O_CREAT, 0644);
    bool made = fd >= 0 && fchmod(fd, 0644) == 0;
    if (fd >= 0) close(fd);
    return made;
  }
  static void End(pid_t pid) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  std::string dir_, path_;
};

TEST_F(InstanceLock, MakesAFileOnlyItsOwnerCanOpenAndHoldsIt) {
  int status = InChild("first", [&] {
    LockInstance(path_, "x", "first");
    struct stat st;
    if (stat(path_.c_str(), &st) != 0 || (st.st_mode & 0777) != 0600) return 2;
    // A second taker, in another process, is refused while this one lives.
    return InChild("second", [&] {
      try {
        LockInstance(path_, "x", "first");
        return 3;
      } catch (const Error& e) {
        return std::string(e.what()).find("pid " + std::to_string(getppid())) !=
                       std::string::npos
                   ? 0
                   : 4;
      }
    });
  });
  EXPECT_EQ(status, 0);
  // Once it exits, the lock is free.
  EXPECT_EQ(InChild("third", [&] {
              LockInstance(path_, "x", "third");
              return 0;
            }),
            0);
}

TEST_F(InstanceLock, AFileOthersCouldOpenIsReplacedWhoeverHoldsIt) {
  ASSERT_TRUE(MakeOpenToAll());
  pid_t squatter = Holder(path_, "squatter");
  ASSERT_GT(squatter, 0);
  EXPECT_EQ(InChild("gpumuxd", [&] {
              try {
                LockInstance(path_, "x", "gpumuxd");
              } catch (const Error&) {
                return 1;
              }
              struct stat st;
              return stat(path_.c_str(), &st) == 0 && (st.st_mode & 077) == 0 ? 0 : 2;
            }),
            0)
      << "a process that is not gpumuxd holding the old file keeps gpumuxd out";
  End(squatter);
}

TEST_F(InstanceLock, AnOlderInstanceStillHoldingItsOpenFileIsAConflict) {
  ASSERT_TRUE(MakeOpenToAll());
  pid_t older = Holder(path_, "gpumuxd");
  ASSERT_GT(older, 0);
  {
    std::string pid = std::to_string(older) + "\n";
    int w = open(path_.c_str(), O_WRONLY);
    ASSERT_EQ(pwrite(w, pid.data(), pid.size(), 0), ssize_t(pid.size()));
    close(w);
  }
  EXPECT_EQ(InChild("gpumuxd", [&] {
              try {
                LockInstance(path_, "x", "gpumuxd");
                return 1;
              } catch (const Error&) {
                return 0;
              }
            }),
            0)
      << "two gpumuxd would serve one directory during an upgrade";
  End(older);
}

TEST_F(InstanceLock, ASymbolicLinkIsNotFollowed) {
  std::string target = dir_ + "/elsewhere";
  ASSERT_EQ(symlink(target.c_str(), path_.c_str()), 0);
  EXPECT_EQ(InChild("gpumuxd", [&] {
              LockInstance(path_, "x", "gpumuxd");
              return 0;
            }),
            0);
  EXPECT_FALSE(fs::exists(target)) << "the lock was made through a link";
}

}  // namespace
}  // namespace gpumux
