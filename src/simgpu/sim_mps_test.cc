// The MPS-like mode's processor sharing, played forward by hand: work slows only while others'
// runs beside it, below-normal clients by their weight, and the forecast a waiter sleeps on.
#include "simgpu/sim_mps.h"

#include <gtest/gtest.h>

#include "simgpu/schedule_fixture.h"

namespace gpumux::sim {
namespace {

using namespace testing;  // kUs, kMs
using SharedTest = testing::ScheduleTest<AdvanceShared>;

TEST_F(SharedTest, WorkAloneTakesItsTimeWithNoSwitch) {
  At(1 * kMs);
  uint64_t a = Submit(s_.get(), 3, 5 * kMs);
  uint64_t b = Submit(s_.get(), 3, 1 * kMs);
  EXPECT_EQ(SharedDoneForecast(*s_, 3, b), 7 * kMs);
  At(10 * kMs);
  ASSERT_TRUE(Done(*s_, 3, a) && Done(*s_, 3, b));
  EXPECT_EQ(DoneAt(*s_, 3, a), 6 * kMs);
  EXPECT_EQ(DoneAt(*s_, 3, b), 7 * kMs) << "a context's work runs in order";
  EXPECT_EQ(charged_[3], 6 * kMs);
}

// A 5 ms graph launched while another process's 1 ms kernel runs: both at half speed for 2 ms
// (the kernel's 1 ms and 1 ms of the graph done), then the graph alone: done at 6 ms, where a
// stretch fixed at its start would double all of it (10 ms).
TEST_F(SharedTest, WorkSlowsOnlyWhileAnotherRunsBesideIt) {
  At(0);
  uint64_t kernel = Submit(s_.get(), 0, 1 * kMs);
  uint64_t graph = Submit(s_.get(), 1, 5 * kMs);
  EXPECT_EQ(SharedDoneForecast(*s_, 1, graph), 6 * kMs) << "what a waiter sleeps until";
  EXPECT_EQ(SharedDoneForecast(*s_, 0, kernel), 2 * kMs);
  At(20 * kMs);
  ASSERT_TRUE(Done(*s_, 0, kernel) && Done(*s_, 1, graph));
  EXPECT_EQ(DoneAt(*s_, 0, kernel), 2 * kMs);
  EXPECT_EQ(DoneAt(*s_, 1, graph), 6 * kMs);
  EXPECT_EQ(charged_[0], 1 * kMs) << "charged its time alone";
  EXPECT_EQ(charged_[1], 5 * kMs);
}

TEST_F(SharedTest, WorkArrivingLaterSlowsWhatRunsFromThenOn) {
  At(0);
  uint64_t a = Submit(s_.get(), 0, 4 * kMs);
  At(2 * kMs);  // half of it done
  uint64_t b = Submit(s_.get(), 1, 4 * kMs);
  At(30 * kMs);
  EXPECT_EQ(DoneAt(*s_, 0, a), 6 * kMs) << "2 ms alone, then 2 ms at half speed";
  EXPECT_EQ(DoneAt(*s_, 1, b), 8 * kMs) << "2 ms of it shared (in 4 ms), then 2 ms alone";
}

TEST_F(SharedTest, ThreeSharersEachRunAtAThirdUntilOneRunsOut) {
  At(0);
  uint64_t a = Submit(s_.get(), 0, 1 * kMs);
  uint64_t b = Submit(s_.get(), 1, 2 * kMs);
  uint64_t c = Submit(s_.get(), 2, 3 * kMs);
  EXPECT_EQ(SharedDoneForecast(*s_, 2, c), 6 * kMs);
  At(10 * kMs);
  EXPECT_EQ(DoneAt(*s_, 0, a), 3 * kMs);
  EXPECT_EQ(DoneAt(*s_, 1, b), 5 * kMs) << "1 ms at a third, 1 ms at a half";
  EXPECT_EQ(DoneAt(*s_, 2, c), 6 * kMs);
}

TEST_F(SharedTest, ABelowNormalClientSharesByItsWeight) {
  s_->contexts[1].weight = 0.25;
  At(0);
  uint64_t normal = Submit(s_.get(), 0, 4 * kMs);
  uint64_t below = Submit(s_.get(), 1, 4 * kMs);
  At(20 * kMs);
  EXPECT_EQ(DoneAt(*s_, 0, normal), 5 * kMs) << "at 4/5 of its speed";
  EXPECT_EQ(DoneAt(*s_, 1, below), 8 * kMs) << "1 ms done at 1/5, then 3 ms alone";

  s_->contexts[1].weight = 0;  // the ideal: nearly stopped beside a normal client
  uint64_t n2 = Submit(s_.get(), 0, 4 * kMs);
  uint64_t b2 = Submit(s_.get(), 1, 4 * kMs);
  At(40 * kMs);
  EXPECT_NEAR(double(DoneAt(*s_, 0, n2)), 24.0 * kMs, 5 * kUs);
  EXPECT_NEAR(double(DoneAt(*s_, 1, b2)), 28.0 * kMs, 5 * kUs);
}

}  // namespace
}  // namespace gpumux::sim
