// A high-priority process's side of the launch forecast (launch_forecast.h; part of the shim):
// under `gpumux run` it stamps each of its launches, and its entering and returning from each
// synchronising call, into its tenant's ledger slot as they happen (Ledger::NoteHighPriorityLaunch
// and NoteHighPrioritySync), so that lower-priority processes see its bursts begin and end to the
// microsecond rather than to the governor's millisecond tick, and a burst that ends with a
// synchronising call's return (as a decode step's does) is over kSettleNs after it, not after a
// quiet spell of kBurstGapNs.
//
// Off for other tenants and under gpumuxd (the process maps a read-only view there; gpumuxd stamps
// the tenant's launches from its activity file instead, a tick late). Hot path: one branch while
// off; while on, a clock read and a few relaxed atomics per call. Thread-safe.
#pragma once

#include "base/clock.h"
#include "node/ledger/ledger.h"

namespace gpumux::shim {

class BurstStamps {
 public:
  // Stamps into tenant slot `tenant` of `ledger` (which must outlive it) if that tenant is of high
  // priority; `ledger` null: stays off.
  void Start(node::Ledger* ledger, int tenant) {
    on_ = ledger && ledger->TenantPriority(tenant) == node::Priority::kHigh;
    ledger_ = ledger;
    tenant_ = tenant;
  }
  bool on() const { return on_; }
  void Launched() {
    if (on_) ledger_->NoteHighPriorityLaunch(tenant_, NowNs());
  }
  // Around a synchronising call: `entering` before it, then false once it returned.
  void Synchronising(bool entering) {
    if (on_) ledger_->NoteHighPrioritySync(tenant_, NowNs(), entering);
  }

 private:
  bool on_ = false;
  node::Ledger* ledger_ = nullptr;
  int tenant_ = -1;
};

}  // namespace gpumux::shim
