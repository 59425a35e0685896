#include "node/tenant_libraries.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "base/error.h"

namespace gpumux::node {
namespace {

namespace fs = std::filesystem;

std::string Read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

class TenantLibrariesInstall : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("gpumux_install_shim_" + std::to_string(getpid()));
    from_ = root_ / "build";
    to_ = root_ / "node";
    fs::remove_all(root_);
    fs::create_directories(from_ / "simgpu");
    std::ofstream(from_ / "libgpumux.so") << "shim v1";
    std::ofstream(from_ / "simgpu" / "libcuda.so.1") << "cuda v1";
    std::ofstream(from_ / "simgpu" / "libnvidia-ml.so.1") << "nvml v1";
    chmod(root_.c_str(), 0755);
  }
  void TearDown() override { fs::remove_all(root_); }

  fs::path root_, from_, to_;  // from_: a build's libraries; to_: the node folder
};

TEST_F(TenantLibrariesInstall, CopiesTheShimAndTheSimulatedDriverOnceAndOnlyWhatChanged) {
  EXPECT_FALSE(HoldsTenantLibraries(to_.string()));
  auto first = InstallTenantLibraries(from_.string(), to_.string());
  EXPECT_EQ(first.size(), 3u);
  EXPECT_TRUE(HoldsTenantLibraries(to_.string()));
  EXPECT_EQ(Read(to_ / "libgpumux.so"), "shim v1");
  EXPECT_EQ(Read(to_ / "simgpu" / "libcuda.so.1"), "cuda v1");
  EXPECT_EQ(Read(to_ / "simgpu" / "libnvidia-ml.so.1"), "nvml v1");
  struct stat st;
  ASSERT_EQ(stat(to_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u);
  ASSERT_EQ(stat((to_ / "libgpumux.so").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u) << "every tenant's user reads it; only its owner writes it";
  EXPECT_TRUE(InstallTenantLibraries(from_.string(), to_.string()).empty()) << "nothing changed";

  std::ofstream(from_ / "libgpumux.so") << "shim v2, longer";
  auto second = InstallTenantLibraries(from_.string(), to_.string());
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0], (to_ / "libgpumux.so").string());
  EXPECT_EQ(Read(to_ / "libgpumux.so"), "shim v2, longer");
  for (const auto& entry : fs::directory_iterator(to_))
    EXPECT_EQ(entry.path().filename().string().find(".new"), std::string::npos)
        << "no file left half-way: " << entry.path();
}

// A tenant that loaded the shim keeps the file it mapped when a new version is installed: the new
// one is another file renamed over the name, never the old one rewritten under it.
TEST_F(TenantLibrariesInstall, ARunningTenantKeepsTheShimItLoadedWhileANewOneIsInstalled) {
  InstallTenantLibraries(from_.string(), to_.string());
  int loaded = open((to_ / "libgpumux.so").c_str(), O_RDONLY);
  ASSERT_GE(loaded, 0);
  std::ofstream(from_ / "libgpumux.so") << "shim v2";
  InstallTenantLibraries(from_.string(), to_.string());
  char bytes[16] = {};
  ASSERT_EQ(pread(loaded, bytes, sizeof(bytes), 0), 7);
  EXPECT_EQ(std::string(bytes), "shim v1");
  close(loaded);
  EXPECT_EQ(Read(to_ / "libgpumux.so"), "shim v2");
}

// Whoever may write the folder chooses what every tenant loads: a link, a folder others may write,
// or another user's folder is refused, and nothing is written through it.
TEST_F(TenantLibrariesInstall, AFolderOthersCouldChangeOrALinkIsRefused) {
  fs::create_directories(root_ / "elsewhere");
  fs::create_symlink(root_ / "elsewhere", to_);
  try {
    InstallTenantLibraries(from_.string(), to_.string());
    ADD_FAILURE() << "a link was followed";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadInput);
    EXPECT_NE(std::string(e.what()).find("is a link"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(root_ / "elsewhere" / "libgpumux.so"));
  fs::remove(to_);

  fs::create_directories(to_);
  chmod(to_.c_str(), 0777);
  EXPECT_THROW(InstallTenantLibraries(from_.string(), to_.string()), Error);
  EXPECT_FALSE(fs::exists(to_ / "libgpumux.so"));
  chmod(to_.c_str(), 0755);
  fs::create_directories(to_ / "simgpu");
  chmod((to_ / "simgpu").c_str(), 0775);
  EXPECT_THROW(InstallTenantLibraries(from_.string(), to_.string()), Error)
      << "its simgpu/ folder is checked too";
  chmod((to_ / "simgpu").c_str(), 0755);

  if (geteuid() != 0) GTEST_SKIP() << "another user's folder: needs root to make one";
  ASSERT_EQ(chown(to_.c_str(), 65534, 65534), 0);
  EXPECT_THROW(InstallTenantLibraries(from_.string(), to_.string()), Error);
  EXPECT_FALSE(fs::exists(to_ / "libgpumux.so"));
}

TEST_F(TenantLibrariesInstall, AFolderWithoutTheShimIsRefusedNamingIt) {
  fs::remove(from_ / "libgpumux.so");
  try {
    InstallTenantLibraries(from_.string(), to_.string());
    ADD_FAILURE() << "installed without the shim";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(from_.string()), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(to_));
}

}  // namespace
}  // namespace gpumux::node
