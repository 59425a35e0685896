// A high-priority tenant's bursts of launches, as gpumux learns them so that lower-priority work
// keeps clear of them (docs/compute-sharing.md, "High priority without starving best effort").
//
// The state is a block of plain words: in the tenant's ledger slot (TenantSlot::burst), and under
// gpumuxd also in the tenant's activity file (node/ledger/activity.h), where its processes learn it
// and from where gpumuxd copies it, checked (CopyBurstFrom), into its ledgers. Every access is a
// relaxed atomic one (std::atomic_ref), so the words may live in memory several processes share.
// Thread- and process-safe; lock-free.
#pragma once

#include <cstdint>

namespace gpumux::node {

// Timing of the rhythm.
inline constexpr uint64_t kBurstGapNs = 1'500'000;   // quiet this long, a tenant's burst has ended
inline constexpr uint64_t kSettleNs = 200'000;       // ... or this long (or twice its longest host
                                                     // pause lately) after a synchronising call
                                                     // returned, for a tenant whose bursts end so
inline constexpr uint64_t kLateBurstNs = 3'000'000;  // a burst not begun this long after it was due
                                                     // is not coming
inline constexpr uint64_t kSyncWithoutRhythmNs = 100'000'000;  // without a rhythm, a thread
                                                               // inside a synchronising call
                                                               // is a burst this long
inline constexpr int64_t kChainLeadNs = 100'000;     // the latest start plus a period foretells
                                                     // starts better than the beat by more than
                                                     // this, lately: a loop, not a clock (a clock's
                                                     // starts jitter by tens of microseconds, and
                                                     // either anchor wins by a few)
inline constexpr uint64_t kMinMarginNs = 200'000;    // others' work ends at least this long before
inline constexpr uint64_t kMaxMarginNs = 1'000'000;  // a burst, at most this long or a quarter
                                                     // period if that is longer
inline constexpr uint64_t kSpreadsClear = 3;         // others keep this many times how far a
                                                     // server's starts miss on average clear of its
                                                     // forecast (before it, and after it when due)

struct BurstWords {
  uint64_t stamp_ns;          // its latest launch or synchronising call (entered or returned from)
  int64_t syncing;            // its threads inside a synchronising call now
  uint64_t stamp_was_return;  // 1: that latest stamp was a return
  uint64_t ends_synced;       // 1: its bursts end with a return (as its last one did)
  uint64_t start_ns;          // when its latest burst began
  uint64_t period_ns;         // its time between burst starts (0 until two were seen)
  uint64_t candidate_ns;      // a gap between starts that fitted no rhythm (BurstPeriod)
  uint64_t length_ns;         // its shortest burst lately (first launch to last stamp)
  uint64_t jitter_ns;         // how far before its forecast its starts came lately (the most,
                              // fading)
  uint64_t host_pause_ns;     // its longest pause lately, within a burst, after a return
  uint64_t beat_ns;           // where its latest start should have been: the rhythm's phase,
                              // which a start moves by a quarter of how far it missed
  int64_t chain_lead_ns;      // how much better the latest start plus a period foretold its
                              // starts than the beat did, lately (> 0: it is the anchor)
  uint64_t late_ns;           // how far after its forecast its starts came lately (the most,
                              // fading)
  uint64_t spread_ns;         // how far its starts missed its forecast, either way, on average
                              // lately (a 32nd of the way to each miss)
};

// A period between bursts (0: none known yet), and a gap between burst starts that fitted no
// rhythm, held as a candidate for a new one (0: none).
struct BurstPeriod {
  uint64_t period_ns = 0, candidate_ns = 0;
  bool operator==(const BurstPeriod&) const = default;
};
// The period after `gap_ns` between two burst starts was seen: averaged (an eighth of the way)
// when the gap is about one period, kept when it is a whole number of periods (bursts that ran
// together, or one that did not come); any other gap becomes the candidate, and the new period
// once the next gap agrees with it (within a quarter), so that one burst split in two or come late
// does not lose the rhythm.
BurstPeriod NextBurstPeriod(BurstPeriod now, uint64_t gap_ns);

// A launch at `now_ns`. The first launch after a quiet spell (kBurstGapNs; after a launch, once a
// period is known, the lesser of a quarter of it and the shortest burst lately if that is
// longer), with no thread inside a synchronising call, begins a burst: the period, the beat, the
// shortest burst, how far starts missed the beat and the host's pauses are learnt from it.
void NoteBurstLaunch(BurstWords& w, uint64_t now_ns);
// A launch call that began with NoteBurstLaunch returned at `now_ns`. A launch blocks while the
// driver's queue is full (a whole step sent at once waits there for the GPU, more so beside
// others' work): the time it waited is not a quiet spell, and the next launch does not begin a
// burst.
void NoteBurstLaunchReturned(BurstWords& w, uint64_t now_ns);
// Entering (`entering`) or returning from a synchronising call at `now_ns`.
void NoteBurstSync(BurstWords& w, uint64_t now_ns, bool entering);

// Whether it has a rhythm at `now_ns`: a period learnt, and a burst begun within the last four
// periods (bursts that run together that long have lost it).
bool HasRhythm(const BurstWords& w, uint64_t now_ns);
// Whether it is in a burst at `now_ns`: from a burst's first launch until kSettleNs (or twice its
// longest host pause lately) after a synchronising call returned, no thread still inside one
// (a count left by a killed process lapses after a period) and for at least its shortest burst
// lately, when its bursts end with such a return; else until it is quiet for kBurstGapNs. Without
// a rhythm, also while a thread is inside a synchronising call, for at most kSyncWithoutRhythmNs
// after its stamp (a server fallen behind its period waits there for most of each step).
bool InBurst(const BurstWords& w, uint64_t now_ns);

// When its next burst is due, as of `now_ns`, from whichever anchor foretold its starts better
// lately: the beat, for a server whose steps keep a clock (a step that came late does not move the
// next one's forecast late), or the latest start, for one whose next step follows the last (a
// decode loop, a client that pauses after each answer); one due but not begun stays the next for
// kLateBurstNs plus how late (or, if more, how early) its starts came lately. And how long before
// it others' work should be done: kMinMarginNs plus a quarter more than how early they came. Each
// at least kSpreadsClear times how far they miss on average (a jittered server's); the margin at
// most kMaxMarginNs or a quarter period if that is longer. Only with a rhythm.
struct NextBurst {
  uint64_t start_ns, period_ns, margin_ns;
};
bool ForecastNextBurst(const BurstWords& w, uint64_t now_ns, NextBurst* next);

// A tenant's rhythm as people read it (`gpumux status`, gpumuxd's GET /v1/tenants): its period,
// its shortest burst lately, how early its starts came lately, the margin others keep before
// its next burst, and the anchor its forecast holds to. False (and `out` untouched) while it has no
// rhythm at `now_ns`.
struct RhythmSummary {
  uint64_t period_ns, length_ns, jitter_ns, margin_ns;
  bool from_latest_start;  // forecast from its latest start (else from its beat)
};
bool SummariseRhythm(const BurstWords& w, uint64_t now_ns, RhythmSummary* out);

// Copies `from` (a tenant's own words, which it may have written anything into) over `to` as of
// `now_ns`, made sane: no time after now, no negative or huge count of syncing threads, a period
// of at least 100 µs (or none), lengths and errors within a period.
void CopyBurstFrom(BurstWords& to, const BurstWords& from, uint64_t now_ns);
// Copies `from` (words gpumuxd keeps) over `to` as they are.
void CopyBurst(BurstWords& to, const BurstWords& from);
// Zeroes `w` (a new tenant).
void ClearBurst(BurstWords& w);

}  // namespace gpumux::node
