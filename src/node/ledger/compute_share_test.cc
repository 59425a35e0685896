#include "node/ledger/compute_share.h"

#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>

#include "base/error_test_support.h"
#include "node/ledger/ledger.h"

namespace gpumux::node {
namespace {

TEST(FairShares, CapsHoldAndTheRestGoesToOthersByWeight) {
  // 30% and 70% caps, both busy: exactly their caps.
  auto s = FairShares({{300, 1, true}, {700, 1, true}});
  EXPECT_NEAR(s[0], 0.30, 1e-9);
  EXPECT_NEAR(s[1], 0.70, 1e-9);
  // Weights 1:3, no caps: 25/75.
  s = FairShares({{kNoCap, 1, true}, {kNoCap, 3, true}});
  EXPECT_NEAR(s[0], 0.25, 1e-9);
  EXPECT_NEAR(s[1], 0.75, 1e-9);
  // A capped tenant's unused part is shared by the others' weights: 10% cap, then 1:2 of 90%.
  s = FairShares({{100, 5, true}, {kNoCap, 1, true}, {kNoCap, 2, true}});
  EXPECT_NEAR(s[0], 0.10, 1e-9);
  EXPECT_NEAR(s[1], 0.30, 1e-9);
  EXPECT_NEAR(s[2], 0.60, 1e-9);
  // Idle tenants get nothing and take nothing: a lone capped tenant gets its cap, a lone uncapped
  // one all.
  s = FairShares({{400, 1, true}, {kNoCap, 1, false}});
  EXPECT_NEAR(s[0], 0.40, 1e-9);
  EXPECT_EQ(s[1], 0.0);
  EXPECT_NEAR(FairShares({{kNoCap, 7, true}})[0], 1.0, 1e-9);
  // Best-effort tenants share what the others leave: nothing next to an uncapped busy tenant, the
  // rest next to a capped one.
  s = FairShares({{kNoCap, 1, true}, {kNoCap, 1, true, true}});
  EXPECT_NEAR(s[0], 1.0, 1e-9);
  EXPECT_EQ(s[1], 0.0);
  s = FairShares({{300, 1, true}, {kNoCap, 1, true, true}, {kNoCap, 3, true, true}});
  EXPECT_NEAR(s[0], 0.300, 1e-9);
  EXPECT_NEAR(s[1], 0.175, 1e-9);
  EXPECT_NEAR(s[2], 0.525, 1e-9);
  // Caps summing below 100% leave the GPU partly idle, on purpose: a cap is a ceiling.
  s = FairShares({{200, 1, true}, {300, 1, true}});
  EXPECT_NEAR(s[0] + s[1], 0.5, 1e-9);
}

TEST(AccrueCredit, GrowsAtTheShareAndBanksAtMostTheBurst) {
  EXPECT_EQ(AccrueCredit(0, 0, 0.3, 1'000'000, 10'000'000), 300'000);
  EXPECT_EQ(AccrueCredit(0, 0, 1.0, 1'000'000'000, 10'000'000), 10'000'000)
      << "idle time banks at most the burst";
  EXPECT_EQ(AccrueCredit(-5'000'000, 20'000'000, 0.5, 2'000'000, 10'000'000), -4'000'000)
      << "debt is repaid";
}

class ComputeTickTest : public ::testing::Test {
 protected:
  ComputeTickTest()
      : path_(std::filesystem::temp_directory_path() /
              ("gpumux_tick_" + std::to_string(getpid()))) {
    std::filesystem::remove(path_);
  }
  ~ComputeTickTest() override { std::filesystem::remove(path_); }
  std::filesystem::path path_;
};

TEST_F(ComputeTickTest, HoldsATenantOverItsCapUntilItsCreditCatchesUp) {
  Ledger l = Ledger::CreateOrOpen(path_, 1ull << 30, "sim");
  int t = l.AddTenant("capped", {1ull << 20, 300});
  int p = l.RegisterProcess(t);
  uint64_t start = l.Snapshot()[0].added_ns;
  // 1 ms later it has used 1 ms of GPU time: 0.3 ms of credit, so it must hold.
  ComputeVerdict v = l.ComputeTick(p, start + 1'000'000, 1'000'000, true);
  EXPECT_NEAR(v.share, 0.3, 1e-9);
  EXPECT_TRUE(v.hold);
  // By 1 ms / 0.3 = 3.33 ms its credit covers the 1 ms it used.
  EXPECT_TRUE(l.ComputeTick(p, start + 3'000'000, 0, true).hold);
  EXPECT_FALSE(l.ComputeTick(p, start + 3'400'000, 0, true).hold);
  EXPECT_EQ(l.Snapshot()[0].gpu_ns, 1'000'000u);
}

// A tenant that keeps the GPU busy whenever it is not held, on a GPU that reports its time as a
// real one's NVML does: the busy time of each 166 ms sampling period in one lump, 20 ms after the
// period ends. Ticks every millisecond for `seconds`; returns the fraction of the time it ran.
double BusyShareWithLateReports(Ledger& l, int process, uint64_t start, double seconds,
                                bool tell_lag) {
  constexpr uint64_t kMs = 1'000'000, kPeriod = 166 * kMs, kDelay = 20 * kMs;
  uint64_t ran = 0, in_period = 0, pending = 0, period_end = start + kPeriod, due = 0;
  uint64_t reported_until = start;
  bool hold = false;
  int ticks = int(seconds * 1000);
  for (int i = 1; i <= ticks; ++i) {
    uint64_t now = start + uint64_t(i) * kMs;
    if (!hold) {
      ran += kMs;
      in_period += kMs;
    }
    if (now >= period_end) {  // the period closes; NVML will report it kDelay later
      pending = in_period;
      in_period = 0;
      due = now + kDelay;
      period_end += kPeriod;
    }
    uint64_t report = 0;
    if (due && now >= due) {
      report = pending;
      reported_until = due - kDelay;
      due = 0;
    }
    hold = l.ComputeTick(process, now, report, true, tell_lag ? now - reported_until : 0).hold;
  }
  return double(ran) / double(ticks * kMs);
}

TEST_F(ComputeTickTest, ABusyTenantAloneIsNotHeldWhenItsGpuTimeArrivesLate) {
  Ledger l = Ledger::CreateOrOpen(path_, 1ull << 30, "real");
  int p = l.RegisterProcess(l.AddTenant("alone", {1ull << 20}));
  uint64_t start = l.Snapshot()[0].added_ns;
  EXPECT_GT(BusyShareWithLateReports(l, p, start, 5, true), 0.99);
}

TEST_F(ComputeTickTest, WithoutTheLagALateLumpOfGpuTimeHoldsATenantAlone) {
  // What the lag allowance prevents: each lump reads as time used beyond the credit's burst.
  Ledger l = Ledger::CreateOrOpen(path_, 1ull << 30, "real");
  int p = l.RegisterProcess(l.AddTenant("alone", {1ull << 20}));
  uint64_t start = l.Snapshot()[0].added_ns;
  EXPECT_LT(BusyShareWithLateReports(l, p, start, 5, false), 0.8);
}

TEST_F(ComputeTickTest, ACappedTenantWhoseGpuTimeArrivesLateStillGetsItsCap) {
  Ledger l = Ledger::CreateOrOpen(path_, 1ull << 30, "real");
  int p = l.RegisterProcess(l.AddTenant("capped", {1ull << 20, 300}));
  uint64_t start = l.Snapshot()[0].added_ns;
  EXPECT_NEAR(BusyShareWithLateReports(l, p, start, 20, true), 0.30, 0.03);
}

TEST_F(ComputeTickTest, OthersYieldWhileAHighPriorityTenantLaunches) {
  Ledger l = Ledger::CreateOrOpen(path_, 1ull << 30, "sim");
  int hp = l.RegisterProcess(l.AddTenant("hp", {1ull << 20, kNoCap, 1, Priority::kHigh}));
  int be = l.RegisterProcess(l.AddTenant("be", {1ull << 20, kNoCap, 1, Priority::kLow}));
  uint64_t now = l.Snapshot()[0].added_ns + 1'000'000;
  EXPECT_FALSE(l.ComputeTick(be, now, 0, true).hold) << "nobody of higher priority is at work";
  EXPECT_FALSE(l.ComputeTick(hp, now, 0, true).hold) << "high priority never waits";
  EXPECT_TRUE(l.ComputeTick(be, now + 1'000'000, 0, true).hold);
  EXPECT_FALSE(l.ComputeTick(be, now + kYieldHoldNs + 1'000'000, 0, true).hold)
      << "resumes once the high tenant is quiet";
}

TEST_F(ComputeTickTest, StrictRefusesCapsOverOneHundredPercent) {
  Ledger l = Ledger::CreateOrOpen(path_, 1ull << 30, "sim");
  l.AddTenant("a", {1, 600}, true);
  EXPECT_EQ(ErrorCodeOf([&] { l.AddTenant("b", {1, 500}, true); }), ErrorCode::kDoesNotFit);
  EXPECT_NO_THROW(l.AddTenant("b", {1, 400}, true));
  EXPECT_NO_THROW(l.AddTenant("c", {1}, true)) << "an uncapped tenant adds no cap";
  EXPECT_EQ(ErrorCodeOf([&] {
              l.AddTenant("d", {1, 0});
            }),
            ErrorCode::kBadInput)
      << "a 0% cap is malformed, not a lack of room";
}

TEST_F(ComputeTickTest, LimitsThatContradictThemselvesAreRefusedAsSuch) {
  Ledger l = Ledger::CreateOrOpen(path_, 1ull << 30, "sim");
  EXPECT_THROW(l.AddTenant("hp", {1, 300, 1, Priority::kHigh}), Error)
      << "high priority never waits: no cap";
  EXPECT_THROW(l.AddTenant("w", {1, kNoCap, 0}), Error);
  EXPECT_THROW(l.AddTenant(std::string(64, 'x'), {1}), Error);
  EXPECT_FALSE(l.FindTenant("hp")) << "nothing was added";
  EXPECT_NO_THROW(l.AddTenant("hp", {1, kNoCap, 1, Priority::kHigh}));
}

}  // namespace
}  // namespace gpumux::node
