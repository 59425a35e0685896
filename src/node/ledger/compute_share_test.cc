#include "node/ledger/compute_share.h"

#include <gtest/gtest.h>

#include <unistd.h>
#include <algorithm>
#include <filesystem>
#include <functional>

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

TEST(FairShares, ATenantsDemandBoundsItsShareAndTheRestGoesToTheOthers) {
  // One uses a quarter, one is held (wants all): together they use the whole GPU.
  auto s = FairShares({{kNoCap, 1, true, false, 0.25}, {kNoCap, 1, true, false, 1.0}});
  EXPECT_NEAR(s[0], 0.25, 1e-9);
  EXPECT_NEAR(s[1], 0.75, 1e-9);
  // Best-effort gets what the higher tier's demand leaves, not nothing.
  s = FairShares({{kNoCap, 1, true, false, 0.30}, {kNoCap, 1, true, true, 1.0}});
  EXPECT_NEAR(s[0], 0.30, 1e-9);
  EXPECT_NEAR(s[1], 0.70, 1e-9);
  // Nobody's demand fills the GPU: the rest still goes out, by tier and weight, up to caps.
  s = FairShares(
      {{500, 1, true, false, 0.2}, {kNoCap, 1, true, false, 0.3}, {kNoCap, 1, true, true, 0.1}});
  EXPECT_NEAR(s[0] + s[1] + s[2], 1.0, 1e-9) << "the division idles nothing";
  EXPECT_LE(s[0], 0.5 + 1e-9) << "caps still hold";
  EXPECT_GE(s[2], 0.1 - 1e-9) << "the best-effort tenant keeps its demand";
  // Demand never lifts a cap, and a demand above the fair part does not take more than it.
  s = FairShares({{100, 1, true, false, 1.0}, {kNoCap, 1, true, false, 1.0}});
  EXPECT_NEAR(s[0], 0.10, 1e-9);
  s = FairShares({{kNoCap, 1, true, false, 1.0}, {kNoCap, 1, true, false, 0.9}});
  EXPECT_NEAR(s[0], 0.5, 1e-9);
}

TEST(Demand, IsWhatItUsesWithLittleRoomOrAllWhenItUsesItsShareOrIsHeld) {
  EXPECT_NEAR(DemandOf(0.25, 0.5, false), 0.3325, 1e-9) << "it leaves half its share";
  EXPECT_NEAR(DemandOf(0.25, 0.3325, false), 0.3325, 1e-9) << "stable at that demand";
  EXPECT_EQ(DemandOf(0.25, 0.25, false), 1.0) << "it uses all it is given";
  EXPECT_EQ(DemandOf(0.25, 0.5, true), 1.0) << "it was held";
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

// A GPU shared by busy and bursty tenants, ticked every millisecond for `seconds` as gpumuxd ticks
// them: each millisecond the GPU's time goes to the tenants that have work and are not held, high
// priority first, then the others in equal parts (as round-robin timeslices share it), a part one
// does not need going to the others. Returns each tenant's fraction of the GPU's time.
struct Load {
  int tenant;
  double need;       // fraction of each millisecond it would use while it has work
  int burst_ms = 0;  // 0: always has work; else work for burst_ms of every period_ms
  int period_ms = 0;
};
std::vector<double> ShareOut(Ledger& l, const std::vector<Load>& loads, uint64_t start,
                             double seconds, std::vector<Priority> priorities) {
  constexpr uint64_t kMs = 1'000'000;
  std::vector<uint64_t> ran(loads.size(), 0), last(loads.size(), 0);
  std::vector<bool> hold(loads.size(), false);
  int ticks = int(seconds * 1000);
  for (int i = 1; i <= ticks; ++i) {
    uint64_t now = start + uint64_t(i) * kMs;
    auto has_work = [&](size_t k) {
      return loads[k].burst_ms == 0 || i % loads[k].period_ms < loads[k].burst_ms;
    };
    double left = 1.0;
    for (int pass = 0; pass < 2; ++pass) {  // high priority first
      std::vector<size_t> open;
      for (size_t k = 0; k < loads.size(); ++k)
        if ((priorities[k] == Priority::kHigh) == (pass == 0) && !hold[k] && has_work(k))
          open.push_back(k);
      std::sort(open.begin(), open.end(),
                [&](size_t a, size_t b) { return loads[a].need < loads[b].need; });
      for (size_t j = 0; j < open.size(); ++j) {  // equal parts; what one leaves, the rest share
        double take = std::min(loads[open[j]].need, left / double(open.size() - j));
        ran[open[j]] += uint64_t(take * kMs);
        left -= take;
      }
    }
    for (size_t k = 0; k < loads.size(); ++k) {
      hold[k] = l.TenantComputeTick(loads[k].tenant, now, ran[k] - last[k], has_work(k)).hold;
      last[k] = ran[k];
    }
  }
  std::vector<double> share;
  for (uint64_t r : ran) share.push_back(double(r) / (seconds * 1e9));
  return share;
}

TEST_F(ComputeTickTest, ABusyTenantGetsWhatALightOneLeaves) {
  // Equal weights; one needs a quarter of the GPU (at work every millisecond), the other all it can
  // get. A division by "wanting" held the busy one at half and idled a quarter. The light one's
  // demand is what it uses plus room to grow (DemandOf: a quarter more, and 2%), which its own
  // credit keeps; the busy one's credit kept it too, and that room, 8%, idled (0.667 measured).
  // Now others' credit keeps no room for a tenant well under its round-robin part.
  Ledger l = Ledger::CreateOrOpen(path_, 1ull << 30, "sim");
  int light = l.AddTenant("light", {1ull << 20}), busy = l.AddTenant("busy", {1ull << 20});
  auto s = ShareOut(l, {{light, 0.25}, {busy, 1.0}}, l.Snapshot()[0].added_ns, 10,
                    {Priority::kNormal, Priority::kNormal});
  EXPECT_NEAR(s[0], 0.25, 0.01) << "the light one gets all it needs";
  EXPECT_GT(s[1], 0.73) << "the busy one gets what it leaves";
  EXPECT_GT(s[0] + s[1], 0.98) << "the GPU does not idle the light one's room";
}

TEST_F(ComputeTickTest, WhatALightTenantLeavesBetweenItsBurstsIsNotKeptIdleForIt) {
  // Equal weights; one works 5 ms of every 20 (an inference server between requests), the other
  // all it can get. The light one's demand (what it used lately, and room) held the busy one at
  // its share all along, and the GPU idled while the light one was between bursts (5% here).
  // Now credit grows at the share among those at work now: while the light one is idle, the busy
  // one may use it all.
  Ledger l = Ledger::CreateOrOpen(path_, 1ull << 30, "sim");
  int light = l.AddTenant("light", {1ull << 20}), busy = l.AddTenant("busy", {1ull << 20});
  auto s = ShareOut(l, {{light, 1.0, 5, 20}, {busy, 1.0}}, l.Snapshot()[0].added_ns, 10,
                    {Priority::kNormal, Priority::kNormal});
  EXPECT_GT(s[0], 0.12) << "the light one gets at least round robin's half of its bursts";
  EXPECT_GT(s[0] + s[1], 0.99) << "the GPU does not idle while the busy one has work";
}

TEST_F(ComputeTickTest, ABestEffortTenantKeepsWhatABusyHighPriorityTenantLeaves) {
  // High priority: work for 5 ms of every 20 ms, all of the GPU meanwhile (a quarter in all).
  Ledger l = Ledger::CreateOrOpen(path_, 1ull << 30, "sim");
  int hp = l.AddTenant("hp", {1ull << 20, kNoCap, 1, Priority::kHigh});
  int be = l.AddTenant("be", {1ull << 20, kNoCap, 1, Priority::kLow});
  auto s = ShareOut(l, {{hp, 1.0, 5, 20}, {be, 1.0}}, l.Snapshot()[0].added_ns, 10,
                    {Priority::kHigh, Priority::kLow});
  EXPECT_NEAR(s[0], 0.25, 0.01) << "high priority gets all its bursts";
  // Others yield for kYieldHoldNs after each high-priority launch (10 ms of each 15 ms gap here):
  // a third of what it leaves, where a division by "wanting" left it nothing (0.5% measured).
  EXPECT_GT(s[1], 0.30 * (1 - s[0])) << "best effort is not starved";
}

TEST_F(ComputeTickTest, AHighPriorityTenantWithoutARhythmCannotHoldItsNeighboursOffForGood) {
  // High priority, launching a little all the time (5% of every millisecond: one endless burst, no
  // rhythm). Others used to yield 10 ms after each of its launches, i.e. always, and best effort
  // got nothing. Now they yield at most half the time (or twice its use, were that more).
  Ledger l = Ledger::CreateOrOpen(path_, 1ull << 30, "sim");
  int hp = l.AddTenant("hp", {1ull << 20, kNoCap, 1, Priority::kHigh});
  int be = l.AddTenant("be", {1ull << 20, kNoCap, 1, Priority::kLow});
  auto s = ShareOut(l, {{hp, 0.05}, {be, 1.0}}, l.Snapshot()[0].added_ns, 10,
                    {Priority::kHigh, Priority::kLow});
  EXPECT_NEAR(s[0], 0.05, 0.005) << "high priority gets all it launches";
  EXPECT_GT(s[1], 0.45 * (1 - s[0])) << "best effort keeps about half of what it leaves";
  EXPECT_LT(s[1], 0.60 * (1 - s[0])) << "and yields the other half, as the bound says";
}

// The shares of two normal tenants of limits `a` and `b`, both busy all the time, over 10 s.
std::vector<double> TwoBusyTenants(const std::string& ledger, TenantLimits a, TenantLimits b) {
  Ledger l = Ledger::CreateOrOpen(ledger, 1ull << 30, "sim");
  int first = l.AddTenant("a", a), second = l.AddTenant("b", b);
  return ShareOut(l, {{first, 1.0}, {second, 1.0}}, l.Snapshot()[0].added_ns, 10,
                  {Priority::kNormal, Priority::kNormal});
}

TEST_F(ComputeTickTest, ATenPercentAndANinetyPercentCapHoldWithinOnePoint) {
  auto s = TwoBusyTenants(path_, {1ull << 20, 100}, {1ull << 20, 900});
  EXPECT_NEAR(s[0], 0.10, 0.01);
  EXPECT_NEAR(s[1], 0.90, 0.01);
}

TEST_F(ComputeTickTest, WeightsStillDivideTwoBusyTenants) {
  auto s = TwoBusyTenants(path_, {1ull << 20, kNoCap, 1}, {1ull << 20, kNoCap, 3});
  EXPECT_NEAR(s[0], 0.25, 0.02);
  EXPECT_NEAR(s[1], 0.75, 0.02);
}

TEST_F(ComputeTickTest, AHighPriorityTenantsRhythmForecastsItsNextBurst) {
  Ledger l = Ledger::CreateOrOpen(path_, 1ull << 30, "sim");
  int hp = l.AddTenant("hp", {1ull << 20, kNoCap, 1, Priority::kHigh});
  int be = l.AddTenant("be", {1ull << 20, kNoCap, 1, Priority::kLow});
  constexpr uint64_t kMs = 1'000'000;
  uint64_t t0 = l.Snapshot()[0].added_ns + 100 * kMs;
  EXPECT_EQ(l.HighPriorityForecast(t0).next_start_ns, 0u) << "no rhythm yet";
  // Bursts of 5 ms every 20 ms, ticked each millisecond.
  for (uint64_t ms = 0; ms < 100; ++ms) l.TenantComputeTick(hp, t0 + ms * kMs, 0, ms % 20 < 5);
  uint64_t now = t0 + 99 * kMs;  // the burst at 100 ms is next
  BurstForecast f = l.HighPriorityForecast(now);
  EXPECT_FALSE(f.active) << "quiet since 84 ms";
  EXPECT_EQ(f.period_ns, 20 * kMs);
  EXPECT_EQ(f.next_start_ns, t0 + 100 * kMs);
  EXPECT_TRUE(l.HighPriorityForecast(t0 + 85 * kMs).active) << "1 ms after its last launch";
  // A burst due but not seen yet stays the next one for a while (its start is seen late)...
  EXPECT_EQ(l.HighPriorityForecast(t0 + 101 * kMs).next_start_ns, t0 + 100 * kMs);
  // ...then the following one; and a rhythm not followed for four periods is forgotten.
  EXPECT_EQ(l.HighPriorityForecast(t0 + 104 * kMs).next_start_ns, t0 + 120 * kMs);
  EXPECT_EQ(l.HighPriorityForecast(t0 + 170 * kMs).next_start_ns, 0u);
  // Once the rhythm is known the gate no longer yields 10 ms after each launch: each process's
  // launch forecast keeps clear of the bursts, to the 100 µs rather than to the tick.
  EXPECT_FALSE(l.TenantComputeTick(be, t0 + 85 * kMs, 0, true).hold);
  // Then its bursts run together (it launches every 2 ms, slowed): no burst begins, and once four
  // periods pass without one the rhythm is lost and others yield 10 ms after each launch again.
  for (uint64_t ms = 100; ms <= 200; ms += 2) l.TenantComputeTick(hp, t0 + ms * kMs, 0, true);
  EXPECT_EQ(l.HighPriorityForecast(t0 + 203 * kMs).next_start_ns, 0u);
  EXPECT_TRUE(l.TenantComputeTick(be, t0 + 203 * kMs, 0, true).hold) << "3 ms after its launch";
}

// A high-priority server as the shim stamps it: every `period`, from `first`, a step of `kernels`
// kernels of `kernel` each, each launched and then synchronised on (a decode step's layers), the
// step starting `late` after its time when given. Returns when the last step's last sync returned.
uint64_t StampSteps(Ledger& l, int hp, uint64_t first, uint64_t period, int steps, int kernels,
                    uint64_t kernel, std::function<uint64_t(int)> late = nullptr) {
  uint64_t t = 0;
  for (int k = 0; k < steps; ++k) {
    t = first + uint64_t(k) * period + (late ? late(k) : 0);
    for (int i = 0; i < kernels; ++i) {
      NoteBurstLaunch(*l.BurstOf(hp), t);
      NoteBurstSync(*l.BurstOf(hp), t + 5'000, true);
      t += kernel;
      NoteBurstSync(*l.BurstOf(hp), t, false);
      t += 5'000;  // the host's time between a sync and the next launch
    }
  }
  return t - 5'000;
}

TEST_F(ComputeTickTest, AHighPriorityBurstThatEndsWithASyncIsOverSoonAfterItsReturn) {
  Ledger l = Ledger::CreateOrOpen(path_, 1ull << 30, "sim");
  int hp = l.AddTenant("hp", {1ull << 20, kNoCap, 1, Priority::kHigh});
  constexpr uint64_t kMs = 1'000'000, kUs = 1'000;
  uint64_t t0 = l.Snapshot()[0].added_ns + 100 * kMs;
  // Steps of 10 × 200 µs every 10 ms, on time.
  uint64_t end = StampSteps(l, hp, t0, 10 * kMs, 8, 10, 200 * kUs);
  BurstForecast f = l.HighPriorityForecast(end + 100 * kUs);
  EXPECT_TRUE(f.active) << "100 µs after its last return it may still launch";
  f = l.HighPriorityForecast(end + kSettleNs + 10 * kUs);
  EXPECT_FALSE(f.active) << "over kSettleNs after the return, not kBurstGapNs after the launch";
  EXPECT_EQ(f.period_ns, 10 * kMs);
  EXPECT_EQ(f.next_start_ns, t0 + 80 * kMs);
  EXPECT_LT(f.margin_ns, 300 * kUs) << "its starts came on time: a small margin";
  EXPECT_GE(f.margin_ns, kMinMarginNs);
  // A pause within a step (the host busy for 400 µs) does not end it: a burst lasts at least its
  // shortest length lately (2.1 ms here).
  uint64_t step = t0 + 80 * kMs;
  NoteBurstLaunch(*l.BurstOf(hp), step);
  NoteBurstSync(*l.BurstOf(hp), step + 5 * kUs, true);
  NoteBurstSync(*l.BurstOf(hp), step + 200 * kUs, false);
  EXPECT_TRUE(l.HighPriorityForecast(step + 600 * kUs).active) << "a pause, not the end";
  // A thread waiting in a synchronising call (one graph launch for the whole step) is a burst
  // running, however long the wait...
  NoteBurstLaunch(*l.BurstOf(hp), step + 700 * kUs);
  NoteBurstSync(*l.BurstOf(hp), step + 710 * kUs, true);
  EXPECT_TRUE(l.HighPriorityForecast(step + 6 * kMs).active);
  // ...but a count left by a process killed inside one lapses after a period.
  EXPECT_FALSE(l.HighPriorityForecast(step + 11 * kMs).active);
}

TEST_F(ComputeTickTest, AHostThatPausesWithinItsBurstsIsGivenTwiceItsPauseToLaunchAgain) {
  // Steps of 10 × 200 µs every 10 ms whose host waits 300 µs for a CPU after one return per step
  // (a loaded machine): 200 µs after a return is no proof of the end for it.
  Ledger l = Ledger::CreateOrOpen(path_, 1ull << 30, "sim");
  int hp = l.AddTenant("hp", {1ull << 20, kNoCap, 1, Priority::kHigh});
  constexpr uint64_t kMs = 1'000'000, kUs = 1'000;
  uint64_t t0 = l.Snapshot()[0].added_ns + 100 * kMs, t = 0;
  for (int k = 0; k < 8; ++k) {
    t = t0 + uint64_t(k) * 10 * kMs;
    for (int i = 0; i < 10; ++i) {
      NoteBurstLaunch(*l.BurstOf(hp), t);
      NoteBurstSync(*l.BurstOf(hp), t + 5 * kUs, true);
      NoteBurstSync(*l.BurstOf(hp), t += 200 * kUs, false);
      t += i == 4 ? 300 * kUs : 5 * kUs;
    }
  }
  uint64_t end = t - 5 * kUs;
  EXPECT_TRUE(l.HighPriorityForecast(end + 500 * kUs).active);
  EXPECT_FALSE(l.HighPriorityForecast(end + 650 * kUs).active) << "twice 300 µs, and no more";
}

TEST_F(ComputeTickTest, BurstsThatEndWithoutASyncOrComeLateKeepTheLongerWaits) {
  Ledger l = Ledger::CreateOrOpen(path_, 1ull << 30, "sim");
  int hp = l.AddTenant("hp", {1ull << 20, kNoCap, 1, Priority::kHigh});
  constexpr uint64_t kMs = 1'000'000, kUs = 1'000;
  uint64_t t0 = l.Snapshot()[0].added_ns + 100 * kMs;
  // Launches only (a server that polls rather than synchronises): a burst ends after kBurstGapNs.
  uint64_t last = 0;
  for (int k = 0; k < 8; ++k)
    for (int i = 0; i < 10; ++i) NoteBurstLaunch(*l.BurstOf(hp), last = t0 + k * 10 * kMs + i * 200 * kUs);
  EXPECT_TRUE(l.HighPriorityForecast(last + kBurstGapNs - 10 * kUs).active);
  EXPECT_FALSE(l.HighPriorityForecast(last + kBurstGapNs + 10 * kUs).active);
  // Steps that start up to 1.5 ms late: the margin grows past what they miss the beat by, to at
  // most a quarter period.
  Ledger jittery = Ledger::CreateOrOpen(path_.string() + ".j", 1ull << 30, "sim");
  int j = jittery.AddTenant("hp", {1ull << 20, kNoCap, 1, Priority::kHigh});
  uint64_t end = StampSteps(jittery, j, t0, 10 * kMs, 12, 10, 200 * kUs,
                            [](int k) { return k % 2 ? 1'500'000ull : 0ull; });
  BurstForecast f = jittery.HighPriorityForecast(end + 1 * kMs);
  EXPECT_GE(f.margin_ns, kMinMarginNs + 750 * kUs) << "the beat lies between the two";
  EXPECT_LE(f.margin_ns, std::max(kMaxMarginNs, f.period_ns / 4));
  std::filesystem::remove(path_.string() + ".j");
}

TEST_F(ComputeTickTest, GpumuxdsViewForecastsAsItsAuthorityDoes) {
  // Under gpumuxd tenants read the view: the rhythm learnt in the authority is copied there.
  Ledger authority = Ledger::CreateOrOpen(path_, 1ull << 30, "sim");
  std::filesystem::path view_path = path_.string() + ".view";
  std::filesystem::remove(view_path);
  Ledger view = Ledger::CreateOrOpen(view_path, 1ull << 30, "sim");
  TenantLimits high{1ull << 20, kNoCap, 1, Priority::kHigh};
  int a = authority.AddTenant("hp", high), v = view.AddTenant("hp", high);
  constexpr uint64_t kMs = 1'000'000;
  uint64_t t0 = authority.Snapshot()[0].added_ns;
  for (uint64_t ms = 0; ms < 100; ++ms)
    authority.TenantComputeTick(a, t0 + ms * kMs, 0, ms % 20 < 5);
  EXPECT_EQ(view.HighPriorityForecast(t0 + 99 * kMs).next_start_ns, 0u) << "nothing copied yet";
  view.CopyRhythm(v, authority, a);
  for (uint64_t at : {99, 101, 104}) {
    BurstForecast want = authority.HighPriorityForecast(t0 + at * kMs),
                  got = view.HighPriorityForecast(t0 + at * kMs);
    EXPECT_EQ(got.next_start_ns, want.next_start_ns) << at;
    EXPECT_EQ(got.period_ns, want.period_ns) << at;
    EXPECT_EQ(got.active, want.active) << at;
  }
  EXPECT_NE(view.HighPriorityForecast(t0 + 99 * kMs).next_start_ns, 0u);
  std::filesystem::remove(view_path);
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
