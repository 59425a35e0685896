// The Slurm integration end to end: munged, slurmctld and slurmd on localhost
// (tests/slurm/cluster.sh, the steps of docs/slurm.md's install section) with two simulated H100s in
// 80 shards of 1 GiB each, the gpumux SPANK plugin and gpumuxd. Jobs sharing the GPU by shards get quotas
// of their shards; one that allocates past its share gets OOM while its neighbour completes;
// scancel releases a job's quota; gpumuxd restarted mid-job loses nothing. Every daemon started
// here is stopped by pid.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "base/clock.h"
#include "base/error.h"
#include "service/http_client.h"
#include "shell.h"

namespace {

using gpumux::service::CallUnix;
using nlohmann::json;
namespace fs = std::filesystem;

constexpr uint64_t kGiB = 1ull << 30;
const std::string kBuild = GPUMUX_BUILD_DIR;
const std::string kAlloc = GPUMUX_ALLOC_CLIENT;
const std::string kCompute = GPUMUX_COMPUTE_CLIENT;

// Runs `cmd` with the test cluster's SLURM_CONF; returns (exit code, stdout).
std::pair<int, std::string> Slurm(const std::string& dir, const std::string& cmd) {
  auto r = gpumux::testing::Shell("SLURM_CONF=" + dir + "/etc/slurm.conf " + cmd);
  return {r.exit_code, r.out};
}

class SlurmTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    for (const char* tool :
         {"/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/sbin/munged", "/usr/bin/srun"}) {
      if (!fs::exists(tool))
        skip_ = std::string(tool) + " is missing (Debian packages slurm-wlm and munge)";
    }
    if (!fs::exists(kBuild + "/spank_gpumux.so"))
      skip_ = "the SPANK plugin was not built (Debian package libslurm-dev)";
    if (getuid() != 0) skip_ = "starting Slurm's daemons needs root";
    if (!skip_.empty()) return;
    // Jobs inherit this environment (srun --export=ALL). In the sanitizer build the shim is
    // preloaded ahead of the ASan runtime, which ASan refuses by default; fine for these programs.
    setenv("ASAN_OPTIONS", "verify_asan_link_order=0", 0);
    dir_ = (fs::temp_directory_path() / ("gpumux_slurm_" + std::to_string(getpid()))).string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    StartAgent();
    auto r =
        gpumux::testing::Shell("bash " + std::string(GPUMUX_SOURCE_DIR) +
                               "/tests/slurm/cluster.sh start " + dir_ + " " + kBuild + " 2>&1");
    if (r.exit_code != 0) start_error_ = "cluster.sh start failed: " + r.out;
  }
  static void TearDownTestSuite() {
    if (dir_.empty()) return;
    gpumux::testing::Shell("bash " + std::string(GPUMUX_SOURCE_DIR) +
                           "/tests/slurm/cluster.sh stop " + dir_);
    StopAgent(SIGTERM);
    fs::remove_all(dir_);
  }
  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    ASSERT_TRUE(start_error_.empty()) << start_error_;
  }

  static void StartAgent() {
    agent_ = fork();
    if (agent_ == 0) {
      freopen((dir_ + "/agent.log").c_str(), "a", stderr);
      execl((kBuild + "/gpumuxd").c_str(), "gpumuxd", "--sim", "H100", "--gpus", "2", "--socket",
            (dir_ + "/gpumuxd.sock").c_str(), "--state", (dir_ + "/state.db").c_str(),
            "--runtime-dir", (dir_ + "/runtime").c_str(), nullptr);
      _exit(127);
    }
    // Up to 10 s: on a loaded 2-core machine gpumuxd has been seen to take more than 4.
    for (int i = 0; i < 500 && !Agent("GET", "/v1/health").first; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  static void StopAgent(int sig) {
    if (agent_ <= 0) return;
    kill(agent_, sig);
    waitpid(agent_, nullptr, 0);
    agent_ = 0;
  }
  // (status, body) of an agent call; status 0 if it cannot be reached.
  static std::pair<int, json> Agent(const std::string& method, const std::string& path) {
    try {
      auto [status, body] = CallUnix(dir_ + "/gpumuxd.sock", method, path);
      return {status, json::parse(body, nullptr, false)};
    } catch (const gpumux::Error&) {
      return {0, json()};
    }
  }
  // Waits up to `seconds` for `ready`; false on timeout.
  template <typename Pred>
  static bool WaitFor(double seconds, Pred ready) {
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end) {
      if (ready()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  static std::string Sbatch(const std::string& args, const std::string& command) {
    auto [code, out] = Slurm(dir_, "sbatch --parsable " + args + " --output=" + dir_ +
                                       "/job-%j.out --wrap '" + command + "'");
    EXPECT_EQ(code, 0) << out;
    return out.substr(0, out.find_first_of(";\n"));
  }
  static bool JobGone(const std::string& job) {
    return Slurm(dir_, "squeue -h -j " + job + " 2>/dev/null").second.empty();
  }

  static inline std::string dir_, skip_, start_error_;
  static inline pid_t agent_ = 0;
};

TEST_F(SlurmTest, AJobPastItsSharesGetsOomWhileItsNeighbourOnTheGpuCompletes) {
  std::string start = std::to_string(gpumux::NowNs() + 3'000'000'000ull);
  std::string over =
      "srun --gres=shard:2 " + kAlloc + " direct fill " + std::to_string(256ull << 20) + " 1";
  std::string neighbour =
      "srun --gres=shard:4 --gpumux-compute=50% " + kCompute + " launch busy " + start + " 1 1";
  auto [code, out] = Slurm(dir_, "timeout 60 bash -c '(" + over + " > " + dir_ + "/over.json & " +
                                     neighbour + " > " + dir_ + "/neighbour.json & wait)' 2>&1");
  std::ifstream a(dir_ + "/over.json"), b(dir_ + "/neighbour.json");
  std::stringstream ja, jb;
  ja << a.rdbuf();
  jb << b.rdbuf();
  json over_result = json::parse(ja.str(), nullptr, false),
       neighbour_result = json::parse(jb.str(), nullptr, false);
  ASSERT_TRUE(over_result.is_object() && neighbour_result.is_object())
      << out << ja.str() << jb.str();
  EXPECT_EQ(over_result["allocated"].get<uint64_t>(), 2 * kGiB) << "2 shards of 1 GiB";
  EXPECT_EQ(over_result["last_error"].get<int>(), 2) << "CUDA_ERROR_OUT_OF_MEMORY";
  EXPECT_GT(neighbour_result["launches"].get<int>(), 0) << "the neighbour computed";
  EXPECT_NEAR(neighbour_result["gpu_share"].get<double>(), 0.5, 0.1)
      << "--gpumux-compute=50% holds";
  // Both steps ended: their tenants are gone.
  EXPECT_TRUE(WaitFor(5, [] { return Agent("GET", "/v1/tenants").second["tenants"].empty(); }))
      << Agent("GET", "/v1/tenants").second;
}

TEST_F(SlurmTest, TheMemoryOptionSetsTheQuotaOfAStep) {
  auto [code, out] = Slurm(dir_, "timeout 60 srun --gres=shard:8 --gpumux-mem=1G " + kAlloc +
                                     " direct fill " + std::to_string(128ull << 20) + " 0");
  ASSERT_EQ(code, 0) << out;
  json j = json::parse(out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << out;
  EXPECT_EQ(j["allocated"].get<uint64_t>(), kGiB)
      << "--gpumux-mem=1G (Slurm's G is GiB) instead of 8 shards";
  EXPECT_EQ(j["total"].get<uint64_t>(), kGiB) << "cuMemGetInfo shows the quota";
}

// A step on two GPUs with --gpumux-mem: one tenant over both, held to the quota on each.
TEST_F(SlurmTest, AStepOnTwoGpusIsOneTenantHeldToItsQuotaOnEach) {
  auto [code, out] = Slurm(dir_, "timeout 60 srun --gres=gpu:2 --gpumux-mem=1G " +
                                     std::string(GPUMUX_LLM_CLIENT) + " fill-each " +
                                     std::to_string(128ull << 20));
  ASSERT_EQ(code, 0) << out;
  json j = json::parse(out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << out;
  EXPECT_EQ(j["allocated"], json::array({kGiB, kGiB})) << j;
  EXPECT_EQ(j["used_after_each_fill"][0], json::array({kGiB, 0})) << "nothing charged on GPU 1";
  EXPECT_TRUE(WaitFor(5, [] { return Agent("GET", "/v1/tenants").second["tenants"].empty(); }))
      << Agent("GET", "/v1/tenants").second;
}

TEST_F(SlurmTest, AStepInsideABatchJobSharesTheJobsQuota) {
  // The batch script fills the job's 3 shards and holds them while an srun step inside it tries
  // too: the step joins the job's tenant, so it gets nothing more (without it, it would get 3 GiB
  // again).
  std::string job = Sbatch("--gres=shard:3", kAlloc + " direct fill " + std::to_string(kGiB) +
                                                 " 4 & sleep 1; srun " + kAlloc + " direct fill " +
                                                 std::to_string(256ull << 20) + " 0; wait");
  ASSERT_TRUE(WaitFor(30, [&] { return JobGone(job); }));
  std::ifstream out(dir_ + "/job-" + job + ".out");
  std::string text((std::istreambuf_iterator<char>(out)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("{\"allocated\": 3221225472, \"last_error\": 2"), std::string::npos)
      << "the batch script: " << text;
  EXPECT_NE(text.find("{\"allocated\": 0, \"last_error\": 2, \"total\": 3221225472"),
            std::string::npos)
      << "the step sees the job's quota, already used: " << text;
  EXPECT_TRUE(WaitFor(10, [&] { return Agent("GET", "/v1/tenants/slurm-" + job).first == 404; }))
      << "removed with the job";
}

TEST_F(SlurmTest, ConcurrentStepsKeepTheJobsTenantUntilTheJobEnds) {
  // Under one allocation, step A admits the tenant and ends while step B, which joined it, still
  // holds memory: the tenant stays for B, and the job's epilog removes it when the job is over.
  std::string a = "srun --overlap sleep 1.5";
  std::string b = "srun --overlap " + kAlloc + " direct fill " + std::to_string(kGiB) + " 4";
  FILE* job =
      popen(("SLURM_CONF=" + dir_ + "/etc/slurm.conf timeout 60 salloc --gres=shard:2 sh -c '" + a +
             " > " + dir_ + "/a.json & sleep 0.5; " + b + " > " + dir_ + "/b.json; wait' 2>&1")
                .c_str(),
            "r");
  // After A ended (1.5 s in), B still holds its 2 GiB in the job's tenant.
  std::this_thread::sleep_for(std::chrono::milliseconds(3000));
  json listed = Agent("GET", "/v1/tenants").second;
  ASSERT_EQ(listed["tenants"].size(), 1u) << listed;
  EXPECT_EQ(listed["tenants"][0].value("used_bytes", 0ull), 2 * kGiB)
      << "B's memory, under the job's tenant: " << listed;
  char buf[4096];
  while (fgets(buf, sizeof(buf), job)) {
  }
  pclose(job);
  EXPECT_TRUE(WaitFor(10, [] { return Agent("GET", "/v1/tenants").second["tenants"].empty(); }))
      << "the job's epilog removed it: " << Agent("GET", "/v1/tenants").second;
}

TEST_F(SlurmTest, ScancelReleasesTheJobsQuota) {
  std::string job =
      Sbatch("--gres=shard:3", kAlloc + " direct fill " + std::to_string(kGiB) + " 60");
  std::string tenant = "/v1/tenants/slurm-" + job;
  ASSERT_TRUE(WaitFor(
      20, [&] { return Agent("GET", tenant).second.value("used_bytes", 0ull) == 3 * kGiB; }))
      << "the job never held its 3 GiB: " << Agent("GET", tenant).second;
  Slurm(dir_, "scancel " + job);
  EXPECT_TRUE(WaitFor(10, [&] { return Agent("GET", tenant).first == 404; }))
      << Agent("GET", tenant).second;
  EXPECT_TRUE(WaitFor(10, [&] { return JobGone(job); }));
}

TEST_F(SlurmTest, GpumuxdRestartedMidJobLosesNothing) {
  // The job holds its memory 10 s: long enough for a restart on a loaded machine to finish first.
  std::string job =
      Sbatch("--gres=shard:2", kAlloc + " direct fill " + std::to_string(kGiB) + " 10");
  std::string tenant = "/v1/tenants/slurm-" + job;
  ASSERT_TRUE(WaitFor(20, [&] {
    return Agent("GET", tenant).second.value("used_bytes", 0ull) == 2 * kGiB;
  })) << Agent("GET", tenant).second;
  StopAgent(SIGKILL);
  StartAgent();
  auto [status, after] = Agent("GET", tenant);
  ASSERT_EQ(status, 200) << after;
  EXPECT_EQ(after["quota_bytes"].get<uint64_t>(), 2 * kGiB);
  EXPECT_EQ(after["used_bytes"].get<uint64_t>(), 2 * kGiB)
      << "the job kept its memory and its quota";
  ASSERT_TRUE(WaitFor(30, [&] { return JobGone(job); }));
  std::ifstream out(dir_ + "/job-" + job + ".out");
  std::string text((std::istreambuf_iterator<char>(out)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("\"allocated\": 2147483648"), std::string::npos) << text;
  EXPECT_TRUE(WaitFor(10, [&] { return Agent("GET", tenant).first == 404; }))
      << "removed at the step's end";
}

}  // namespace
