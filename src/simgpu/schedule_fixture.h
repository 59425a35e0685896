// A simulated GPU's schedule played forward by hand in a test: the round robin (Advance) or the
// MPS-like sharing (AdvanceShared), with what each context was charged.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "simgpu/sim_timeslice.h"

namespace gpumux::sim::testing {

inline constexpr uint64_t kUs = 1000, kMs = 1'000'000;

template <void (*kAdvance)(SliceSchedule*, uint64_t, ChargeFn, void*)>
class ScheduleTest : public ::testing::Test {
 protected:
  ScheduleTest() : s_(std::make_unique<SliceSchedule>()) {
    StartSchedule(s_.get(), 1024 * kUs, 25 * kUs);
    for (SliceContext& c : s_->contexts) c.weight = 1;
  }
  // Advances to `t`, adding each context's charged time to charged_.
  void At(uint64_t t) {
    kAdvance(
        s_.get(), t,
        [](int c, uint64_t ns, void* self) { static_cast<ScheduleTest*>(self)->charged_[c] += ns; },
        this);
  }
  std::unique_ptr<SliceSchedule> s_;
  uint64_t charged_[kSliceContexts] = {};
};

}  // namespace gpumux::sim::testing
