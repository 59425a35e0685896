#include "node/ledger/burst_rhythm.h"

#include <algorithm>
#include <atomic>
#include <cmath>

#include "node/ledger/shared_stamp.h"

namespace gpumux::node {
namespace {

// Relaxed atomic access to a word that other threads and processes share. The const_cast is only
// for loads (std::atomic_ref takes no const object before C++26); nothing is written through it.
template <typename T>
T Load(const T& word) {
  return std::atomic_ref<T>(const_cast<T&>(word)).load(std::memory_order_relaxed);
}
template <typename T>
void Store(T& word, T value) {
  std::atomic_ref<T>(word).store(value, std::memory_order_relaxed);
}

// How far a start on the beat moves the forecast: the beat a quarter of the way to it, the period
// a 32nd of its miss (after a late start the next on time comes early by both).
constexpr uint64_t kBeatGain = 4, kPeriodGain = 32;

// `from` moved an n-th of the way to `to`.
uint64_t Toward(uint64_t from, uint64_t to, uint64_t n) {
  return to >= from ? from + (to - from) / n : from - (from - to) / n;
}
// The most lately: up at once to `seen`, else down an n-th of the way to it.
uint64_t FadingMost(uint64_t most, uint64_t seen, uint64_t n) {
  return seen >= most ? seen : Toward(most, seen, n);
}

}  // namespace

BurstPeriod NextBurstPeriod(BurstPeriod now, uint64_t gap_ns) {
  auto near = [](uint64_t gap, uint64_t period, double whole) {
    double periods = double(gap) / double(period);
    return std::abs(periods - whole) <= (whole == 1 ? 0.25 : 0.15);
  };
  if (now.period_ns == 0) return {gap_ns, 0};
  if (near(gap_ns, now.period_ns, 1))  // on beat: an eighth of the way, as one gap jitters twice
    return {(7 * now.period_ns + gap_ns) / 8, 0};
  // A whole number of periods: bursts that ran together (one delayed into the next) or a burst
  // that did not come. The rhythm holds.
  double whole = std::round(double(gap_ns) / double(now.period_ns));
  if (whole >= 2 && near(gap_ns, now.period_ns, whole)) return {now.period_ns, 0};
  if (now.candidate_ns != 0 && near(gap_ns, now.candidate_ns, 1))
    return {(now.candidate_ns + gap_ns) / 2, 0};  // a new rhythm, seen twice
  return {now.period_ns, gap_ns};
}

void NoteBurstLaunch(BurstWords& w, uint64_t now_ns) {
  uint64_t before = StampForward(std::atomic_ref<uint64_t>(w.stamp_ns), now_ns);
  uint64_t was_return = std::atomic_ref<uint64_t>(w.stamp_was_return).exchange(0);
  if (before >= now_ns) return;
  uint64_t period = Load(w.period_ns);
  // A burst stalled on the GPU waits inside a synchronising call, or (launches only) is not
  // quiet for a quarter of its period, nor for longer than its bursts last. After a return the
  // host's own pause is all there is: kBurstGapNs. Bounded so: a period learnt wrong (a warm-up
  // step long before the first request's, a graph captured at start) or outgrown (a new request
  // rate) would otherwise ask for a quiet spell the new bursts never leave, and no start would
  // ever correct it.
  uint64_t quiet =
      was_return ? kBurstGapNs : std::max(kBurstGapNs, std::min(period / 4, Load(w.length_ns)));
  uint64_t pause = Load(w.host_pause_ns);
  if (now_ns - before <= quiet || Load(w.syncing) > 0) {
    // Within a burst: the longest pause after a return lately (up at once, down at each start).
    if (was_return && now_ns - before > pause) Store(w.host_pause_ns, now_ns - before);
    return;
  }
  Store(w.host_pause_ns, pause - pause / 8);
  uint64_t start = std::atomic_ref<uint64_t>(w.start_ns).exchange(now_ns);
  Store(w.ends_synced, was_return);
  if (start == 0 || start >= now_ns) return;
  if (before > start) {  // the burst before: from its start to its last stamp; the least lately
    uint64_t length = before - start, shortest = Load(w.length_ns);
    Store(w.length_ns,
          shortest == 0 || length < shortest ? length : shortest + (length - shortest) / 8);
  }
  uint64_t gap = now_ns - start;
  BurstPeriod next = NextBurstPeriod({period, Load(w.candidate_ns)}, gap);
  uint64_t beat = Load(w.beat_ns);
  const bool new_rhythm =
      next.period_ns > period + period / 4 || next.period_ns < period - period / 4;
  if (period == 0 || new_rhythm || beat == 0 || beat > now_ns) {
    // No rhythm to miss yet, or a new one: this start is its beat, missed by nothing yet.
    Store(w.beat_ns, now_ns);
    Store<uint64_t>(w.jitter_ns, 0);
    Store<uint64_t>(w.late_ns, 0);
    Store<uint64_t>(w.spread_ns, 0);
    Store<int64_t>(w.chain_lead_ns, 0);
  } else if (uint64_t periods = (now_ns - beat + period / 2) / period; periods >= 1) {
    // The beat due nearest this start, and how far the start missed it; and how far it missed
    // the latest start plus the periods between. A start off the beat by more than a quarter
    // period (a burst split in two) moves neither the beat nor the errors.
    uint64_t due = beat + periods * period;
    uint64_t error = now_ns > due ? now_ns - due : due - now_ns;
    uint64_t chained = start + std::max<uint64_t>(1, (gap + period / 2) / period) * period;
    uint64_t chain_error = now_ns > chained ? now_ns - chained : chained - now_ns;
    if (error <= period / 4) {
      const bool late = now_ns > due;
      Store(w.beat_ns, Toward(due, now_ns, kBeatGain));
      // The period follows the beat's errors too (a phase-locked loop: late starts lengthen it,
      // early ones shorten it), not the gap since the last start, which carries two starts'
      // jitter: a server jittered by a fifth of its period (34 ms ± 6.9) had the period learnt
      // from gaps wander by ±1.5 ms, its forecast miss by 1.5 times the jitter, and 7.7% of its
      // steps come before the margin (now 3.5%; RunClock in burst_rhythm_test.cc). A gap off the
      // period still proposes a new rhythm (next.candidate_ns), and a start off the beat by more
      // than a quarter period still moves the period by its gap (NextBurstPeriod).
      if (!new_rhythm)
        next.period_ns = late ? period + error / kPeriodGain : period - error / kPeriodGain;
      // Which anchor foretells better (an eighth of the way to each start's difference): a
      // server on a clock misses its beat by its own delay only, a loop whose step follows the
      // last misses the latest start plus a period by that and misses the beat by every delay
      // since.
      int64_t lead = Load(w.chain_lead_ns);
      Store(w.chain_lead_ns, lead + (int64_t(error) - int64_t(chain_error) - lead) / 8);
      // How far before the forecast a start may come: an early start's miss, or (from the beat)
      // after a late one what the beat and the period moved by, as the next start on time comes
      // that much early. A late start itself asks others for nothing: they wait for it
      // (ForecastNextBurst) and it finds the GPU clear. The most lately: up at once, down a
      // sixteenth of the way at each start, or over a second at a faster rhythm, so that a few
      // starts on time (or a second of them: host stalls come seconds apart) do not hide how
      // early the others come.
      const bool chain = lead > kChainLeadNs;
      const uint64_t early = chain ? (now_ns < chained ? chain_error : 0)
                                   : (late ? error / kBeatGain + error / kPeriodGain : error);
      const uint64_t fade = std::max<uint64_t>(16, 1'000'000'000 / period);
      Store(w.jitter_ns, FadingMost(Load(w.jitter_ns), early, fade));
      // How far after the forecast a start may come, learnt alike: for as long, a burst due and
      // not begun is still the next one (ForecastNextBurst). Apart from the margin, which a late
      // start must not widen.
      const uint64_t late_by = chain ? (now_ns > chained ? chain_error : 0) : (late ? error : 0);
      Store(w.late_ns, FadingMost(Load(w.late_ns), late_by, fade));
      // And how far starts miss on average: a server whose every start jitters comes near the
      // edge of its jitter often, and the most lately, faded between, fell short of it (3-6% of
      // the steps of a clock jittered by a tenth of its period came earlier than the margin). A
      // rare host stall moves the average little.
      Store(w.spread_ns, Toward(Load(w.spread_ns), chain ? chain_error : error, 32));
    }
  }
  Store(w.candidate_ns, next.candidate_ns);
  Store(w.period_ns, next.period_ns);
}

void NoteBurstLaunchReturned(BurstWords& w, uint64_t now_ns) {
  StampForward(std::atomic_ref<uint64_t>(w.stamp_ns), now_ns);
}

void NoteBurstSync(BurstWords& w, uint64_t now_ns, bool entering) {
  std::atomic_ref<int64_t> syncing(w.syncing);
  if (entering) {
    syncing.fetch_add(1, std::memory_order_relaxed);
  } else if (syncing.fetch_sub(1, std::memory_order_relaxed) <= 0) {
    syncing.store(0, std::memory_order_relaxed);  // a count a killed process left behind
  }
  StampForward(std::atomic_ref<uint64_t>(w.stamp_ns), now_ns);
  Store<uint64_t>(w.stamp_was_return, entering ? 0 : 1);
}

bool HasRhythm(const BurstWords& w, uint64_t now_ns) {
  uint64_t period = Load(w.period_ns);
  return period != 0 && now_ns <= Load(w.start_ns) + 4 * period;
}

bool InBurst(const BurstWords& w, uint64_t now_ns) {
  uint64_t stamp = Load(w.stamp_ns);
  if (!HasRhythm(w, now_ns)) {
    // A thread waiting inside a synchronising call waits for work it sent, for kSyncWithoutRhythmNs
    // at most: a server fallen behind its period (steps run together: no burst begins, the rhythm
    // lapses) waits there for most of each step, and looked idle to best-effort work then.
    if (Load(w.syncing) > 0 && Within(stamp, now_ns, kSyncWithoutRhythmNs)) return true;
    return Within(stamp, now_ns, kBurstGapNs);
  }
  if (Load(w.ends_synced) == 0) return Within(stamp, now_ns, kBurstGapNs);
  // A thread inside a synchronising call waits for the burst's work.
  if (Load(w.syncing) > 0 && Within(stamp, now_ns, Load(w.period_ns))) return true;
  uint64_t settle = std::clamp(2 * Load(w.host_pause_ns), kSettleNs, kBurstGapNs);
  return Within(stamp, now_ns, settle) || now_ns < Load(w.start_ns) + Load(w.length_ns);
}

bool ForecastNextBurst(const BurstWords& w, uint64_t now_ns, NextBurst* next) {
  // Each word loaded once and checked as loaded: another process may rewrite them meanwhile
  // (gpumuxd clears a muted rhythm in the view while every shim forecasts from it; under `gpumux
  // run` the tenants' processes write them), and a period seen twice could be 0 the second time.
  uint64_t start = Load(w.start_ns), period = Load(w.period_ns), beat = Load(w.beat_ns);
  if (period == 0 || now_ns > start + 4 * period) return false;  // HasRhythm, on these loads
  // The beat is that of the latest start, or of the one before when the latest came off it (by
  // more than a quarter period: NoteBurstLaunch leaves the beat then). Once: one late start (its
  // process waited for a CPU) moves no clock, and the next step comes on the beat. Starts off it
  // twice over leave it more than a period and a half behind: the rhythm moved, and the latest
  // start is its anchor. (Re-anchored at once, a step 2.7 ms late on a 10 ms clock had the next
  // forecast 2.7 ms late, and others' work ran into that step.)
  if (beat == 0 || beat > start + period || beat + period + period / 2 < start ||
      Load(w.chain_lead_ns) > kChainLeadNs)
    beat = start;
  // The burst due last on the anchor: if it has not begun yet (the latest start is not near it;
  // steps jitter, and under gpumuxd a start may be seen a tick late) it is still the next one for
  // kLateBurstNs past the most starts came late lately (or early, if more).
  uint64_t due_bursts = (now_ns > beat ? now_ns - beat : 0) / period;
  uint64_t due = beat + due_bursts * period;
  const uint64_t missed = std::min(Load(w.jitter_ns), period / 4);
  const uint64_t late = std::min(Load(w.late_ns), period / 4);
  const bool begun = start + period / 2 >= due;
  // Or kSpreadsClear times how far starts miss on average, if more: a jittered server's.
  const uint64_t spread = kSpreadsClear * std::min(Load(w.spread_ns), period / 4);
  const uint64_t late_window = kLateBurstNs + std::max({missed, late, spread});
  next->start_ns = due_bursts >= 1 && !begun && now_ns - due < late_window ? due : due + period;
  next->period_ns = period;
  // A quarter more than how early they came (the beat and the period are estimates too), or
  // kSpreadsClear times how far they miss on average if more.
  next->margin_ns = std::clamp(kMinMarginNs + std::max(missed + missed / 4, spread), kMinMarginNs,
                               std::max(kMaxMarginNs, period / 4));
  return true;
}

bool SummariseRhythm(const BurstWords& w, uint64_t now_ns, RhythmSummary* out) {
  NextBurst next;
  if (!ForecastNextBurst(w, now_ns, &next)) return false;
  *out = {next.period_ns, Load(w.length_ns), Load(w.jitter_ns), next.margin_ns,
          Load(w.chain_lead_ns) > kChainLeadNs};
  return true;
}

void CopyBurstFrom(BurstWords& to, const BurstWords& from, uint64_t now_ns) {
  constexpr uint64_t kLeastPeriodNs = 100'000, kMostPeriodNs = 60'000'000'000;
  uint64_t period = Load(from.period_ns);
  if (period < kLeastPeriodNs || period > kMostPeriodNs) period = 0;
  uint64_t most = period ? period : kBurstGapNs;  // lengths and errors within a period
  Store(to.stamp_ns, std::min(Load(from.stamp_ns), now_ns));
  Store<int64_t>(to.syncing, std::clamp<int64_t>(Load(from.syncing), 0, 1024));
  Store<uint64_t>(to.stamp_was_return, Load(from.stamp_was_return) != 0);
  Store<uint64_t>(to.ends_synced, Load(from.ends_synced) != 0);
  Store(to.start_ns, std::min(Load(from.start_ns), now_ns));
  Store(to.period_ns, period);
  Store(to.candidate_ns, std::min(Load(from.candidate_ns), kMostPeriodNs));
  Store(to.length_ns, std::min(Load(from.length_ns), most));
  Store(to.jitter_ns, std::min(Load(from.jitter_ns), most));
  Store(to.late_ns, std::min(Load(from.late_ns), most));
  Store(to.spread_ns, std::min(Load(from.spread_ns), most));
  Store(to.host_pause_ns, std::min(Load(from.host_pause_ns), kBurstGapNs));
  Store(to.beat_ns, std::min(Load(from.beat_ns), now_ns));
  const auto lead_bound = int64_t(most);
  Store(to.chain_lead_ns, std::clamp(Load(from.chain_lead_ns), -lead_bound, lead_bound));
}

void CopyBurst(BurstWords& to, const BurstWords& from) {
  Store(to.stamp_ns, Load(from.stamp_ns));
  Store(to.syncing, Load(from.syncing));
  Store(to.stamp_was_return, Load(from.stamp_was_return));
  Store(to.ends_synced, Load(from.ends_synced));
  Store(to.start_ns, Load(from.start_ns));
  Store(to.period_ns, Load(from.period_ns));
  Store(to.candidate_ns, Load(from.candidate_ns));
  Store(to.length_ns, Load(from.length_ns));
  Store(to.jitter_ns, Load(from.jitter_ns));
  Store(to.late_ns, Load(from.late_ns));
  Store(to.spread_ns, Load(from.spread_ns));
  Store(to.host_pause_ns, Load(from.host_pause_ns));
  Store(to.beat_ns, Load(from.beat_ns));
  Store(to.chain_lead_ns, Load(from.chain_lead_ns));
}

void ClearBurst(BurstWords& w) { CopyBurst(w, BurstWords{}); }

}  // namespace gpumux::node
