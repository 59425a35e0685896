// The simulated GPU's round robin, played forward by hand: slices, preemption, switch costs, and
// when past work completed.
#include "simgpu/sim_timeslice.h"

#include <gtest/gtest.h>

#include "simgpu/schedule_fixture.h"

namespace gpumux::sim {
namespace {

using namespace testing;  // kUs, kMs
using SliceTest = testing::ScheduleTest<Advance>;

TEST_F(SliceTest, AContextAloneKeepsTheGpuSliceAfterSliceWithoutASwitch) {
  At(1 * kMs);
  uint64_t ticket = Submit(s_.get(), 3, 5 * kMs);
  At(5 * kMs);
  EXPECT_FALSE(Done(*s_, 3, ticket));
  EXPECT_EQ(EarliestDone(*s_, 3, ticket), 6 * kMs);
  At(7 * kMs);
  ASSERT_TRUE(Done(*s_, 3, ticket));
  EXPECT_EQ(DoneAt(*s_, 3, ticket), 6 * kMs) << "5 ms of work from 1 ms, never switched out";
  EXPECT_EQ(charged_[3], 5 * kMs);
}

TEST_F(SliceTest, ALongKernelIsPreemptedAtTheSlicesEndAndTheOtherContextRuns) {
  // A submits a 10 ms kernel at 0; B a 1 ms one at 0.1 ms. B waits for A's slice to end and one
  // switch, runs 1 ms (under a slice); A resumes after another switch.
  At(0);
  uint64_t a = Submit(s_.get(), 0, 10 * kMs);
  At(100 * kUs);
  uint64_t b = Submit(s_.get(), 1, 1 * kMs);
  At(20 * kMs);
  ASSERT_TRUE(Done(*s_, 0, a) && Done(*s_, 1, b));
  EXPECT_EQ(DoneAt(*s_, 1, b), 1024 * kUs + 25 * kUs + 1 * kMs);
  EXPECT_EQ(DoneAt(*s_, 0, a), 10 * kMs + 1 * kMs + 2 * 25 * kUs);
  EXPECT_EQ(charged_[0], 10 * kMs);
  EXPECT_EQ(charged_[1], 1 * kMs);
}

TEST_F(SliceTest, BusyContextsTakeTurnsAndTheSwitchesCostGpuTime) {
  At(0);
  for (int c = 0; c < 3; ++c) Submit(s_.get(), c, 100 * kMs);
  At(30 * kMs);
  // 30 ms of slices of 1,024 µs each preceded by a 25 µs switch (the first one included).
  uint64_t total = charged_[0] + charged_[1] + charged_[2];
  EXPECT_NEAR(double(total), 30.0 * kMs * 1024 / 1049, 1.1 * kMs);
  for (int c = 0; c < 3; ++c) EXPECT_NEAR(double(charged_[c]), total / 3.0, 1.1 * kMs) << c;
}

TEST_F(SliceTest, ShortWorkGivesTheGpuUpBeforeItsSliceEnds) {
  At(0);
  uint64_t a = Submit(s_.get(), 0, 200 * kUs);
  uint64_t b = Submit(s_.get(), 1, 200 * kUs);
  At(1 * kMs);
  ASSERT_TRUE(Done(*s_, 0, a) && Done(*s_, 1, b));
  EXPECT_EQ(DoneAt(*s_, 0, a), 200 * kUs);
  EXPECT_EQ(DoneAt(*s_, 1, b), 200 * kUs + 25 * kUs + 200 * kUs);
}

TEST_F(SliceTest, ADroppedContextGetsNoMoreSlices) {
  At(0);
  Submit(s_.get(), 0, 100 * kMs);
  uint64_t b = Submit(s_.get(), 1, 5 * kMs);
  At(1 * kMs);
  Drop(s_.get(), 0);  // its process died
  At(10 * kMs);
  EXPECT_TRUE(Done(*s_, 1, b));
  EXPECT_LE(DoneAt(*s_, 1, b), 1024 * kUs + 25 * kUs + 5 * kMs);
  EXPECT_LE(charged_[0], 1024 * kUs);
}

}  // namespace
}  // namespace gpumux::sim
