#include "node/shim/launch_forecast.h"

#include <algorithm>

#include "base/clock.h"
#include "node/shim/launch_route.h"

namespace gpumux::shim {

namespace {

constexpr uint64_t kRecheckNs = 100'000;  // a held launch looks again this often
constexpr size_t kMostTimed = 256;        // launches timed at once; more go untimed
constexpr uint64_t kMostPeriodsHeld = 4;  // then work that fits no gap goes after a burst

}  // namespace

void LaunchForecast::Start(const node::Ledger* ledger, int tenant, EventCalls events) {
  ledger_ = ledger;
  high_priority_ = ledger->TenantPriority(tenant) == node::Priority::kHigh;
  events_ = events;
}

void LaunchForecast::Refresh(uint64_t now_ns) {
  if (!ledger_ || high_priority_ || !events_.record) return;
  node::BurstForecast f = ledger_->HighPriorityForecast(now_ns);
  const bool on = f.active || f.next_start_ns != 0;
  on_.store(on, std::memory_order_relaxed);
  if (on) LaunchesNeedTheGate();  // launches may be held or timed now
}

CUevent LaunchForecast::TakeEvent() {
  if (!spare_.empty()) {
    CUevent e = spare_.back();
    spare_.pop_back();
    return e;
  }
  CUevent e = nullptr;
  return events_.create(&e, 0) == 0 ? e : nullptr;
}

void LaunchForecast::Learn() {
  while (!timed_.empty() && events_.query(timed_.front().end) == 0) {
    Timed t = timed_.front();
    timed_.pop_front();
    float ms = 0;
    if (events_.elapsed(&ms, t.start, t.end) == 0 && ms >= 0) {
      auto ns = uint64_t(double(ms) * 1e6);
      // What it takes now, others' work beside it included (under MPS a second best-effort
      // tenant's kernels stretch this one's; time-sliced, they take turns with it): a quarter of
      // the way to each new time. (The least seen lately forgot that stretch: a kernel that ran
      // alone once was then forecast to end twice too soon, and ran into a burst.)
      uint64_t& d = duration_ns_[t.work];
      d = d == 0 ? ns : ns > d ? d + (ns - d) / 4 : d - (d - ns) / 4;
      longest_ns_ = std::max(longest_ns_, d);
    }
    spare_.push_back(t.start);
    spare_.push_back(t.end);
  }
  if (timed_.empty()) busy_until_ns_ = std::min(busy_until_ns_, NowNs());  // all done
}

void LaunchForecast::Hold(const void* work, CUstream stream) {
  started_ = nullptr;
  int capturing = 0;
  if (events_.is_capturing && events_.is_capturing(stream, &capturing) == 0 && capturing) return;
  node::BurstForecast f;
  std::unique_lock<std::mutex> lock(mu_);
  Learn();
  auto known = duration_ns_.find(work);
  const uint64_t duration = known != duration_ns_.end() ? known->second : longest_ns_;
  const uint64_t held_since = NowNs();
  bool burst_after_wait = false;  // a burst ran after it had waited kMostPeriodsHeld periods
  for (;;) {
    uint64_t now = NowNs();
    f = ledger_->HighPriorityForecast(now);
    uint64_t end = std::max(now, busy_until_ns_) + duration;
    bool clear = !f.active && (f.next_start_ns == 0 || end + f.margin_ns <= f.next_start_ns);
    // Work that cannot fit between two bursts goes as one ends, once it has waited long enough:
    // then it has the whole gap to run in. (Going at the first moment outside a burst sent it
    // mid-gap, into the next burst; and its time, stretched there, was learnt, so that next
    // time it fitted no gap again.) Twice as long: bursts too short to be seen do not hold it.
    const uint64_t waited = f.period_ns != 0 ? (now - held_since) / f.period_ns : 0;
    if (f.active && waited >= kMostPeriodsHeld) burst_after_wait = true;
    bool waited_enough = !f.active && (burst_after_wait || waited >= 2 * kMostPeriodsHeld);
    if (clear || waited_enough) {
      busy_until_ns_ = end;
      break;
    }
    lock.unlock();
    SleepUntilNsPrecisely(now + kRecheckNs);  // the re-check's 100 µs, not 100-150
    lock.lock();
    Learn();
  }
  if (timed_.size() < kMostTimed && (started_ = TakeEvent()) != nullptr &&
      events_.record(started_, stream) != 0) {
    spare_.push_back(started_);
    started_ = nullptr;
  }
}

void LaunchForecast::AfterTimed(const void* work, CUstream stream, bool launched) {
  std::lock_guard<std::mutex> lock(mu_);
  CUevent end = launched ? TakeEvent() : nullptr;
  if (end && events_.record(end, stream) == 0) {
    timed_.push_back({work, started_, end});
  } else {
    spare_.push_back(started_);
    if (end) spare_.push_back(end);
  }
  started_ = nullptr;
}

}  // namespace gpumux::shim
