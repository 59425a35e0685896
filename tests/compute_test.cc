// Compute shares end to end on the simulated GPU: `gpumux run --compute/--weight/--priority` starts
// busy tenant programs under the shim; the GPU time each gets (kernels completed in a common window
// times their simulated duration) follows its cap or weight, every launch path is gated, and a
// high-priority tenant keeps its solo latency next to a busy best-effort one.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "latency_quantile.h"
#include "node_fixture.h"

namespace {

using gpumux::testing::NodeTest;
const std::string kClient = GPUMUX_COMPUTE_CLIENT;

struct Tenant {
  std::string id, limits, client_args;  // client_args after the start time, e.g. "busy {start} 3 1"
};

// Starts every tenant at once; their measured windows begin together 1.5 s from now (time for
// `gpumux run` and the client to start), with the variables of `env` ("NAME=VALUE ...") set.
// Returns each client's JSON line.
std::vector<nlohmann::json> RunTogether(const std::vector<Tenant>& tenants,
                                        const std::string& env = "") {
  std::string start = std::to_string(gpumux::NowNs() + 1'500'000'000ull);
  std::string cmd = "(" + (env.empty() ? "" : "export " + env + "; ");
  for (const Tenant& t : tenants) {
    std::string args = t.client_args;
    args.replace(args.find("{start}"), 7, start);
    cmd += NodeTest::Launch(t.id, "--mem 1GiB " + t.limits, kClient + " " + args) + " > " + t.id +
           ".json & ";
  }
  cmd += "wait)";
  auto [code, out] = NodeTest::Sh(cmd);
  std::vector<nlohmann::json> results;
  for (const Tenant& t : tenants) {
    auto [c, text] = NodeTest::Sh("cat " + t.id + ".json");
    results.push_back(nlohmann::json::parse(text.empty() ? "{}" : text));
  }
  return results;
}

class ComputeTest : public NodeTest {
 protected:
  void SetUp() override {
    NodeTest::SetUp();
    std::filesystem::current_path(dir_);
  }
};

TEST_F(ComputeTest, CapsOf30And70PercentHoldWithinFivePoints) {
  auto r = RunTogether({{"thirty", "--compute 30%", "launch busy {start} 3 1"},
                        {"seventy", "--compute 70%", "graph busy {start} 3 1"}});
  ASSERT_TRUE(r[0].contains("gpu_share") && r[1].contains("gpu_share")) << r[0] << r[1];
  EXPECT_NEAR(r[0]["gpu_share"].get<double>(), 0.30, 0.05) << r[0];
  EXPECT_NEAR(r[1]["gpu_share"].get<double>(), 0.70, 0.05)
      << r[1] << " (graph launches are counted)";
}

TEST_F(ComputeTest, WeightsDivideAContendedGpu) {
  // Six seconds: the first part of a window, before the gates divide, runs round robin (half
  // each); over three seconds the weight-3 tenant sat at the band's edge (0.69-0.705 measured).
  auto r = RunTogether({{"one", "--weight 1", "ex busy {start} 6 1"},
                        {"three", "--weight 3", "ptsz busy {start} 6 1"}});
  ASSERT_TRUE(r[0].contains("gpu_share") && r[1].contains("gpu_share")) << r[0] << r[1];
  EXPECT_NEAR(r[0]["gpu_share"].get<double>(), 0.25, 0.05) << r[0];
  EXPECT_NEAR(r[1]["gpu_share"].get<double>(), 0.75, 0.05) << r[1];
}

TEST_F(ComputeTest, BestEffortTenantsUseWhatTheOthersLeave) {
  auto r = RunTogether({{"capped", "--compute 30%", "launch busy {start} 3 1"},
                        {"filler", "--priority low", "ex busy {start} 3 1"}});
  ASSERT_TRUE(r[0].contains("gpu_share") && r[1].contains("gpu_share")) << r[0] << r[1];
  EXPECT_NEAR(r[0]["gpu_share"].get<double>(), 0.30, 0.05) << r[0];
  EXPECT_NEAR(r[1]["gpu_share"].get<double>(), 0.70, 0.05)
      << r[1] << ": the 70% the capped tenant may not use";
}

TEST_F(ComputeTest, ABusyTenantUsesWhatALightOneLeavesBetweenItsKernels) {
  // A server: a 1 ms kernel, then a 9 ms pause (about a tenth of the GPU), beside a busy tenant of
  // the same weight. The light one wants the GPU lately, so the division keeps its share and some
  // room to grow; while it pauses, that room idled the GPU unless the busy one's credit grows at
  // the share among the tenants at work now.
  auto r = RunTogether(
      {{"server", "", "launch latency {start} 3 1 9"}, {"busy", "", "launch busy {start} 3 1"}});
  ASSERT_TRUE(r[0].contains("gpu_share") && r[1].contains("gpu_share")) << r[0] << r[1];
  double server = r[0]["gpu_share"].get<double>(), busy = r[1]["gpu_share"].get<double>();
  EXPECT_GT(server, 0.07) << r[0] << ": the server gets its kernels";
  EXPECT_GT(server + busy, 0.97) << r[0] << r[1] << ": the GPU idles while the busy one has work";
}

TEST_F(ComputeTest, EveryLaunchPathIsHeldToTheCap) {
  // Alone on the GPU, an ungoverned busy tenant would take ~100%.
  for (const char* path : {"launch", "ex", "coop", "graph", "ptsz"}) {
    auto r = RunTogether(
        {{std::string("t-") + path, "--compute 20%", std::string(path) + " busy {start} 1.5 1"}});
    ASSERT_TRUE(r[0].contains("gpu_share")) << path << ": " << r[0];
    EXPECT_NEAR(r[0]["gpu_share"].get<double>(), 0.20, 0.05) << path << ": " << r[0];
  }
}

TEST_F(ComputeTest, HighPriorityLatencyStaysWithinTenPercentOfSoloNextToABusyNeighbour) {
  // 1 ms kernels, 1 ms apart: an interactive server. Its neighbour keeps the GPU busy with 1 ms
  // kernels. The timeslice is 2 ms (`nvidia-smi compute-policy --set-timeslice` picks among a few
  // lengths): with the default ~1 ms, as long as the server's pause, round robin alone happens to
  // hand the GPU back just as the server launches again, and the control below would show nothing.
  const std::string hp_args = "launch latency {start} 2 1 1";
  const std::string slice = "GPUMUX_SIM_TIMESLICE_US=2048";
  auto solo = RunTogether({{"hp", "--priority high", hp_args}}, slice);
  auto guarded = RunTogether(
      {{"hp", "--priority high", hp_args}, {"be", "--priority low", "launch busy {start} 2 1"}},
      slice);
  auto unguarded = RunTogether({{"hp", "--priority normal", hp_args},
                                {"be", "--priority normal", "launch busy {start} 2 1"}},
                               slice);
  double base = solo[0]["p50_latency_ms"].get<double>();
  ASSERT_GT(base, 0.9) << solo[0];
  EXPECT_LE(guarded[0]["p50_latency_ms"].get<double>(), 1.10 * base)
      << "solo " << solo[0] << ", with neighbour " << guarded[0];
  EXPECT_LE(guarded[0]["mean_latency_ms"].get<double>(),
            1.10 * solo[0]["mean_latency_ms"].get<double>())
      << guarded[0];
  // Without priorities the same pair shares the GPU and the latency grows: the gate is what holds
  // it.
  EXPECT_GT(unguarded[0]["p50_latency_ms"].get<double>(), 1.3 * base) << unguarded[0];
  EXPECT_GT(unguarded[1]["gpu_share"].get<double>(), 0.3)
      << "with equal priority the neighbour computes";
}

// A step server's latency quantile `q`, in its first second (`first_second`) or after it.
double StepLatencyMs(const nlohmann::json& r, double period_ms, bool first_second, double q) {
  return gpumux::testing::LatencyQuantileMs(r, size_t(1000 / period_ms), first_second, q);
}

// A compiled inference server sends its whole step at once: 10 kernels of 0.3 ms launched back to
// back (or one graph holding them, captured at start, 1.5 s before the first step), then one
// synchronise, every 10 ms. Beside a busy best-effort tenant its steps keep their solo latency, and
// the best-effort tenant keeps most of the 70% of the GPU the server leaves. Before the rhythm
// learnt from a warm-up gave way to the steps' own, the graph server's steps took twice as long
// with priorities as without (issue 39). The first second, while the rhythm is learnt, is held
// apart (its first few steps wait behind best effort): after it, p50 and p75 are the solo run's
// and p90 well below what the steps take without priorities; in it, most steps already are
// (latency_quantile.h: not the mean or p99, which a few host stalls decide; up to 12 ms measured
// beside two busy loops, solo or not). Steady runs give 0.97-1.03x solo at p50 to p90; about one
// run in four on 2026-12-07's 2-core machine (the shim before that day's launch route and after it
// alike) had 10-17% of its steps 1.2-1.9x slower, p90 1.19-1.33x: the p90 bound is 1.5x, the
// failure it guards 1.3-2x at p50 (the control below).
TEST_F(ComputeTest, HighPriorityStepsSentAtOnceKeepTheirSoloLatencyBesideBestEffort) {
  const double period_ms = 10;
  for (const char* path : {"launch", "graph"}) {
    SCOPED_TRACE(path);
    const std::string hp_args = std::string(path) + " step {start} 2.5 0.3 10 10";
    auto solo = RunTogether({{"hp", "--priority high", hp_args}});
    auto guarded = RunTogether({{"hp", "--priority high", hp_args},
                                {"be", "--priority low", "launch busy {start} 2.5 1"}});
    ASSERT_TRUE(solo[0].contains("latencies_ms") && guarded[0].contains("latencies_ms") &&
                guarded[1].contains("gpu_share"))
        << solo[0] << guarded[0] << guarded[1];
    double base = StepLatencyMs(solo[0], period_ms, false, 0.5);
    ASSERT_GT(base, 2.9) << solo[0];
    for (auto [q, bound] : {std::pair{0.5, 1.10}, std::pair{0.75, 1.10}, std::pair{0.9, 1.5}})
      EXPECT_LE(StepLatencyMs(guarded[0], period_ms, false, q),
                bound * StepLatencyMs(solo[0], period_ms, false, q))
          << "quantile " << q << " after the first second; solo " << solo[0] << ", with neighbour "
          << guarded[0];
    EXPECT_LE(StepLatencyMs(guarded[0], period_ms, true, 0.5),
              1.10 * StepLatencyMs(solo[0], period_ms, true, 0.5))
        << "the first second: solo " << solo[0] << ", with neighbour " << guarded[0];
    // Most of what the server leaves (0.43-0.44 of the GPU beside two busy loops on 2 cores, where
    // the best-effort client itself waits for the CPU; starved by the gate, it would get ~0.005).
    EXPECT_GT(guarded[1]["gpu_share"].get<double>(), 0.7 * 0.6)
        << guarded[1] << ": best effort runs between the steps";
    if (std::string(path) == "launch") {
      // The control: without priorities round robin stretches every step.
      auto unguarded = RunTogether({{"hp", "--priority normal", hp_args},
                                    {"be", "--priority normal", "launch busy {start} 2.5 1"}});
      EXPECT_GT(StepLatencyMs(unguarded[0], period_ms, false, 0.5), 1.3 * base) << unguarded[0];
    }
  }
}

// `gpumux status` shows a high-priority tenant's rhythm as its neighbours' launches see it, while
// it runs: a server launching a 1 ms kernel every ~5 ms (a 4 ms pause after each).
TEST_F(ComputeTest, StatusShowsAHighPriorityTenantsLearntRhythm) {
  std::string start = std::to_string(gpumux::NowNs() + 1'000'000'000ull);
  std::string run =
      "(" +
      Launch("hp", "--mem 1GiB --priority high", kClient + " launch latency " + start + " 3 1 4") +
      " > hp.json &" +
      Launch("be", "--mem 1GiB --priority low", kClient + " launch busy " + start + " 3 1") +
      " > be.json & sleep 3; " + GPUMUX_BINARY + " status --json; " + GPUMUX_BINARY +
      " status; wait)";
  auto [code, out] = Sh(run);
  size_t brace = out.find('{'), text = out.find("\nGPU 0:");
  ASSERT_NE(brace, std::string::npos) << out;
  ASSERT_NE(text, std::string::npos) << out;
  nlohmann::json status = nlohmann::json::parse(out.substr(brace, text - brace));
  bool saw_hp = false;
  for (const nlohmann::json& t : status["tenants"]) {
    if (t["id"] == "be") {
      EXPECT_FALSE(t.contains("rhythm")) << "a best-effort tenant has none: " << t;
      continue;
    }
    saw_hp = true;
    ASSERT_TRUE(t.contains("rhythm")) << t;
    EXPECT_NEAR(t["rhythm"]["period_ms"].get<double>(), 5.0, 0.5) << t;
    // Its 1 ms kernel to the synchronise's return: the shortest burst lately, which host stalls
    // on a loaded 2-core machine lengthen a little (1.35 ms once in CI beside the fuzzers).
    EXPECT_GE(t["rhythm"]["burst_ms"].get<double>(), 0.7) << t;
    EXPECT_LE(t["rhythm"]["burst_ms"].get<double>(), 1.6) << t;
    EXPECT_GE(t["rhythm"]["margin_ms"].get<double>(), 0.2) << t;
  }
  EXPECT_TRUE(saw_hp) << status;
  EXPECT_NE(out.find("hp: bursts every "), std::string::npos)
      << "the text view says it too: " << out;
}

// Under MPS, a best-effort tenant is a below-normal client (CUDA_MPS_CLIENT_PRIORITY=1, which
// `gpumux run --priority low` and gpumuxd set). The simulated GPU's MPS-like mode, told to model
// the priority at its ideal (GPUMUX_SIM_BELOW_NORMAL_WEIGHT=0; by default it does not), runs a
// normal client's kernels unslowed beside below-normal work, where a normal neighbour's doubles
// their time (both run at once).
TEST_F(ComputeTest, UnderMpsABelowNormalClientDoesNotSlowANormalOne) {
  auto p50_beside = [&](const std::string& client_priority) {
    std::string start = std::to_string(gpumux::NowNs() + 1'500'000'000ull);
    Sh("(export GPUMUX_SIM_MODE=mps GPUMUX_SIM_BELOW_NORMAL_WEIGHT=0; " +
       Launch("server", "--mem 1GiB", kClient + " launch latency " + start + " 2 1 1") +
       " > server.json & " +
       Launch("batch", "--mem 1GiB",
              "env CUDA_MPS_CLIENT_PRIORITY=" + client_priority + " " + kClient + " launch busy " +
                  start + " 2 1") +
       " > batch.json & wait)");
    auto [code, out] = Sh("cat server.json");
    return nlohmann::json::parse(out.empty() ? "{}" : out);
  };
  nlohmann::json below = p50_beside("1"), normal = p50_beside("0");
  ASSERT_TRUE(below.contains("p50_latency_ms") && normal.contains("p50_latency_ms"))
      << below << normal;
  EXPECT_LT(below["p50_latency_ms"].get<double>(), 1.15) << "1 ms kernels: " << below;
  EXPECT_GT(normal["p50_latency_ms"].get<double>(), 1.6) << "1 ms kernels: " << normal;
}

TEST_F(ComputeTest, GraphMemoryNodesCountAgainstTheQuota) {
  auto [code1, fits] = Sh(Launch(
      "g", "--mem 1GiB", kClient + " graphmem " + std::to_string(512 * gpumux::testing::kMiB)));
  ASSERT_EQ(code1, 0) << fits;
  auto j = nlohmann::json::parse(fits);
  EXPECT_EQ(j["instantiate"].get<int>(), 0);
  EXPECT_EQ(j["free_while_instantiated"].get<uint64_t>(), 512 * gpumux::testing::kMiB)
      << "the graph holds its memory";
  auto [code2, over] = Sh(Launch(
      "g", "--mem 1GiB", kClient + " graphmem " + std::to_string(2 * gpumux::testing::kGiB)));
  ASSERT_EQ(code2, 0) << over;
  EXPECT_EQ(nlohmann::json::parse(over)["instantiate"].get<int>(), 2)
      << "CUDA_ERROR_OUT_OF_MEMORY past the quota";
}

TEST_F(ComputeTest, BadComputeSettingsAreRefusedBeforeAnythingStarts) {
  for (const char* limits : {"--compute 0%", "--compute 150%", "--compute lots",
                             "--priority urgent", "--priority high --compute 50%", "--weight 0"}) {
    auto [code, out] = Sh(Launch("bad", std::string("--mem 1GiB ") + limits, "true"));
    EXPECT_EQ(code, 2) << limits;
  }
  // --strict: caps may not sum past 100%. The first tenant holds 60% while the second asks for 50%.
  FILE* first =
      popen((Launch("sixty", "--mem 1GiB --compute 60%", "sleep 2") + " 2>/dev/null").c_str(), "r");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  auto [code, out] = Sh(Launch("fifty", "--mem 1GiB --compute 50% --strict", "true"));
  EXPECT_EQ(code, 3) << "caps would sum to 110%: valid limits that do not fit (exit 3, not 2)";
  auto [ok, out2] = Sh(Launch("forty", "--mem 1GiB --compute 40% --strict", "true"));
  EXPECT_EQ(ok, 0);
  pclose(first);
}

}  // namespace
