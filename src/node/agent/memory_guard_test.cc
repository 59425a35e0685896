#include "node/agent/memory_guard.h"

#include <gtest/gtest.h>

namespace gpumux::agent {
namespace {

constexpr uint64_t kMiB = 1ull << 20, kGiB = 1ull << 30;

TEST(MemoryGuard, AProcessAtItsQuotaWithItsContextIsWithinTheLimit) {
  // 4 GiB granted and all of it allocated, plus a 600 MiB context the shim never saw.
  MemoryCheck c = CheckTenantMemory(4 * kGiB, {{101, 4 * kGiB, 4 * kGiB + 600 * kMiB}}, kGiB);
  EXPECT_EQ(c.held, 4 * kGiB + 600 * kMiB);
  EXPECT_EQ(c.outside, 600 * kMiB);
  EXPECT_EQ(c.limit, 5 * kGiB);
  EXPECT_EQ(c.over, 0);
}

TEST(MemoryGuard, CreditGrantedButNotYetAllocatedCountsAsTheTenants) {
  // The shim holds granted credit it has not spent: the footprint is the grant.
  MemoryCheck c = CheckTenantMemory(2 * kGiB, {{7, 2 * kGiB, 1 * kGiB}}, 0);
  EXPECT_EQ(c.footprint, 2 * kGiB);
  EXPECT_EQ(c.outside, 0u);
  EXPECT_EQ(c.over, 0);
}

TEST(MemoryGuard, TheProcessHoldingMostOutsideItsGrantsIsTheOneOver) {
  MemoryCheck c = CheckTenantMemory(4 * kGiB,
                                    {{1, 2 * kGiB, 2 * kGiB + 300 * kMiB},
                                     {2, 1 * kGiB, 9 * kGiB},
                                     {3, 1 * kGiB, 1 * kGiB + 500 * kMiB}},
                                    kGiB);
  EXPECT_EQ(c.limit, 7 * kGiB);
  EXPECT_EQ(c.footprint, 2 * kGiB + 300 * kMiB + 9 * kGiB + kGiB + 500 * kMiB);
  EXPECT_EQ(c.over, 2);
}

TEST(MemoryGuard, ABypasserIsTheOneOverEvenBesideALargerContext) {
  // The registered process's 900 MiB context is within its allowance; the 300 MiB of the process
  // that bypassed the shim are what put the tenant over.
  MemoryCheck c = CheckTenantMemory(
      4 * kGiB, {{1, 4 * kGiB, 4 * kGiB + 900 * kMiB}, {2, 0, 300 * kMiB, false}}, kGiB);
  EXPECT_EQ(c.limit, 5 * kGiB);
  EXPECT_EQ(c.footprint, 4 * kGiB + 1200 * kMiB);
  EXPECT_EQ(c.over, 2);
}

TEST(MemoryGuard, AProcessThatNeverRegisteredBringsNoAllowance) {
  // 1 GiB granted to its registered process; 512 MiB on the device in one that bypassed the shim.
  std::vector<ProcessMemory> p = {{1, kGiB, kGiB}, {2, 0, 512 * kMiB, /*registered=*/false}};
  MemoryCheck c = CheckTenantMemory(kGiB, p, kGiB);
  EXPECT_EQ(c.limit, 2 * kGiB) << "one allowance, for the registered process";
  EXPECT_EQ(c.over, 0) << "within it";
  p[1].held = kGiB + 1;
  EXPECT_EQ(CheckTenantMemory(kGiB, p, kGiB).over, 2);
  EXPECT_EQ(CheckTenantMemory(kGiB, p, 0).over, 2);
}

TEST(MemoryGuard, MemoryAdoptedPastTheQuotaIsNoOnesToKill) {
  // Adopted after an upgrade: granted as the driver counted it, over the quota.
  MemoryCheck c = CheckTenantMemory(kGiB, {{1, 3 * kGiB, 3 * kGiB}}, 0);
  EXPECT_GT(c.footprint, c.limit);
  EXPECT_EQ(c.over, 0);
}

TEST(MemoryGuard, AProcessTheDriverDoesNotListHasNoAllowance) {
  // A registered process that holds nothing yet (or a device whose driver cannot say).
  MemoryCheck c = CheckTenantMemory(kGiB, {{1, 0, 0}, {2, 0, 3 * kGiB, false}}, kGiB);
  EXPECT_EQ(c.limit, kGiB);
  EXPECT_EQ(c.over, 2);
}

}  // namespace
}  // namespace gpumux::agent
