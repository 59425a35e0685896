#include "share/colocation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace gpumux {
namespace {

TEST(QueuedSteps, ATenantAloneOrBesideTenantsThatNeverUseTheGpuKeepsItsStep) {
  EXPECT_DOUBLE_EQ(QueuedSteps(std::vector<GpuPhase>{{0.3, 1, 0.7, 0, 1}})[0], 1.0);
  std::vector<double> steps = QueuedSteps(std::vector<GpuPhase>{{0.3, 1, 0.7}, {0, 1, 1}});
  EXPECT_DOUBLE_EQ(steps[0], 1.0);
  EXPECT_DOUBLE_EQ(steps[1], 1.0);
}

TEST(QueuedSteps, SaturatingTenantsEachGetTheirShareAsInTheFluidModel) {
  std::vector<double> steps = QueuedSteps(std::vector<GpuPhase>(3, {1e-3, 1, 0}));
  for (double s : steps) EXPECT_NEAR(s, 3e-3, 1e-15);
}

// Two tenants each on the GPU a quarter of the time demand half of it together: the fluid model
// sees no contention, but their phases meet by chance. Tenant 1's phase R = 0.25 (1 + Q) with
// Q = R / (R + 0.75): R² + 0.25 R - 0.1875 = 0.
TEST(QueuedSteps, PhasesThatMeetByChanceSlowEachOtherBeforeTheGpuIsFull) {
  std::vector<double> steps = QueuedSteps(std::vector<GpuPhase>(2, {0.25, 1, 0.75}));
  double r = (-0.25 + std::sqrt(0.0625 + 0.75)) / 2;
  EXPECT_NEAR(steps[0], r + 0.75, 1e-9);
  EXPECT_NEAR(steps[1], r + 0.75, 1e-9);
  EXPECT_GT(steps[0], 1.07);
  // More co-runners, more meetings: each step grows with the number of tenants.
  double before = steps[0];
  for (size_t n = 3; n <= 6; ++n) {
    double now = QueuedSteps(std::vector<GpuPhase>(n, {0.25, 1, 0.75}))[0];
    EXPECT_GT(now, before) << n << " tenants";
    before = now;
  }
}

TEST(QueuedSteps, ACoRunnerThatOccupiesLessOfTheGpuSlowsLess) {
  double full = QueuedSteps(std::vector<GpuPhase>{{0.5, 1, 0.5}, {0.5, 1, 0.5}})[0];
  double light = QueuedSteps(std::vector<GpuPhase>{{0.5, 1, 0.5}, {0.5, 0.3, 0.5}})[0];
  EXPECT_LT(light, full);
  EXPECT_GT(light, 1.0);
}

TEST(QueuedSteps, APacedTenantAbsorbsDelaysWithinItsSlack) {
  // Paced at 1 s a step with 0.1 s of GPU work, beside a tenant that saturates the GPU: its phase
  // doubles (0.2 s) and still fits its pace; the other is slowed by the 20% of the time the paced
  // one is in its phase.
  std::vector<double> steps = QueuedSteps(std::vector<GpuPhase>{{0.1, 1, 0, 1.0}, {1.0, 1, 0}});
  EXPECT_DOUBLE_EQ(steps[0], 1.0);
  EXPECT_NEAR(steps[1], 1.2, 1e-12);
}

TEST(QueuedSteps, AStretchThePhaseHasAnywayIsAFloor) {
  std::vector<double> steps =
      QueuedSteps(std::vector<GpuPhase>{{0.25, 1, 0.75, 0, 2.0}, {0.01, 1, 0.99}});
  EXPECT_NEAR(steps[0], 0.5 + 0.75, 1e-12);
}

}  // namespace
}  // namespace gpumux
