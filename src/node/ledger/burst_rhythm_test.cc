#include "node/ledger/burst_rhythm.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>

namespace gpumux::node {
namespace {

constexpr uint64_t kMs = 1'000'000;

TEST(BurstPeriod, AveragesOnBeatKeepsWholeMultiplesAndFollowsANewRhythmSeenTwice) {
  using P = BurstPeriod;
  EXPECT_EQ(NextBurstPeriod(P{}, 20 * kMs), (P{20 * kMs, 0}));
  EXPECT_EQ(NextBurstPeriod(P{20 * kMs, 0}, 24 * kMs), (P{20 * kMs + kMs / 2, 0}));
  EXPECT_EQ(NextBurstPeriod(P{20 * kMs, 0}, 40 * kMs), (P{20 * kMs, 0})) << "two ran together";
  EXPECT_EQ(NextBurstPeriod(P{20 * kMs, 0}, 61 * kMs), (P{20 * kMs, 0})) << "two did not come";
  // A burst split in two (a stall within it): neither gap fits, and neither becomes the rhythm.
  P split = NextBurstPeriod(P{20 * kMs, 0}, 6 * kMs);
  EXPECT_EQ(split, (P{20 * kMs, 6 * kMs})) << "a candidate, not yet the period";
  EXPECT_EQ(NextBurstPeriod(split, 14 * kMs), (P{20 * kMs, 14 * kMs}));
  EXPECT_EQ(NextBurstPeriod(split, 20 * kMs), (P{20 * kMs, 0})) << "back on beat";
  // A new rhythm once two gaps agree.
  P once = NextBurstPeriod(P{20 * kMs, 0}, 50 * kMs);
  EXPECT_EQ(once.period_ns, 20 * kMs);
  EXPECT_EQ(NextBurstPeriod(once, 52 * kMs), (P{51 * kMs, 0}));
  EXPECT_EQ(NextBurstPeriod(NextBurstPeriod(P{20 * kMs, 0}, 8 * kMs), 8 * kMs), (P{8 * kMs, 0}));
}

TEST(BurstWords, WhatATenantWroteIsMadeSaneBeforeGpumuxdUsesIt) {
  // A tenant may write anything into its activity file's words.
  BurstWords forged{};
  forged.stamp_ns = ~0ull;  // in the future: a burst that never ends
  forged.syncing = -5;
  forged.start_ns = ~0ull;
  forged.period_ns = 3;  // a rhythm of nanoseconds
  forged.length_ns = ~0ull;
  forged.jitter_ns = ~0ull;
  forged.late_ns = ~0ull;
  forged.host_pause_ns = ~0ull;
  forged.ends_synced = 77;
  BurstWords taken{};
  const uint64_t now = 1'000 * kMs;
  CopyBurstFrom(taken, forged, now);
  EXPECT_EQ(taken.stamp_ns, now) << "no later than now: as if it launched now, and no more";
  EXPECT_EQ(taken.start_ns, now);
  EXPECT_EQ(taken.syncing, 0);
  EXPECT_EQ(taken.period_ns, 0u) << "no rhythm of nanoseconds";
  EXPECT_EQ(taken.ends_synced, 1u);
  EXPECT_LE(taken.length_ns, kBurstGapNs);
  EXPECT_LE(taken.host_pause_ns, kBurstGapNs);
  EXPECT_FALSE(InBurst(taken, now + kBurstGapNs)) << "its claim lapses as a launch would";
  NextBurst next;
  EXPECT_FALSE(ForecastNextBurst(taken, now, &next));
  forged.syncing = 1'000'000;
  forged.period_ns = 20 * kMs;
  CopyBurstFrom(taken, forged, now);
  EXPECT_EQ(taken.syncing, 1024);
  EXPECT_LE(taken.length_ns, 20 * kMs) << "within a period";
  EXPECT_LE(taken.late_ns, 20 * kMs) << "within a period";
  EXPECT_TRUE(ForecastNextBurst(taken, now, &next));
  EXPECT_LE(next.margin_ns, 20 * kMs / 4) << "at most a quarter period";
}

TEST(BurstWords, ARhythmIsSummarisedOnceLearntAndNotBefore) {
  BurstWords w{};
  RhythmSummary r{1, 1, 1, 1, false};
  uint64_t t = 1'000 * kMs;
  auto step = [&](uint64_t start) {  // four synchronised kernels of 1 ms: a 4 ms burst
    for (int k = 0; k < 4; ++k) {
      NoteBurstLaunch(w, start + k * kMs);
      NoteBurstSync(w, start + k * kMs, true);
      NoteBurstSync(w, start + (k + 1) * kMs, false);
    }
  };
  step(t);
  EXPECT_FALSE(SummariseRhythm(w, t + 10 * kMs, &r)) << "one burst is no rhythm";
  EXPECT_EQ(r.period_ns, 1u) << "untouched";
  for (int i = 1; i <= 5; ++i) step(t + i * 20 * kMs);
  ASSERT_TRUE(SummariseRhythm(w, t + 110 * kMs, &r));
  EXPECT_EQ(r.period_ns, 20 * kMs);
  EXPECT_EQ(r.length_ns, 4 * kMs);
  EXPECT_LT(r.jitter_ns, kMs / 5) << "every start on the beat (what the first, before any "
                                     "period, missed by fades)";
  EXPECT_EQ(r.margin_ns, kMinMarginNs + r.jitter_ns);
  EXPECT_FALSE(SummariseRhythm(w, t + 1'000 * kMs, &r)) << "lost after four quiet periods";
}

// A compiled server warms up (or captures its step's graph) at start, then serves steps at its
// own rate from much later: the first gap between starts is the wait for the first request, not a
// period. The steps' own rhythm replaces it within a few steps, and so does a new request rate.
// (A quiet spell of a quarter of the first "period", 365 ms, before a burst could begin, held
// the 1.46 s period for good; its neighbours' work ran into every step: issue 39.)
TEST(BurstWords, ARhythmLearntFromAWarmUpOrAnOldRateGivesWayToTheSteps) {
  BurstWords w{};
  auto step = [&](uint64_t start, uint64_t length) {  // all launched at once, then one sync
    for (int k = 0; k < 25; ++k) NoteBurstLaunch(w, start + uint64_t(k) * 1'000);
    NoteBurstSync(w, start + 25'000, true);
    NoteBurstSync(w, start + length, false);
  };
  const uint64_t t = 1'000 * kMs;
  step(t, 5 * kMs);  // the warm-up
  uint64_t s = t + 1'460 * kMs;
  for (int i = 0; i < 4; ++i, s += 20 * kMs) step(s, 5 * kMs);
  RhythmSummary r{};
  ASSERT_TRUE(SummariseRhythm(w, s, &r));
  EXPECT_EQ(r.period_ns, 20 * kMs) << "after four steps at 20 ms";
  // Requests come twice as often now, steps as long.
  for (int i = 0; i < 4; ++i, s += 8 * kMs) step(s, 5 * kMs);
  ASSERT_TRUE(SummariseRhythm(w, s, &r));
  EXPECT_EQ(r.period_ns, 8 * kMs) << "after four steps at 8 ms";
  NextBurst next;
  ASSERT_TRUE(ForecastNextBurst(w, s - kMs, &next));
  EXPECT_EQ(next.start_ns, s) << "the next step forecast on the new beat";
}

// Steps come on a beat, each moved by how long its request took to arrive. A forecast from the
// latest start would carry a late step's delay into the next one's forecast, and a neighbour's
// work sized to end just before it would run into the next step when that one is on time: the
// forecast keeps the beat, and the margin how early that puts the next step on time.
TEST(BurstWords, ALateStepMovesTheBeatLittleAndTheMarginCoversWhatItMoved) {
  BurstWords w{};
  auto step = [&](uint64_t start) {
    NoteBurstLaunch(w, start);
    NoteBurstSync(w, start + 10'000, true);
    NoteBurstSync(w, start + 5 * kMs, false);
  };
  const uint64_t t = 1'000 * kMs;
  for (int i = 0; i < 10; ++i) step(t + uint64_t(i) * 20 * kMs);
  step(t + 200 * kMs + 2 * kMs);  // two milliseconds late
  NextBurst next;
  ASSERT_TRUE(ForecastNextBurst(w, t + 210 * kMs, &next));
  EXPECT_EQ(next.period_ns, 20 * kMs + 2 * kMs / 32) << "a 32nd of the miss";
  // The beat moved by a quarter of the miss (0.5 ms), plus one period: 220.5625 ms, where the late
  // start would have put it at 222.06 ms.
  EXPECT_EQ(next.start_ns, t + 220 * kMs + kMs / 2 + 2 * kMs / 32)
      << "near the beat, not a period after the late start";
  // The late step itself found the GPU clear (others wait for a step due and not begun); the
  // next, on time at 220 ms, comes before the forecast, and others' work has ended by then.
  EXPECT_LE(next.start_ns - next.margin_ns, t + 220 * kMs) << "covers what the beat moved";
  EXPECT_LT(next.margin_ns, kMinMarginNs + 2 * kMs) << "not the whole of a late miss";
  const uint64_t after_the_miss = next.margin_ns - kMinMarginNs;
  // On time again: the margin fades over about a second (a few starts on time say little of the
  // next one), the beat holds.
  for (int i = 11; i < 30; ++i) step(t + uint64_t(i) * 20 * kMs);
  ASSERT_TRUE(ForecastNextBurst(w, t + 590 * kMs, &next));
  EXPECT_GT(next.margin_ns - kMinMarginNs, after_the_miss / 2) << "0.4 s on time";
  for (int i = 30; i < 70; ++i) step(t + uint64_t(i) * 20 * kMs);
  ASSERT_TRUE(ForecastNextBurst(w, t + 1'390 * kMs, &next));
  EXPECT_LT(next.margin_ns - kMinMarginNs, after_the_miss / 2) << "1.2 s on time";
  EXPECT_NEAR(double(next.start_ns), double(t + 1'400 * kMs), 200'000);
}

// A server on a clock of `period_ms` whose starts jitter by up to `jitter_ms` either way (uniform)
// and, one start in `1 / stall_share`, come 2-10 ms late too (its process waited for a CPU), 10
// seeds of 400 steps. Probed just before each step from the 25th on, as a best-effort launch
// would: how many steps came before the margin or after a due step was given up, and the mean
// margin.
struct ClockRun {
  double early_share = 0, late_share = 0, mean_margin_ms = 0;
};
ClockRun RunClock(uint64_t period_ms, double jitter_ms, double stall_share) {
  uint64_t steps = 0, early = 0, late = 0;
  double margins = 0;
  for (uint32_t seed = 1; seed <= 10; ++seed) {
    BurstWords w{};
    std::mt19937 rng(seed);
    auto uniform = [&] { return double(rng()) / double(std::mt19937::max()); };  // 0..1
    for (uint64_t k = 0; k < 400; ++k) {
      double offset_ms = (2 * uniform() - 1) * jitter_ms;
      if (uniform() < stall_share) offset_ms += 2 + 8 * uniform();
      const uint64_t start = uint64_t(double((1'000 + k * period_ms) * kMs) + offset_ms * 1e6);
      NextBurst next;
      if (k >= 25 && ForecastNextBurst(w, start - 50'000, &next)) {
        ++steps;
        margins += double(next.margin_ns);
        if (next.start_ns > start + period_ms * kMs / 2)
          ++late;  // given up: the forecast is the step after
        else if (start + next.margin_ns < next.start_ns)
          ++early;
      }
      NoteBurstLaunch(w, start);
      NoteBurstSync(w, start + 30'000, true);
      NoteBurstSync(w, start + period_ms * kMs / 4, false);
    }
  }
  EXPECT_GT(steps, 3'700u) << "a rhythm from the 25th step on";
  return {double(early) / double(steps), double(late) / double(steps),
          margins / double(steps) / 1e6};
}

// Servers whose every start jitters by a tenth of the period either way: others' work keeps clear
// of nearly every step, and the margin is within twice the jitter on average. (With the margin
// from the most lately alone, 4.6% of the 43 ms clock's steps fell outside, 8.6% of the 100 ms
// one's.)
TEST(BurstWords, AJitteredClocksStepsComeWithinItsMarginAndItsLateWindow) {
  for (uint64_t period_ms : {16, 43, 100}) {
    const double jitter_ms = double(period_ms) / 10;
    ClockRun run = RunClock(period_ms, jitter_ms, 0);
    EXPECT_LT(run.early_share + run.late_share, 0.01) << period_ms << " ms";
    EXPECT_LT(run.mean_margin_ms, 0.2 + 2 * jitter_ms) << period_ms << " ms";
  }
}

// A server jittered by a fifth of its period (a request rate halved under the same jitter): the
// period follows the beat's errors, not the gaps between starts (each of which carries two
// starts' jitter), so the forecast misses by about the jitter and not half as much again. (Learnt
// from gaps, the period wandered by ±1.5 ms at 34 ms ± 6.9, and 7.7% of the steps came before
// the margin, which a quarter period caps; 3.5% now.)
TEST(BurstWords, AClockJitteredByAFifthOfItsPeriodIsForecastFromItsBeat) {
  for (uint64_t period_ms : {20, 34}) {
    ClockRun run = RunClock(period_ms, double(period_ms) / 5, 0);
    EXPECT_LT(run.early_share, 0.05) << period_ms << " ms";
    EXPECT_LT(run.late_share, 0.01) << period_ms << " ms";
  }
}

// A server on a clock whose starts are on time (50 µs) but for host stalls, one start in 50 late
// by 2-10 ms: the start after a stall, on time, comes before the forecast (the beat and the
// period both moved) and within the margin; and the margin falls back near its least between
// stalls, not kept wide for seconds. (Before, 1.4% of the steps came before the margin, each the
// one after a stall; with the most lately fading over 64 starts, the margin was 2.45 ms on
// average.) The stalled steps themselves come late past anything recent: others cannot wait for
// them all.
TEST(BurstWords, AfterAHostStallTheNextStepOnTimeComesWithinTheMargin) {
  for (uint64_t period_ms : {20, 57}) {
    ClockRun run = RunClock(period_ms, 0.05, 0.02);
    EXPECT_LT(run.early_share, 0.004) << period_ms << " ms";
    EXPECT_LT(run.mean_margin_ms, 1.5) << period_ms << " ms";
  }
}

// A server on a 40 ms clock whose every fourth step comes 8 ms late (its request came late): a
// step due and not begun stays the next one for as long as its steps came late lately, so others
// do not send work just before it; the margin before a step is not widened by those late misses.
TEST(BurstWords, AStepDueStaysNextForAsLongAsStepsCameLateLately) {
  BurstWords w{};
  const uint64_t t = 1'000 * kMs;
  auto step = [&](uint64_t start) {
    NoteBurstLaunch(w, start);
    NoteBurstSync(w, start + 10'000, true);
    NoteBurstSync(w, start + 5 * kMs, false);
  };
  for (int i = 0; i < 40; ++i) step(t + uint64_t(i) * 40 * kMs + (i % 4 == 3 ? 8 * kMs : 0));
  // The next step is due at 1,600 ms on the clock (forecast at about 1,603: the late gaps lengthen
  // the period learnt); at 1,612 it has not begun. Without how late steps came, only what they
  // missed early (3.3 ms here) plus 3 ms: it would have been given up at about 1,610.
  NextBurst next;
  ASSERT_TRUE(ForecastNextBurst(w, t + 1'612 * kMs, &next));
  EXPECT_LT(next.start_ns, t + 1'610 * kMs) << "still the next one: steps came 8 ms late";
  EXPECT_LT(next.margin_ns, kMinMarginNs + 8 * kMs) << "not widened by a late miss";
  // Long past how late steps came, it is not coming.
  ASSERT_TRUE(ForecastNextBurst(w, t + 1'618 * kMs, &next));
  EXPECT_GT(next.start_ns, t + 1'630 * kMs);
}

// Two servers whose steps are delayed alike (0 to 2 ms by the host): one keeps a clock (each step
// planned 20 ms after the last was planned), the other pauses 20 ms after each step began (a
// decode loop, a client that waits after each answer). The clock's steps are foretold by its
// beat; the loop's by its latest start, as the delays add up from one step to the next and the
// beat falls behind them.
TEST(BurstWords, AServerOnAClockIsForecastFromItsBeatAndALoopFromItsLatestStart) {
  const uint64_t t = 1'000 * kMs;
  auto learn = [&](bool loop, uint64_t* latest) {
    std::mt19937 random(39);  // the same delays for both
    auto delay = [&](int) { return uint64_t(random() % 11) * 200'000; };  // 0 .. 2 ms
    BurstWords w{};
    uint64_t planned = t, start = t;
    for (int i = 0; i < 60; ++i) {
      start = (loop ? start : planned) + (i == 0 ? 0 : delay(i));
      NoteBurstLaunch(w, start);
      NoteBurstSync(w, start + 10'000, true);
      NoteBurstSync(w, start + 5 * kMs, false);
      planned += 20 * kMs;
      if (loop) start += 20 * kMs;
    }
    *latest = loop ? start - 20 * kMs : start;
    return w;
  };
  uint64_t latest;
  BurstWords clock = learn(false, &latest);
  RhythmSummary r{};
  ASSERT_TRUE(SummariseRhythm(clock, latest + 6 * kMs, &r));
  EXPECT_FALSE(r.from_latest_start) << "the clock's steps keep its beat";
  NextBurst next;
  ASSERT_TRUE(ForecastNextBurst(clock, latest + 6 * kMs, &next));
  EXPECT_NEAR(double(next.start_ns), double(t + 60 * 20 * kMs + kMs), 1.2 * kMs)
      << "on the clock, a typical delay after it";

  BurstWords loop = learn(true, &latest);
  ASSERT_TRUE(SummariseRhythm(loop, latest + 6 * kMs, &r));
  EXPECT_TRUE(r.from_latest_start) << "the loop's steps follow the last";
  ASSERT_TRUE(ForecastNextBurst(loop, latest + 6 * kMs, &next));
  EXPECT_EQ(next.start_ns, latest + next.period_ns);
  EXPECT_NEAR(double(next.period_ns), 21.0 * kMs, 0.5 * kMs) << "20 ms and the mean delay";
  EXPECT_LE(next.margin_ns, kMinMarginNs + 2.5 * kMs) << "how early its steps came, no more";
}

// A server on a 10 ms clock whose steps start within 60 us of it (the host's jitter), until one
// starts 2.7 ms late (its process waited for a CPU). The step after it is on the clock again:
// others' work must be done by then. (Forecast from the late start, as a loop's would be, the next
// step was expected 2.7 ms late and best-effort work ran into it: a slow step, then another.)
TEST(BurstWords, OneLateStartOfAServerOnAClockDoesNotMoveItsNextStep) {
  const uint64_t t = 1'000 * kMs;
  std::mt19937 random(7);
  BurstWords w{};
  auto step = [&](uint64_t start) {
    NoteBurstLaunch(w, start);
    NoteBurstSync(w, start + 10'000, true);
    NoteBurstSync(w, start + 3 * kMs, false);
  };
  for (int seed = 0; seed < 20; ++seed) {
    SCOPED_TRACE(seed);
    random.seed(seed);
    w = BurstWords{};
    int i = 0;
    for (; i < 300; ++i) step(t + uint64_t(i) * 10 * kMs + random() % 60'000);
    RhythmSummary r{};
    ASSERT_TRUE(SummariseRhythm(w, t + uint64_t(i) * 10 * kMs - 4 * kMs, &r));
    EXPECT_FALSE(r.from_latest_start) << "on a clock";
    const uint64_t late = t + uint64_t(i) * 10 * kMs + 2'700'000;
    step(late);
    NextBurst next;
    ASSERT_TRUE(ForecastNextBurst(w, late + 4 * kMs, &next));
    const uint64_t on_the_clock = t + uint64_t(i + 1) * 10 * kMs;
    EXPECT_LE(next.start_ns - next.margin_ns, on_the_clock)
        << "forecast " << (double(next.start_ns) - double(on_the_clock)) / 1e6
        << " ms from the clock, margin " << double(next.margin_ns) / 1e6 << " ms";
  }
}

// A step of 38 launches sent at once, beside others' work: the driver's queue is full, so each
// launch waits in its call for room (2 ms here), and the last returns 19 ms after the first. Those
// waits are not quiet spells: stamped at each call's return, the step is one burst, every 65 ms.
// (Stamped only as each call began, every launch read as a burst of its own, a rhythm of 2 ms.)
// A server fallen behind its period sends step after step with no quiet spell between: no burst
// begins, and it has no rhythm. Each step's launches, then its wait inside the synchronising call
// for most of the step: a burst running, for at most kSyncWithoutRhythmNs after the stamp.
TEST(BurstWords, WithoutARhythmAThreadInsideASynchronisingCallIsABurstForAWhile) {
  BurstWords w{};
  const uint64_t t = 1'000 * kMs;
  NoteBurstLaunch(w, t);
  NoteBurstLaunchReturned(w, t + kMs / 10);
  NoteBurstSync(w, t + kMs / 5, true);
  ASSERT_FALSE(HasRhythm(w, t + 30 * kMs));
  EXPECT_TRUE(InBurst(w, t + 30 * kMs)) << "waiting for its step's work, 30 ms after the launch";
  EXPECT_FALSE(InBurst(w, t + kSyncWithoutRhythmNs + kMs)) << "a count left behind lapses";
  NoteBurstSync(w, t + 40 * kMs, false);
  EXPECT_FALSE(InBurst(w, t + 40 * kMs + kBurstGapNs + kMs)) << "returned, and quiet since";
}

TEST(BurstWords, LaunchesThatWaitInTheDriversQueueAreOneBurst) {
  BurstWords w{};
  const uint64_t t = 1'000 * kMs;
  for (int step = 0; step < 5; ++step) {
    uint64_t s = t + uint64_t(step) * 65 * kMs;
    for (int k = 0; k < 10; ++k) {  // the launches that waited
      NoteBurstLaunch(w, s + uint64_t(k) * 2 * kMs);
      NoteBurstLaunchReturned(w, s + uint64_t(k + 1) * 2 * kMs - 1'000);
    }
    NoteBurstSync(w, s + 20 * kMs, true);
    NoteBurstSync(w, s + 25 * kMs, false);
  }
  RhythmSummary r{};
  ASSERT_TRUE(SummariseRhythm(w, t + 4 * 65 * kMs + 30 * kMs, &r));
  EXPECT_EQ(r.period_ns, 65 * kMs);
  EXPECT_GE(r.length_ns, 20 * kMs) << "the whole step, launches and synchronise";
}

// The words are shared: another process rewrites them while a shim forecasts from them (gpumuxd
// clears a muted tenant's rhythm in the view every shim maps). A forecast reads each word once, so
// a period cleared between two reads of it is never divided by (found by UBSan in the squatter
// test: a neighbour's process dying of SIGFPE).
TEST(BurstWords, AForecastOfWordsRewrittenMeanwhileNeverDividesByZero) {
  BurstWords w{};
  const uint64_t now = 1'000 * kMs;
  std::atomic<bool> stop{false}, started{false};
  std::thread writer([&] {
    started = true;
    while (!stop.load(std::memory_order_relaxed)) {
      __atomic_store_n(&w.start_ns, now - 5 * kMs, __ATOMIC_RELAXED);
      __atomic_store_n(&w.period_ns, 10 * kMs, __ATOMIC_RELAXED);
      __atomic_store_n(&w.period_ns, uint64_t(0), __ATOMIC_RELAXED);
    }
  });
  while (!started.load()) std::this_thread::yield();
  int forecasts = 0, tries = 0;
  // A third of a second of forecasts against the writer (a crash fails the test).
  for (auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
       std::chrono::steady_clock::now() < end;) {
    ++tries;
    NextBurst next;
    if (ForecastNextBurst(w, now, &next)) {
      ++forecasts;
      EXPECT_GT(next.period_ns, 0u);
    }
  }
  stop = true;
  writer.join();
  std::printf("%d of %d forecasts saw a rhythm\n", forecasts, tries);
}

}  // namespace
}  // namespace gpumux::node
