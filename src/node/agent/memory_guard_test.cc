#include "node/agent/memory_guard.h"

#include <gtest/gtest.h>

namespace gpumux::agent {
namespace {

constexpr uint64_t kMiB = 1ull << 20, kGiB = 1ull << 30;
// 1 GiB a process, and no bound for the tenant that these tests reach.
constexpr ContextAllowance kPerProcess = {kGiB, 64 * kGiB};
using Pids = std::vector<pid_t>;

TEST(MemoryGuard, AProcessAtItsQuotaWithItsContextIsWithinTheLimit) {
  // 4 GiB granted and all of it allocated, plus a 600 MiB context the shim never saw.
  MemoryCheck c =
      CheckTenantMemory(4 * kGiB, {{101, 4 * kGiB, 4 * kGiB + 600 * kMiB}}, kPerProcess);
  EXPECT_EQ(c.held, 4 * kGiB + 600 * kMiB);
  EXPECT_EQ(c.outside, 600 * kMiB);
  EXPECT_EQ(c.limit, 5 * kGiB);
  EXPECT_TRUE(c.over.empty());
}

TEST(MemoryGuard, CreditGrantedButNotYetAllocatedCountsAsTheTenants) {
  // The shim holds granted credit it has not spent: the footprint is the grant.
  MemoryCheck c = CheckTenantMemory(2 * kGiB, {{7, 2 * kGiB, 1 * kGiB}}, {});
  EXPECT_EQ(c.footprint, 2 * kGiB);
  EXPECT_EQ(c.outside, 0u);
  EXPECT_TRUE(c.over.empty());
}

TEST(MemoryGuard, TheProcessHoldingMostOutsideItsGrantsIsTheOneOverAndEndingItIsEnough) {
  MemoryCheck c = CheckTenantMemory(4 * kGiB,
                                    {{1, 2 * kGiB, 2 * kGiB + 300 * kMiB},
                                     {2, 1 * kGiB, 9 * kGiB},
                                     {3, 1 * kGiB, 1 * kGiB + 500 * kMiB}},
                                    kPerProcess);
  EXPECT_EQ(c.limit, 7 * kGiB);
  EXPECT_EQ(c.footprint, 2 * kGiB + 300 * kMiB + 9 * kGiB + kGiB + 500 * kMiB);
  EXPECT_EQ(c.over, Pids{2});
}

TEST(MemoryGuard, ABypasserIsTheOneOverEvenBesideALargerContext) {
  // The registered process's 900 MiB context is within its allowance; the 300 MiB of the process
  // that bypassed the shim are what put the tenant over.
  MemoryCheck c = CheckTenantMemory(
      4 * kGiB, {{1, 4 * kGiB, 4 * kGiB + 900 * kMiB}, {2, 0, 300 * kMiB, false}}, kPerProcess);
  EXPECT_EQ(c.limit, 5 * kGiB);
  EXPECT_EQ(c.footprint, 4 * kGiB + 1200 * kMiB);
  EXPECT_EQ(c.over, Pids{2});
}

TEST(MemoryGuard, AProcessThatNeverRegisteredBringsNoAllowance) {
  // 1 GiB granted to its registered process; 512 MiB on the device in one that bypassed the shim.
  std::vector<ProcessMemory> p = {{1, kGiB, kGiB}, {2, 0, 512 * kMiB, /*registered=*/false}};
  MemoryCheck c = CheckTenantMemory(kGiB, p, kPerProcess);
  EXPECT_EQ(c.limit, 2 * kGiB) << "one allowance, for the registered process";
  EXPECT_TRUE(c.over.empty()) << "within it";
  p[1].held = kGiB + 1;
  EXPECT_EQ(CheckTenantMemory(kGiB, p, kPerProcess).over, Pids{2});
  EXPECT_EQ(CheckTenantMemory(kGiB, p, {}).over, Pids{2});
}

TEST(MemoryGuard, MemoryAdoptedPastTheQuotaIsNoOnesToKill) {
  // Adopted after an upgrade: granted as the driver counted it, over the quota.
  MemoryCheck c = CheckTenantMemory(kGiB, {{1, 3 * kGiB, 3 * kGiB}}, {});
  EXPECT_GT(c.footprint, c.limit);
  EXPECT_TRUE(c.over.empty());
}

TEST(MemoryGuard, AProcessTheDriverDoesNotListHasNoAllowance) {
  // A registered process that holds nothing yet (or a device whose driver cannot say).
  MemoryCheck c = CheckTenantMemory(kGiB, {{1, 0, 0}, {2, 0, 3 * kGiB, false}}, kPerProcess);
  EXPECT_EQ(c.limit, kGiB);
  EXPECT_EQ(c.over, Pids{2});
}

// A tenant cannot buy room outside its quota by starting processes: 64 registered processes each
// holding 1 GiB around the shim (within each one's own allowance) put a 1 GiB tenant 59 GiB past
// its quota and 4 GiB of contexts; 59 of them are ended in the one check, and the five left hold
// the quota and the allowance.
TEST(MemoryGuard, StartingProcessesBuysNoRoomPastTheTenantsAllowance) {
  std::vector<ProcessMemory> many;
  for (pid_t pid = 1; pid <= 64; ++pid) many.push_back({pid, 0, kGiB});
  MemoryCheck c = CheckTenantMemory(kGiB, many, {kGiB, 4 * kGiB});
  EXPECT_EQ(c.limit, 5 * kGiB);
  EXPECT_EQ(c.footprint, 64 * kGiB);
  EXPECT_EQ(c.over.size(), 59u);
  // Without the tenant's bound (as before it), each process brought its own allowance.
  EXPECT_TRUE(CheckTenantMemory(kGiB, many, {kGiB, 64 * kGiB}).over.empty());
}

// Contexts past the tenant's allowance are the tenant's memory like any other: inside a quota it
// has not used, they are no one's to end.
TEST(MemoryGuard, ContextsPastTheTenantsAllowanceFitInAQuotaNotYetUsed) {
  std::vector<ProcessMemory> notebooks;
  for (pid_t pid = 1; pid <= 10; ++pid) notebooks.push_back({pid, 200 * kMiB, 900 * kMiB});
  EXPECT_TRUE(CheckTenantMemory(20 * kGiB, notebooks, {kGiB, 4 * kGiB}).over.empty());
  // At its quota (each has 1.9 GiB granted), the contexts past 4 GiB are: the largest go first.
  for (ProcessMemory& p : notebooks) p.granted = 2 * kGiB - 100 * kMiB;
  for (ProcessMemory& p : notebooks) p.held = p.granted + 700 * kMiB;
  notebooks[3].held += 100 * kMiB;
  MemoryCheck c = CheckTenantMemory(19 * kGiB, notebooks, {kGiB, 4 * kGiB});
  ASSERT_FALSE(c.over.empty());
  EXPECT_EQ(c.over[0], 4);
  EXPECT_LE(c.over.size(), 4u);
}

// Memory adopted past the quota after an upgrade puts the tenant over, but no process of it holds
// more than its own context: none is ended, not even one whose context is within its allowance.
TEST(MemoryGuard, AContextWithinItsAllowanceIsNotEndedForMemoryAdoptedPastTheQuota) {
  MemoryCheck c = CheckTenantMemory(kGiB, {{1, 3 * kGiB, 3 * kGiB}, {2, 100 * kMiB, 600 * kMiB}},
                                    {kGiB, 4 * kGiB});
  EXPECT_GT(c.footprint, c.limit);
  EXPECT_TRUE(c.over.empty());
}

// Several programs allocating around the shim at once are all ended in one check, worst first,
// as many as bring the tenant back within its limit.
TEST(MemoryGuard, SeveralBypassersAreEndedInOneCheckWorstFirst) {
  MemoryCheck c = CheckTenantMemory(2 * kGiB,
                                    {{1, kGiB, kGiB + 300 * kMiB},
                                     {2, 0, 3 * kGiB, false},
                                     {3, 0, 5 * kGiB, false},
                                     {4, 0, 100 * kMiB, false}},
                                    kPerProcess);
  EXPECT_EQ(c.over, (Pids{3, 2})) << "ending those two brings it within 3 GiB";
}

}  // namespace
}  // namespace gpumux::agent
