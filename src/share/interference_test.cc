#include "share/interference.h"

#include <gtest/gtest.h>

#include "core/catalog_fixture.h"

#include <random>

#include "share/test_support.h"

namespace gpumux {
namespace {

class InterferenceTest : public CatalogFixture {};

TEST_F(InterferenceTest, TwoSaturatingDecodersEachGetHalf) {
  TenantSet set(h100_);
  set.AddDecoder("a", 13e9, 1.0, {});
  set.AddDecoder("b", 13e9, 1.0, {});
  Stretch s = SolveMpsStretch(set.loads());
  EXPECT_NEAR(s.bandwidth, 2.0, 1e-9);
  EXPECT_NEAR(s.compute, 1.0, 1e-9);
  for (const TenantLoad* l : set.loads()) {
    EXPECT_NEAR(StretchedStepRate(*l, s) / l->solo_step_rate(), 0.5, 1e-9);
  }
}

TEST_F(InterferenceTest, LaunchGapBoundDecodersHarvestIdleBandwidth) {
  // At η = 0.6 two decoders demand 120% of the bandwidth: each slows 1.2x, together 1.67x of one.
  TenantSet set(h100_);
  set.AddDecoder("a", 8e9, 0.6, {});
  set.AddDecoder("b", 8e9, 0.6, {});
  EXPECT_NEAR(SolveMpsStretch(set.loads()).bandwidth, 1.2, 1e-9);
}

// Time off the GPU each step (launches, synchronisation) leaves bandwidth idle that a neighbour
// under MPS uses: two decoders that each stream 5 ms and wait 2.5 ms demand 133% together, and the
// stretch S with 2 · 5 / (5·S + 2.5) = 1 is 1.5 — steps of 10 ms against 7.5 alone, not 2x.
TEST_F(InterferenceTest, TimeOffTheGpuEachStepLeavesBandwidthToANeighbour) {
  TenantSet set(h100_);
  LlmSpec spec;
  spec.params = 5e-3 * h100_.bandwidth / 2;  // bf16: 5 ms of streaming at η = 1
  spec.bandwidth_efficiency = 1;
  Workload w = LlmDecode(spec);
  w.step_overhead_seconds = 2.5e-3;
  set.Add({"a", w, {}});
  set.Add({"b", w, {}});
  EXPECT_NEAR(set.loads()[0]->solo_step_rate(), 1 / 7.5e-3, 1e-6);
  Stretch s = SolveMpsStretch(set.loads());
  EXPECT_NEAR(s.bandwidth, 1.5, 1e-9);
  EXPECT_NEAR(StretchedStepRate(*set.loads()[0], s), 1 / 10e-3, 1e-6);
  // Waiting as long as it streams, each uses half: together they fit and neither slows.
  w.step_overhead_seconds = 5e-3;
  TenantSet fits(h100_);
  fits.Add({"a", w, {}});
  fits.Add({"b", w, {}});
  EXPECT_NEAR(SolveMpsStretch(fits.loads()).bandwidth, 1.0, 1e-12);
}

// On a calibrated GPU the tenants can move together only what its best streaming kernel moved:
// contention starts below the datasheet's bandwidth. Two decoders at η = 0.6 of a GPU whose
// streaming kernel reached 0.8 demand 120% of the peak, 150% of what is attainable: each slows
// 1.5x, not 1.2x.
TEST_F(InterferenceTest, OnACalibratedGpuTenantsShareWhatItsStreamingKernelAchieved) {
  GpuKind calibrated = h100_;
  GpuCalibration c;
  c.gpu = h100_.name;
  c.bandwidth = 0.8 * h100_.bandwidth;
  c.flops = h100_.PeakFlops(DType::kBf16);
  calibrated.calibration = c;
  EXPECT_DOUBLE_EQ(calibrated.MpsCapacity().bandwidth, 0.8);
  EXPECT_DOUBLE_EQ(h100_.MpsCapacity().bandwidth, 1.0);
  TenantSet set(calibrated);
  LlmSpec spec;
  spec.params = 8e9;
  spec.bandwidth_efficiency = 0.6;
  spec.efficiency_stated = true;
  set.Add({"a", LlmDecode(spec), {}});
  set.Add({"b", LlmDecode(spec), {}});
  EXPECT_NEAR(SolveMpsStretch(set.loads(), {}, calibrated.MpsCapacity()).bandwidth, 1.5, 1e-9);
  EXPECT_NEAR(SolveMpsStretch(set.loads()).bandwidth, 1.2, 1e-9);
}

TEST_F(InterferenceTest, PacedTenantKeepsItsPaceAndFreesBandwidthForOthers) {
  TenantSet set(h100_);
  // A generic job wanting 20% of the bandwidth, beside a saturating decoder.
  set.Add({"etl", GenericJob(5e9, 0.2 * h100_.bandwidth, 1e12, DType::kBf16), {}});
  set.AddDecoder("llm", 13e9, 1.0, {});
  Stretch s = SolveMpsStretch(set.loads());
  const TenantLoad& etl = *set.loads()[0];
  const TenantLoad& llm = *set.loads()[1];
  EXPECT_NEAR(StretchedStepRate(etl, s), 1.0, 1e-9) << "its 20% still fits in the stretched time";
  EXPECT_NEAR(StretchedStepRate(llm, s) / llm.solo_step_rate(), 0.8, 1e-9)
      << "the decoder gets the other 80%";
}

TEST_F(InterferenceTest, NeverHandsOutMoreThanTheGpuHas) {
  // Property: on random mixes the predicted consumption never exceeds bandwidth or math capacity,
  // and at least one resource is saturated whenever anyone is slowed.
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0, 1);
  for (int trial = 0; trial < 500; ++trial) {
    TenantSet set(h100_);
    int n = 1 + int(u(rng) * 8);
    for (int i = 0; i < n; ++i) {
      if (u(rng) < 0.5) {
        set.AddDecoder("d", (1 + 30 * u(rng)) * 1e9, 0.3 + 0.7 * u(rng), {});
      } else {
        set.Add(
            {"g", GenericJob(1e9, u(rng) * h100_.bandwidth, u(rng) * 900e12, DType::kBf16), {}});
      }
    }
    Stretch s = SolveMpsStretch(set.loads());
    double bw = 0, math = 0;
    bool slowed = false;
    for (const TenantLoad* l : set.loads()) {
      double rate = StretchedStepRate(*l, s);
      bw += rate * l->bandwidth_use;
      math += rate * l->compute_use;
      slowed |= rate < l->solo_step_rate() * (1 - 1e-9);
    }
    EXPECT_LE(bw, 1 + 1e-9) << "trial " << trial;
    EXPECT_LE(math, 1 + 1e-9) << "trial " << trial;
    if (slowed) {
      EXPECT_GT(std::max(bw, math), 1 - 1e-6) << "trial " << trial << ": slowed but idle";
    }
  }
}

}  // namespace
}  // namespace gpumux
