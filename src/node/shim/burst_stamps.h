// A high-priority process's side of the launch forecast (launch_forecast.h; part of the shim): it
// stamps each of its launches (as each is made and as its call returns), and its entering and
// returning from each synchronising call, into its tenant's burst words as they happen
// (node/ledger/burst_rhythm.h: the ledger slot under `gpumux run`, its activity file under
// gpumuxd, which copies them into the view each tick), so that lower-priority processes see its
// bursts begin and end to the microsecond rather than to the governor's millisecond tick, and a
// burst that ends with a synchronising call's return (as a decode step's does) is over kSettleNs
// after it, not after a quiet spell of kBurstGapNs.
//
// Off for other tenants. Hot path: one branch while off; while on, a clock read and a few relaxed
// atomics per call. Thread-safe.
#pragma once

#include "base/clock.h"
#include "node/ledger/burst_rhythm.h"

namespace gpumux::shim {

class BurstStamps {
 public:
  // Stamps into `words` (which must outlive it) if `high_priority`; `words` null: stays off.
  void Start(node::BurstWords* words, bool high_priority) {
    words_ = high_priority ? words : nullptr;
  }
  bool on() const { return words_ != nullptr; }
  void Launched() {
    if (words_) node::NoteBurstLaunch(*words_, NowNs());
  }
  // When that launch call returned (it may have waited for room in the driver's queue).
  void LaunchReturned() {
    if (words_) node::NoteBurstLaunchReturned(*words_, NowNs());
  }
  // Around a synchronising call: `entering` before it, then false once it returned.
  void Synchronising(bool entering) {
    if (words_) node::NoteBurstSync(*words_, NowNs(), entering);
  }

 private:
  node::BurstWords* words_ = nullptr;
};

}  // namespace gpumux::shim
