// What gpumux puts into a tenant's process loads in the tenant's image, whatever its distribution
// (issue 38): the shim and the simulated driver ask no glibc newer than 2.17 and no C++ runtime,
// export only their C API, and a program of a Debian 11 root (glibc 2.31, its own Python) runs
// under them and is held to its quota, under `gpumux run` and under gpumuxd.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "agent_fixture.h"

namespace {

using gpumux::testing::AgentTest;
using gpumux::testing::kGiB;
using gpumux::testing::Shell;
using nlohmann::json;
namespace fs = std::filesystem;

const std::vector<std::string> kTenantLibraries = {
    GPUMUX_SHIM, std::string(GPUMUX_SIM_DIR) + "/libcuda.so.1",
    std::string(GPUMUX_SIM_DIR) + "/libnvidia-ml.so.1"};

// "2.17" as a number that orders versions (2017).
int VersionNumber(const std::string& v) {
  int major = 0, minor = 0;
  std::sscanf(v.c_str(), "%d.%d", &major, &minor);
  return major * 1000 + minor;
}

TEST(TenantLibraries, AskNoGlibcPast217NoCxxRuntimeAndExportOnlyTheirCApi) {
  const std::set<std::string> allowed = {"libc.so.6",      "libdl.so.2", "libpthread.so.0",
                                         "librt.so.1",     "libm.so.6",
                                         "ld-linux-x86-64.so.2"};  // glibc's loader: __tls_get_addr
  for (const std::string& library : kTenantLibraries) {
    gpumux::testing::ShellResult dynamic = Shell("objdump -T " + library + " 2>&1");
    ASSERT_EQ(dynamic.exit_code, 0) << dynamic.out;
    std::string newest;
    std::set<std::string> other_versions, exported;
    std::istringstream lines(dynamic.out);
    const std::regex versioned(R"(\(?(GLIBC|GLIBCXX|CXXABI|GCC)_([0-9.]+)\)?)");
    for (std::string line; std::getline(lines, line);) {
      std::smatch m;
      if (std::regex_search(line, m, versioned)) {
        if (m[1] == "GLIBC") {
          if (VersionNumber(m[2]) > VersionNumber(newest)) newest = m[2];
        } else {
          other_versions.insert(m[1].str() + "_" + m[2].str());
        }
      }
      // A defined symbol: "ADDRESS g DF .text SIZE [VERSION] NAME".
      if (line.find(" g ") != std::string::npos && line.find("*UND*") == std::string::npos &&
          line.find(".text") != std::string::npos)
        exported.insert(line.substr(line.rfind(' ') + 1));
    }
    gpumux::testing::ShellResult needed =
        Shell("readelf -d " + library + " | sed -n 's/.*(NEEDED).*\\[\\(.*\\)\\]/\\1/p'");
    if (needed.out.find("libasan") != std::string::npos ||
        needed.out.find("libubsan") != std::string::npos)
      GTEST_SKIP() << library << " is built with sanitizers (the debug preset), which bring their "
                   << "own runtime: the floor holds for the release build, which CI checks";
    std::cout << library << ": newest GLIBC_" << newest << "; NEEDED " << needed.out;
    EXPECT_LE(VersionNumber(newest), VersionNumber("2.17")) << library << " asks GLIBC_" << newest;
    EXPECT_TRUE(other_versions.empty())
        << library << " asks a C++ runtime or libgcc: " << *other_versions.begin();
    std::istringstream names(needed.out);
    for (std::string name; std::getline(names, name);)
      EXPECT_TRUE(allowed.count(name)) << library << " needs " << name;
    ASSERT_FALSE(exported.empty()) << dynamic.out;
    for (const std::string& name : exported) {
      bool api = name.rfind("cu", 0) == 0 || name.rfind("nvml", 0) == 0 || name == "dlsym";
      EXPECT_TRUE(api) << library << " exports " << name;
    }
  }
}

// A Debian 11 root (glibc 2.31) made once with debootstrap and kept in the build folder
// (packaging/debian_root.sh); its programs run here through its own loader (with its own libraries first), so they see this
// machine's files: gpumuxd's socket and ledgers, the simulated GPU.
class OldImageTest : public AgentTest {
 protected:
  void SetUp() override {
    AgentTest::SetUp();
    gpumux::testing::ShellResult made = Shell(std::string(GPUMUX_SOURCE_DIR) +
                                              "/packaging/debian_root.sh " GPUMUX_BUILD_DIR
                                              " bullseye python3 2>&1");
    if (made.exit_code == 77) GTEST_SKIP() << "no Debian 11 root: " << made.out;
    ASSERT_EQ(made.exit_code, 0) << made.out;
    root_ = made.out.substr(0, made.out.find('\n'));
    for (const auto& e : fs::directory_iterator(root_ / "lib/x86_64-linux-gnu")) {
      std::string name = e.path().filename().string();
      if (name.rfind("ld-2.", 0) == 0) loader_ = e.path().string();
    }
    ASSERT_FALSE(loader_.empty()) << "no ld-2.*.so in " << root_;
  }
  // The command that runs the old root's Python on tests/node/old_root_alloc.py, its libraries and
  // then `more` (where libcuda.so.1 is) first in the search path; LD_PRELOAD comes from the
  // environment, as a container's runtime or gpumux puts it there.
  std::string OldPython(const std::string& more) const {
    std::string libs = (root_ / "lib/x86_64-linux-gnu").string() + ":" +
                       (root_ / "usr/lib/x86_64-linux-gnu").string() + ":" + more;
    return loader_ + " --library-path " + libs + " " + (root_ / "usr/bin/python3.9").string() +
           " " + GPUMUX_SOURCE_DIR + "/tests/node/old_root_alloc.py";
  }
  static json LastLine(const std::string& out) {
    std::string line = out.substr(out.rfind('{') == std::string::npos ? 0 : out.rfind('{'));
    return json::parse(line, nullptr, false);
  }
  fs::path root_;
  std::string loader_;
};

TEST_F(OldImageTest, ADebian11ProgramIsHeldToItsQuotaUnderGpumuxRun) {
  auto [code, out] = Sh("GPUMUX_RUNTIME_DIR=" + (dir_ / "run").string() + " " GPUMUX_BINARY
                        " run --sim H100 --mem 1GiB -- " + OldPython(GPUMUX_SIM_DIR) + " 2>&1");
  json r = LastLine(out);
  ASSERT_EQ(code, 0) << out;
  ASSERT_TRUE(r.is_object()) << out;
  EXPECT_EQ(r["glibc"], "2.31") << "the program ran on the old root's glibc";
  EXPECT_EQ(r["allocated"].get<uint64_t>(), kGiB) << out;
  EXPECT_EQ(r["last_error"].get<int>(), 2) << "CUDA_ERROR_OUT_OF_MEMORY at the quota";
  EXPECT_EQ(r["total"].get<uint64_t>(), kGiB) << "cuMemGetInfo shows the quota";
}

TEST_F(OldImageTest, ADebian11ProgramIsHeldToItsQuotaUnderGpumuxd) {
  StartAgent();
  json admitted = Call("POST", "/v1/tenants", {{"id", "old"}, {"gpu", 0}, {"memory", "1GiB"}}, 201);
  std::string sim_dir = admitted["env"].value("LD_LIBRARY_PATH", std::string(GPUMUX_SIM_DIR));
  auto [code, out] = Sh(Env(admitted) + OldPython(sim_dir) + " 2>&1");
  json r = LastLine(out);
  ASSERT_EQ(code, 0) << out;
  ASSERT_TRUE(r.is_object()) << out;
  EXPECT_EQ(r["glibc"], "2.31");
  EXPECT_EQ(r["allocated"].get<uint64_t>(), kGiB) << out;
  EXPECT_EQ(r["last_error"].get<int>(), 2);
  json t = AwaitUsage("old", 0);
  EXPECT_EQ(t["used_bytes"].get<uint64_t>(), 0u) << "its process's grants reclaimed once it exited: "
                                                  << t;
  EXPECT_EQ(t["refused_allocations"].get<uint64_t>(), 1u) << "the shim refused it, not the GPU";
}

}  // namespace
