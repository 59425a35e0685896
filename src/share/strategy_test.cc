#include "share/strategy.h"

#include <gtest/gtest.h>

#include "core/catalog_fixture.h"

#include "share/gpu_choice.h"
#include "share/strategy_registry.h"
#include "share/test_support.h"

namespace gpumux {
namespace {

class StrategyTest : public CatalogFixture {};

// The packing scenario: two independent 13B BF16 batch-1 servers on one H100.
TEST_F(StrategyTest, TwoThirteenBServersPackForFiftyTokensPerSecond) {
  TenantSet set(h100_);
  set.AddDecoder("a", 13e9, 1.0, MinRate(50));
  set.AddDecoder("b", 13e9, 1.0, MinRate(50));
  // 52 GB fits with room to spare.
  EXPECT_LT(52e9, h100_.memory_bytes - 25e9);
  StrategyResult mps = StrategyFor(ShareMode::kMps).Evaluate(h100_, set.loads());
  StrategyResult ts = StrategyFor(ShareMode::kTimeSlice).Evaluate(h100_, set.loads());
  for (const StrategyResult* r : {&mps, &ts}) {
    ASSERT_TRUE(r->fits) << r->verdict;
    for (const TenantOutcome& o : r->tenants) {
      EXPECT_NEAR(o.rate / o.solo_rate, 0.5, 0.03)
          << ShareModeName(r->kind) << ": about half its solo rate";
    }
  }
  GpuChoice choice = ChooseStrategy(h100_, set.loads());
  ASSERT_TRUE(choice.chosen);
  EXPECT_GE(choice.chosen->headroom, 1.0);
}

TEST_F(StrategyTest, TwoThirteenBServersAreRefusedForHundredAndSayWhy) {
  TenantSet set(h100_);
  set.AddDecoder("a", 13e9, 1.0, MinRate(100));
  set.AddDecoder("b", 13e9, 1.0, MinRate(100));
  GpuChoice choice = ChooseStrategy(h100_, set.loads());
  EXPECT_FALSE(choice.chosen);
  ASSERT_EQ(choice.considered.size(), 3u);  // mig, mps, timeslice
  for (const StrategyResult& r : choice.considered) {
    EXPECT_FALSE(r.fits);
    EXPECT_NE(r.verdict.find("< SLO 100"), std::string::npos) << r.verdict;
  }
  // MIG: the biggest instance two tenants can share is 3g.40gb, half the bandwidth -> 64 tok/s.
  const StrategyResult& mig = choice.considered[0];
  ASSERT_EQ(mig.kind, ShareMode::kMig);
  EXPECT_NE(mig.verdict.find("3g.40gb"), std::string::npos) << mig.verdict;
  EXPECT_NE(mig.verdict.find("50.0% of bandwidth"), std::string::npos) << mig.verdict;
  EXPECT_NEAR(mig.tenants[0].rate, 64.4, 0.1);
  EXPECT_FALSE(FitsAny(h100_, set.loads()));
}

TEST_F(StrategyTest, WholeIsOneTenantOnly) {
  TenantSet set(h100_);
  set.AddDecoder("a", 13e9, 1.0, MinRate(100));
  StrategyResult one = StrategyFor(ShareMode::kWhole).Evaluate(h100_, set.loads());
  EXPECT_TRUE(one.fits);
  EXPECT_DOUBLE_EQ(one.tenants[0].slowdown, 1.0);
  set.AddDecoder("b", 13e9, 1.0, MinRate(100));
  EXPECT_FALSE(StrategyFor(ShareMode::kWhole).Evaluate(h100_, set.loads()).fits);
}

TEST_F(StrategyTest, MemoryMustFitForTimeSharing) {
  TenantSet set(h100_);
  set.AddDecoder("a", 30e9, 1.0, {});  // 60 GB
  set.AddDecoder("b", 13e9, 1.0, {});  // 26 GB: 86 GB > 85.9 GB
  StrategyResult mps = StrategyFor(ShareMode::kMps).Evaluate(h100_, set.loads());
  EXPECT_FALSE(mps.fits);
  EXPECT_NE(mps.verdict.find("memory"), std::string::npos) << mps.verdict;
  EXPECT_FALSE(StrategyFor(ShareMode::kTimeSlice).Evaluate(h100_, set.loads()).fits);
}

// A paced job busy 10% of the time beside a decoder that never leaves the GPU: each of the job's
// turns meets the decoder's and takes twice as long (20% of its step, within its pace), and the
// decoder shares the GPU's usable time with it for that 20%: rate usable / (1 + 0.2 / usable).
TEST_F(StrategyTest, TimeSliceGivesAnIdleTenantItsNeedAndTheRestToTheBusyOne) {
  TenantSet set(h100_);
  set.Add({"etl", GenericJob(5e9, 0.1 * h100_.bandwidth, 1e12, DType::kBf16), {}});  // busy 10%
  set.AddDecoder("llm", 13e9, 1.0, {});
  StrategyResult ts = StrategyFor(ShareMode::kTimeSlice).Evaluate(h100_, set.loads());
  EXPECT_NEAR(ts.tenants[0].slowdown, 1.0, 1e-9);
  double usable = kTimeSliceQuantumSeconds / (kTimeSliceQuantumSeconds + kContextSwitchSeconds);
  EXPECT_NEAR(ts.tenants[1].rate / ts.tenants[1].solo_rate, usable / (1 + 0.2 / usable), 1e-9);
}

// A context holds the GPU through the short gaps between its launches: two tenants whose kernels
// run a fifth of each step, with the rest off the GPU, hold it for GpuKind::timeslice_hold fifths
// each and queue for it far more often than their 40% of demand suggests (the H200 measurements
// in bench/fidelity/colocation.csv: 1.36x each for two such servers).
TEST_F(StrategyTest, TimeSlicedTenantsWithIdleTimeStillQueueForTheGpu) {
  LlmSpec spec;
  spec.params = 1e-3 * h100_.bandwidth / 2;  // bf16: 1 ms of streaming at η = 1
  spec.bandwidth_efficiency = 1;
  Workload w = LlmDecode(spec);
  w.step_overhead_seconds = 4e-3;
  TenantSet set(h100_);
  set.Add({"a", w, {}});
  set.Add({"b", w, {}});
  StrategyResult ts = StrategyFor(ShareMode::kTimeSlice).Evaluate(h100_, set.loads());
  StrategyResult mps = StrategyFor(ShareMode::kMps).Evaluate(h100_, set.loads());
  for (int i = 0; i < 2; ++i) {
    EXPECT_GT(ts.tenants[i].slowdown, 1.25) << ts.verdict;
    EXPECT_LT(ts.tenants[i].slowdown, 1.5) << ts.verdict;
    EXPECT_GT(mps.tenants[i].slowdown, 1.02) << mps.verdict;
    EXPECT_LT(mps.tenants[i].slowdown, ts.tenants[i].slowdown) << mps.verdict;
  }
  // Without the hold (a GPU that switches at every gap) the turns meet less often.
  GpuKind eager = h100_;
  eager.timeslice_hold = 1;
  StrategyResult quick = StrategyFor(ShareMode::kTimeSlice).Evaluate(eager, set.loads());
  EXPECT_LT(quick.tenants[0].slowdown, ts.tenants[0].slowdown);
}

TEST_F(StrategyTest, MigReportsStrandedCapacity) {
  TenantSet set(h100_);
  // A 7B decoder needs 14 GB: the smallest instance that holds it is 1g.20gb or 2g.20gb.
  set.AddDecoder("small", 7e9, 0.7, {});
  StrategyResult mig = StrategyFor(ShareMode::kMig).Evaluate(h100_, set.loads());
  ASSERT_TRUE(mig.fits);
  const TenantOutcome& o = mig.tenants[0];
  EXPECT_GT(o.stranded_memory, 0);
  EXPECT_GT(o.stranded_flops, 0);
  EXPECT_GE(o.stranded_bandwidth, -1e-3);
}

TEST_F(StrategyTest, MpsThreadCapLimitsComputeBoundTenants) {
  TenantSet set(h100_);
  Tenant t{"prefill", {}, {}};
  LlmSpec spec;
  spec.shape = &catalog_.FindModel("Llama-3-8B");
  spec.context = 2048;
  t.work = LlmPrefill(spec);
  t.mps_thread_cap = 0.5;
  set.Add(t);
  StrategyResult mps = StrategyFor(ShareMode::kMps).Evaluate(h100_, set.loads());
  EXPECT_NEAR(mps.tenants[0].slowdown, 2.0, 1e-6);
}

}  // namespace
}  // namespace gpumux
