// gpumuxd's compute sharing, measured in wall-clock time on a simulated GPU: the GPU time its
// governor meters, and a best-effort tenant between a high-priority tenant's steps. The tests run
// one at a time (CMake: SERIAL), since a neighbouring test's load shifts what they measure.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>

#include "agent_fixture.h"
#include "base/clock.h"
#include "latency_quantile.h"

namespace {

using gpumux::testing::LatencyQuantileMs;
using nlohmann::json;

using AgentComputeTest = gpumux::testing::AgentTest;

TEST_F(AgentComputeTest, TheGpuTimeTheGovernorMeasuresIsTheTimeTheTenantUsed) {
  StartAgent();
  json t = Call("POST", "/v1/tenants",
                {{"id", "metered"}, {"gpu", 0}, {"memory", "1GiB"}, {"compute", "30%"}}, 201);
  std::string start = std::to_string(gpumux::NowNs() + 500'000'000ull);
  auto [code, out] =
      Sh(Env(t) + std::string(GPUMUX_COMPUTE_CLIENT) + " launch busy " + start + " 2 1");
  ASSERT_EQ(code, 0) << out;
  double used_s =
      json::parse(out)["launches"].get<double>() * 1e-3;  // 1 ms kernels completed in the window
  json after = Call("GET", "/v1/tenants/metered", json(), 200);
  // The ledger also holds the kernels just outside the window (at most a few ms) and NVML's
  // rounding.
  EXPECT_NEAR(after["gpu_time_s"].get<double>(), used_s, 0.05 * used_s + 0.01) << after;
  EXPECT_NEAR(used_s / 2.0, 0.30, 0.05) << "held to its 30% cap";
  EXPECT_GT(after["held_launches"].get<uint64_t>(), 0u);
}

// A program with the shim unset launches past its tenant's gate (only the driver could hold it),
// but the GPU time it uses is still its tenant's: gpumuxd charges it there, so the tenant's
// figures (and its neighbours' division of the GPU) count it.
TEST_F(AgentComputeTest, AProgramThatBypassesTheShimIsChargedItsGpuTimeByItsTenant) {
  StartAgent();
  json t = Call("POST", "/v1/tenants",
                {{"id", "around"}, {"gpu", 0}, {"memory", "1GiB"}, {"compute", "20%"}}, 201);
  std::string start = std::to_string(gpumux::NowNs() + 300'000'000ull);
  auto [code, out] = Sh(Env(t) + "LD_PRELOAD= " + std::string(GPUMUX_COMPUTE_CLIENT) +
                        " launch busy " + start + " 2 1");
  ASSERT_EQ(code, 0) << out;
  double used_s = json::parse(out)["launches"].get<double>() * 1e-3;
  EXPECT_GT(used_s, 1.6) << "not held by a gate it never saw: " << out;
  json after = Call("GET", "/v1/tenants/around", json(), 200);
  // Charged from the first check after it began (twice a second), to its end.
  EXPECT_GT(after["gpu_time_s"].get<double>(), used_s - 0.6) << after;
  EXPECT_LT(after["gpu_time_s"].get<double>(), used_s + 0.1) << after;
}

// Under gpumuxd a high-priority tenant's processes stamp their launches and synchronising calls
// into its activity file, and gpumuxd copies them, checked, into the view that its neighbours'
// launch forecasts read: a best-effort tenant runs between the high-priority steps and is off the
// GPU when the next one comes (docs/compute-sharing.md).
TEST_F(AgentComputeTest, ABestEffortTenantRunsBetweenAHighPriorityTenantsStepsAndClearsThem) {
  StartAgent();
  json hp = Call("POST", "/v1/tenants",
                 {{"id", "hp"}, {"gpu", 0}, {"memory", "1GiB"}, {"priority", "high"}}, 201);
  json be = Call("POST", "/v1/tenants",
                 {{"id", "be"}, {"gpu", 0}, {"memory", "1GiB"}, {"priority", "low"}}, 201);
  // Steps of one 0.5 ms kernel, synchronised, 3 ms apart; the neighbour's 0.5 ms kernels back to
  // back.
  json learnt;
  auto run = [&](bool with_neighbour) {
    std::string start = std::to_string(gpumux::NowNs() + 500'000'000ull);
    std::string client = std::string(GPUMUX_COMPUTE_CLIENT) + " launch ";
    std::future<std::pair<int, std::string>> busy;
    if (with_neighbour)
      busy = std::async(std::launch::async, Sh, Env(be) + client + "busy " + start + " 3 0.5");
    auto steps =
        std::async(std::launch::async, Sh, Env(hp) + client + "latency " + start + " 3 0.5 3");
    if (with_neighbour) {  // halfway, gpumuxd shows the rhythm its neighbour keeps clear of
      std::this_thread::sleep_for(std::chrono::milliseconds(2000));
      learnt = Call("GET", "/v1/tenants/hp", json(), 200);
    }
    auto [code, out] = steps.get();
    EXPECT_EQ(code, 0) << out;
    json neighbour;
    if (busy.valid()) {
      auto [busy_code, busy_out] = busy.get();
      EXPECT_EQ(busy_code, 0) << busy_out;
      neighbour = json::parse(busy_out);
    }
    return std::pair(json::parse(out), neighbour);
  };
  json solo = run(false).first;
  auto [guarded, neighbour] = run(true);
  // The steps use a seventh of the GPU. Measured on the 2-core development machine, alone and
  // beside a compiler: the neighbour got 0.50-0.53 of the GPU, the steps' mean 1.02-1.05x solo;
  // with gpumuxd stamping a high-priority tenant's launches only from its activity counts (a tick
  // late, a burst over after 1.5 ms of quiet), 0.20-0.24 and 1.16-1.25x: both checks fail then
  // (measured before the simulator's waits became precise, which moved the first figures by 0.01).
  // Forecast from the beat alone, these steps (each 3 ms after the last returned: its delays add
  // up, and the beat lags them) gave the neighbour 0.36-0.45; from the latest start, which these
  // steps follow, 0.44-0.52 in eight runs, the steps' mean 1.04-1.07x solo (as before the beat).
  // Beside two busy loops on the 2 cores the neighbour got 0.33-0.34 and a few steps stalled for
  // the CPU (the mean then 1.04x solo in one run of three; p90 0.57-0.59 ms for 0.51-0.54), hence
  // p50 and p90 after the first second (latency_quantile.h), p90 within 0.1 ms (a best-effort
  // kernel ahead of a step adds up to 0.5 ms), and the neighbour's bound between those and the
  // 0.20-0.24 of the failure.
  const size_t first_second = 1000 / 3.5;
  EXPECT_LE(LatencyQuantileMs(guarded, first_second, false, 0.5),
            1.10 * LatencyQuantileMs(solo, first_second, false, 0.5))
      << "p50 after the first second; solo " << solo << ", beside best effort " << guarded;
  EXPECT_LE(LatencyQuantileMs(guarded, first_second, false, 0.9),
            LatencyQuantileMs(solo, first_second, false, 0.9) + 0.1)
      << "p90 after the first second; solo " << solo << ", beside best effort " << guarded;
  EXPECT_GT(neighbour["gpu_share"].get<double>(), 0.30)
      << neighbour << ", steps " << guarded << ", rhythm " << learnt["rhythm"];
  ASSERT_TRUE(learnt.contains("rhythm")) << learnt;
  EXPECT_NEAR(learnt["rhythm"]["period_ms"].get<double>(), 3.5, 0.3) << learnt;
  EXPECT_NEAR(learnt["rhythm"]["burst_ms"].get<double>(), 0.5, 0.2) << learnt;
}

// A tenant over two GPUs is held to its weight on each: gpumuxd sees it want its second GPU as
// well as its first (its processes count their launches in one activity file for the tenant, which
// each GPU's governor reads), so a neighbour there is held to its own share.
// gpumuxd learns who is at work from the tenants' activity counts, a tick late: a busy tenant
// still uses what a light neighbour leaves between its kernels (ComputeTest's twin under
// `gpumux run`).
TEST_F(AgentComputeTest, ABusyTenantUsesWhatALightOneLeavesBetweenItsKernels) {
  StartAgent();
  json server =
      Call("POST", "/v1/tenants", {{"id", "server"}, {"gpu", 0}, {"memory", "1GiB"}}, 201);
  json busy = Call("POST", "/v1/tenants", {{"id", "busy"}, {"gpu", 0}, {"memory", "1GiB"}}, 201);
  std::string start = std::to_string(gpumux::NowNs() + 500'000'000ull);
  std::string client = std::string(GPUMUX_COMPUTE_CLIENT) + " launch ";
  auto filler = std::async(std::launch::async, Sh, Env(busy) + client + "busy " + start + " 3 1");
  auto [code, out] = Sh(Env(server) + client + "latency " + start + " 3 1 9");
  auto [busy_code, busy_out] = filler.get();
  ASSERT_EQ(code, 0) << out;
  ASSERT_EQ(busy_code, 0) << busy_out;
  double light = json::parse(out)["gpu_share"].get<double>();
  double heavy = json::parse(busy_out)["gpu_share"].get<double>();
  EXPECT_GT(light, 0.07) << out << ": the server gets its kernels";
  EXPECT_GT(light + heavy, 0.97) << out << busy_out << ": the GPU idles while one has work";
}

TEST_F(AgentComputeTest, ATenantOverTwoGpusKeepsItsWeightOnTheSecond) {
  StartAgentOn({"--sim", "H100", "--gpus", "2"}, {});
  json wide = Call("POST", "/v1/tenants",
                   {{"id", "wide"}, {"gpus", {0, 1}}, {"memory", "1GiB"}, {"weight", 3}}, 201);
  json narrow = Call("POST", "/v1/tenants",
                     {{"id", "narrow"}, {"gpu", 1}, {"memory", "1GiB"}, {"weight", 1}}, 201);
  std::string start = std::to_string(gpumux::NowNs() + 500'000'000ull);
  std::string busy = std::string(GPUMUX_COMPUTE_CLIENT) + " launch busy " + start + " 3 1";
  // Its second GPU is its device 1; the neighbour's only GPU is its device 0.
  auto second = std::async(std::launch::async, Sh, "COMPUTE_CLIENT_DEVICE=1 " + Env(wide) + busy);
  auto [code, out] = Sh(Env(narrow) + busy);
  auto [wide_code, wide_out] = second.get();
  ASSERT_EQ(code, 0) << out;
  ASSERT_EQ(wide_code, 0) << wide_out;
  double wide_share = json::parse(wide_out)["gpu_share"].get<double>();
  double narrow_share = json::parse(out)["gpu_share"].get<double>();
  // Weights 3 : 1 of the GPU both keep busy.
  EXPECT_NEAR(wide_share, 0.75, 0.07) << "neighbour " << narrow_share;
  EXPECT_NEAR(narrow_share, 0.25, 0.07) << "spanning tenant " << wide_share;
}

// A high-priority tenant over two GPUs that works on its first only: its neighbour on the second
// keeps that GPU, neither yielding to its launches nor keeping clear of its bursts there.
TEST_F(AgentComputeTest, AHighPriorityTenantOverTwoGpusIsNotSeenOnTheOneItLeavesIdle) {
  StartAgentOn({"--sim", "H100", "--gpus", "2"}, {});
  json wide =
      Call("POST", "/v1/tenants",
           {{"id", "wide"}, {"gpus", {0, 1}}, {"memory", "1GiB"}, {"priority", "high"}}, 201);
  json be = Call("POST", "/v1/tenants",
                 {{"id", "be"}, {"gpu", 1}, {"memory", "1GiB"}, {"priority", "low"}}, 201);
  std::string start = std::to_string(gpumux::NowNs() + 500'000'000ull);
  std::string client = std::string(GPUMUX_COMPUTE_CLIENT) + " launch ";
  // Steps of one 1 ms kernel, 2 ms apart, on its device 0 (GPU 0); the neighbour busy on GPU 1.
  auto steps =
      std::async(std::launch::async, Sh, Env(wide) + client + "latency " + start + " 3 1 2");
  auto [code, out] = Sh(Env(be) + client + "busy " + start + " 3 1");
  auto [steps_code, steps_out] = steps.get();
  ASSERT_EQ(code, 0) << out;
  ASSERT_EQ(steps_code, 0) << steps_out;
  EXPECT_GT(json::parse(out)["gpu_share"].get<double>(), 0.9)
      << out << ": GPU 1 is the neighbour's alone";
  EXPECT_GT(json::parse(steps_out)["gpu_share"].get<double>(), 0.25) << steps_out;
}

}  // namespace
