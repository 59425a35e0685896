// The driver holds the quota where the driver can (NVIDIA's memory limits per cgroup, driver
// R615+): the simulated driver keeps and enforces them as NVIDIA documents, and gpumuxd sets the
// hard limit of a tenant's cgroup to its quota (plus a tenant's context allowance), moves it with
// the quota and clears it when the tenant leaves. A program that goes around the shim is then
// refused by the driver and keeps running, where before it was killed. Needs root (as CI runs),
// and a writable cgroup v2 hierarchy for the tests that put programs in a group.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include "agent_fixture.h"
#include "base/cgroup.h"
#include "simgpu/sim_memory_limits.h"

namespace {

using namespace gpumux::testing;  // IsolationTest, kGiB, kMiB, kNobody, Shell
using nlohmann::json;
namespace fs = std::filesystem;
namespace nvml = gpumux::nvml;

const std::pair<std::string, std::string> kR615 = {"GPUMUX_SIM_DRIVER_VERSION", "615"};

class DriverLimitsTest : public IsolationTest {
 protected:
  void SetUp() override {
    IsolationTest::SetUp();
    setenv(kR615.first.c_str(), kR615.second.c_str(), 1);  // for this process's reads of limits
  }
  void TearDown() override {
    IsolationTest::TearDown();
    unsetenv(kR615.first.c_str());
    RemoveV2Group(group_);
  }
  // Makes the group `name` (a pod's, as gpumuxd matches it by name); false where no cgroup v2
  // hierarchy can be written here.
  bool MakeGroup(const std::string& name) { return !(group_ = MakeV2Group(name)).empty(); }
  std::string InGroup() const { return gpumux::testing::InGroup(group_); }
  std::string StatePath() const { return Run() + "/sim-gpu0.state"; }

  fs::path group_;
};

TEST_F(DriverLimitsTest, TheSimulatedDriverSetsLimitsOnlyAsTheRealOneDoes) {
  if (!MakeGroup("pod-a")) GTEST_SKIP() << "needs a writable cgroup v2 hierarchy";
  StartAgentOn({"--sim", "H100"}, {kR615});  // makes the simulated GPU's state
  gpumux::sim::SimGroupLimits got;
  EXPECT_EQ(gpumux::sim::GetSimMemoryLimits(StatePath(), group_, &got), nvml::kErrorNotFound)
      << "no limit yet";
  std::string set_by_nobody = AsUser(kNobody, [&] {
    return std::to_string(gpumux::sim::SetSimMemoryLimits(StatePath(), group_, 0, kGiB));
  });
  EXPECT_EQ(set_by_nobody, std::to_string(nvml::kErrorNoPermission)) << "root's to set";
  EXPECT_EQ(gpumux::sim::SetSimMemoryLimits(StatePath(), group_.parent_path() / "none", 0, kGiB),
            nvml::kErrorNotFound);
  EXPECT_EQ(gpumux::sim::SetSimMemoryLimits(StatePath(), "/tmp", 0, kGiB), nvml::kErrorNotFound)
      << "not a cgroup v2 directory";
  ASSERT_EQ(gpumux::sim::SetSimMemoryLimits(StatePath(), group_, kGiB / 2, 3 * kGiB),
            nvml::kSuccess);
  ASSERT_EQ(gpumux::sim::GetSimMemoryLimits(StatePath(), group_, &got), nvml::kSuccess);
  // Another user can read the limits, as NVML lets anyone, and cannot rewrite them.
  std::string opened = AsUser(kNobody, [&] {
    int rw = open((StatePath() + ".limits").c_str(), O_RDWR);
    int ro = open((StatePath() + ".limits").c_str(), O_RDONLY);
    return std::string(rw >= 0 ? "rw" : "-") + (ro >= 0 ? "ro" : "-");
  });
  EXPECT_EQ(opened, "-ro") << "the limits file is root's to write";
  EXPECT_EQ(got.soft, kGiB / 2);
  EXPECT_EQ(got.hard, 3 * kGiB);
  // A program in the group is refused past the hard limit, and keeps running; one outside it is
  // not held. (Both run on the simulated GPU as root's own work, not a tenant's: no shim, and no
  // tenant that gpumuxd's memory check would count them as.)
  json t = Call("POST", "/v1/tenants", {{"id", "env"}, {"gpu", 0}, {"memory", kGiB}}, 201);
  const std::string sim_env = Env(t) + "LD_PRELOAD= GPUMUX_TENANT= ";
  const std::string fill =
      std::string(GPUMUX_ALLOC_CLIENT) + " direct fill " + std::to_string(512 * kMiB) + " 0";
  auto [in_code, in_out] = Shell(InGroup() + sim_env + fill);
  ASSERT_EQ(in_code, 0) << in_out;
  json in = json::parse(in_out);
  EXPECT_EQ(in["allocated"].get<uint64_t>(), 3 * kGiB) << in_out;
  EXPECT_EQ(in["last_error"], 2) << "CUDA_ERROR_OUT_OF_MEMORY";
  EXPECT_EQ(in["total"].get<uint64_t>(), 3 * kGiB) << "cuMemGetInfo's total is the group's limit";
  EXPECT_EQ(in["free"].get<uint64_t>(), 0u);
  auto [out_code, out_out] = Shell(sim_env + fill);
  ASSERT_EQ(out_code, 0) << out_out;
  EXPECT_GT(json::parse(out_out)["allocated"].get<uint64_t>(), 60 * kGiB) << out_out;
  // Cleared (soft 0, hard the maximum), the group is held no more.
  ASSERT_EQ(gpumux::sim::SetSimMemoryLimits(StatePath(), group_, 0, nvml::kMemoryLimitMax),
            nvml::kSuccess);
  EXPECT_EQ(gpumux::sim::GetSimMemoryLimits(StatePath(), group_, &got), nvml::kErrorNotFound);
  auto [again_code, again] = Shell(InGroup() + sim_env + fill);
  EXPECT_GT(json::parse(again)["allocated"].get<uint64_t>(), 60 * kGiB) << again;
  // A driver before R615 has no limits to set.
  unsetenv(kR615.first.c_str());
  EXPECT_EQ(gpumux::sim::SetSimMemoryLimits(StatePath(), group_, 0, kGiB),
            nvml::kErrorNotSupported);
}

TEST_F(DriverLimitsTest, GpumuxdSaysWhatHoldsTheQuotasOfEachGpu) {
  StartAgentOn({"--sim", "H100", "--gpus", "2"}, {kR615});
  Call("PUT", "/v1/gpus/1", {{"mode", "mig"}, {"layout", {"3g.40gb", "3g.40gb"}}}, 200);
  json gpus = Call("GET", "/v1/gpus", json(), 200)["gpus"];
  const std::string by_driver = gpumux::CgroupV2Mounted() ? "driver" : "shim";
  EXPECT_EQ(gpus[0]["memory_enforcement"], by_driver) << gpus[0];
  EXPECT_EQ(gpus[1]["memory_enforcement"], "mig") << gpus[1];
  std::string metrics = gpumux::service::CallUnix(socket_, "GET", "/metrics", "").second;
  EXPECT_NE(metrics.find("gpumux_gpu_memory_enforcement{gpu=\"0\",by=\"" + by_driver + "\"} 1\n"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("gpumux_gpu_memory_enforcement{gpu=\"1-mig1\",by=\"mig\"} 1\n"),
            std::string::npos)
      << metrics;
  // A driver without the calls (before R615): the shim holds quotas, as it always did.
  StopAgent(SIGTERM);
  unsetenv(kR615.first.c_str());  // gpumuxd would inherit it
  StartAgentOn({"--sim", "H100", "--gpus", "2"}, {});
  gpus = Call("GET", "/v1/gpus", json(), 200)["gpus"];
  EXPECT_EQ(gpus[0]["memory_enforcement"], "shim") << gpus[0];
  EXPECT_EQ(gpus[1]["memory_enforcement"], "mig") << gpus[1];
}

// A pod's program that allocates around the shim (without the preload) is refused by the driver at
// its tenant's limit and runs on: nothing is killed. The limit follows the quota, is learnt again
// by a restarted gpumuxd, and goes with the tenant.
TEST_F(DriverLimitsTest, AProgramAroundTheShimIsRefusedByTheDriverAndKeepsRunning) {
  const std::string pod = "pod" + std::to_string(getpid());
  if (!MakeGroup(pod)) GTEST_SKIP() << "needs a writable cgroup v2 hierarchy";
  // No allowance for a process's context, 1 GiB for a tenant's: past its quota by its program
  // around the shim, it would be killed but for the driver's hold.
  StartAgentOn({"--sim", "H100", "--context-allowance", "0", "--tenant-context-allowance", "1GiB"},
               {kR615});
  json t = Call("POST", "/v1/tenants",
                {{"id", "held"}, {"gpu", 0}, {"memory", 2 * kGiB}, {"cgroup", pod}}, 201);
  const std::string client = std::string(GPUMUX_ALLOC_CLIENT) + " direct fill ";
  // Its program under the shim takes its quota, and the driver then holds its group.
  FILE* under =
      popen((InGroup() + Env(t) + client + std::to_string(256 * kMiB) + " 6").c_str(), "r");
  ASSERT_EQ(AwaitUsage("held", 2 * kGiB, 10)["used_bytes"].get<uint64_t>(), 2 * kGiB);
  json held = Call("GET", "/v1/tenants/held", json(), 200);
  ASSERT_EQ(held.value("driver_limit_bytes", uint64_t(0)), 3 * kGiB)
      << "quota + a tenant's context allowance: " << held << Log();
  gpumux::sim::SimGroupLimits limits;
  ASSERT_EQ(gpumux::sim::GetSimMemoryLimits(StatePath(), group_, &limits), nvml::kSuccess);
  EXPECT_EQ(limits.hard, 3 * kGiB);
  EXPECT_EQ(limits.soft, 0u);
  // Around the shim: the driver refuses it past the group's limit.
  auto [code, out] = Shell(InGroup() + Env(t) + "LD_PRELOAD= GPUMUX_TENANT=held " + client +
                           std::to_string(256 * kMiB) + " 2");
  EXPECT_EQ(code, 0) << "ran to its end: " << out;
  EXPECT_EQ(json::parse(out)["allocated"].get<uint64_t>(), kGiB) << out;
  held = Call("GET", "/v1/tenants/held", json(), 200);
  EXPECT_EQ(held["memory_kills"].get<uint64_t>(), 0u) << held;
  EXPECT_EQ(Log().find("killed a process"), std::string::npos) << Log();
  // The limit follows the quota.
  Call("PUT", "/v1/tenants/held", {{"memory", 3 * kGiB}}, 200);
  ASSERT_EQ(gpumux::sim::GetSimMemoryLimits(StatePath(), group_, &limits), nvml::kSuccess);
  EXPECT_EQ(limits.hard, 4 * kGiB);
  EXPECT_EQ(Call("GET", "/v1/tenants/held", json(), 200)["driver_limit_bytes"], 4 * kGiB);
  // A gpumuxd restarted while the tenant runs learns its group again from its running process.
  StopAgent(SIGKILL);
  StartAgentOn({"--sim", "H100", "--context-allowance", "0", "--tenant-context-allowance", "1GiB"},
               {kR615});
  EXPECT_EQ(Call("GET", "/v1/tenants/held", json(), 200)["driver_limit_bytes"], 4 * kGiB) << Log();
  // The tenant leaves: its limit goes (cleared before its group is removed).
  EXPECT_EQ(WEXITSTATUS(pclose(under)), 0);
  Call("DELETE", "/v1/tenants/held", json(), 200);
  EXPECT_EQ(gpumux::sim::GetSimMemoryLimits(StatePath(), group_, &limits), nvml::kErrorNotFound);
}

}  // namespace
