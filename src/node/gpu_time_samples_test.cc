#include "node/gpu_time_samples.h"

#include <gtest/gtest.h>

#include <vector>

namespace gpumux::node {
namespace {

nvmlProcessUtilizationSample_t Sample(unsigned pid, unsigned long long at_us, unsigned percent) {
  return {pid, at_us, percent, 0, 0, 0};
}

constexpr uint64_t kMsNs = 1'000'000;

TEST(GpuTimeSamples, SeveralSamplesInOneReadCountEachOverItsOwnPeriod) {
  GpuTimeSamples g(7, true);
  EXPECT_EQ(g.Add(std::vector{Sample(7, 1'000'000, 100)}), 0u)
      << "the first sample starts the count";
  // Three 100 ms periods at 100%, read at once and out of order, with another process between.
  std::vector<nvmlProcessUtilizationSample_t> read = {
      Sample(7, 1'300'000, 100), Sample(9, 1'250'000, 100), Sample(7, 1'100'000, 100),
      Sample(7, 1'200'000, 100)};
  EXPECT_EQ(g.Add(read), 300 * kMsNs) << "300 ms of wall time hold at most 300 ms of GPU time";
  EXPECT_EQ(g.newest_us(), 1'300'000u);
  EXPECT_EQ(g.Add(read), 0u) << "samples already counted are not counted again";
}

TEST(GpuTimeSamples, AnIdleGapCountsAsAtMostTwoPeriods) {
  GpuTimeSamples g(7, true);
  g.Add(std::vector{Sample(7, 1'000'000, 50), Sample(7, 1'100'000, 50)});
  // Idle for ten seconds (NVML keeps no samples of an idle process), then one busy period.
  EXPECT_EQ(g.Add(std::vector{Sample(7, 11'100'000, 100)}), 200 * kMsNs);
}

TEST(GpuTimeSamples, JitterIsNotTakenForThePeriodAndPercentagesAreAtMostOneHundred) {
  GpuTimeSamples g(7, true);
  g.Add(std::vector{Sample(7, 1'000'000, 0), Sample(7, 1'100'000, 0), Sample(7, 1'100'010, 0)});
  EXPECT_EQ(g.Add(std::vector{Sample(7, 1'200'010, 250)}), 100 * kMsNs);
}

TEST(GpuTimeSamples, SamplesFromBeforeTheStartAreNotCountedAndTheFirstAfterItIsOnePeriodAtMost) {
  GpuTimeSamples g(7, true, 10'000'000);
  EXPECT_EQ(g.Add(std::vector{Sample(7, 9'000'000, 100)}), 0u) << "a former process with PID 7";
  EXPECT_FALSE(g.seen());
  // The first sample, 5 s after the start (the process loaded its model first).
  EXPECT_EQ(g.Add(std::vector{Sample(7, 15'000'000, 100)}), 166'667 * 1000u);
  EXPECT_TRUE(g.seen());
}

TEST(GpuTimeSamples, TheSimulatedGpusSamplesCoverTheWholeSpanSinceTheLastRead) {
  GpuTimeSamples g(7, false);
  g.Add(std::vector{Sample(7, 1'000'000, 0), Sample(7, 1'001'000, 0)});
  EXPECT_EQ(g.Add(std::vector{Sample(7, 1'011'000, 40)}), 4 * kMsNs);
  EXPECT_EQ(g.Add(std::vector{Sample(7, 1'012'000, 300)}), 3 * kMsNs)
      << "a whole 3 ms kernel that ended in a 1 ms span";
}

}  // namespace
}  // namespace gpumux::node
