#include "node/agent/compute_ticker.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "node/ledger/compute_share.h"

namespace gpumux::agent {

void ComputeTicker::Tick(DeviceSlot& slot, uint64_t now_ns, const ActivityFiles& activity) {
  // GPU time measured on the device, charged to the tenant that registered each process, or, for a
  // process that bypassed the shim, to the tenant it counts as (DeviceSlot::bypassers).
  uint64_t gpu_ns[node::kMaxTenants] = {};
  if (now_ns >= slot.next_meter_read_ns) {
    slot.meter->Read(&uses_);
    slot.next_meter_read_ns = now_ns + slot.meter->period_ns();
    if (!uses_.empty()) slot.authority->ProcessTenants(&pids_);
    for (const DeviceMeter::Use& use : uses_) {
      auto registered = std::find_if(pids_.begin(), pids_.end(),
                                     [&](const auto& p) { return p.first == use.pid; });
      if (registered != pids_.end()) {
        gpu_ns[registered->second] += use.gpu_ns;
      } else if (auto b = slot.bypassers.find(use.pid); b != slot.bypassers.end()) {
        if (std::optional<int> t = slot.authority->FindTenant(b->second)) gpu_ns[*t] += use.gpu_ns;
      } else if (slot.unregistered_users.size() <
                 node::kMaxTenants * node::kMaxProcessesPerTenant) {
        slot.unregistered_users.insert(use.pid);  // the memory check finds whose it is
      }
    }
  }
  uint64_t unmeasured = slot.meter->UnmeasuredNs();
  for (int t = 0; t < node::kMaxTenants; ++t) {
    if (!slot.authority->InUse(t)) continue;
    std::string id = slot.authority->TenantId(t);
    // Whether it wants the GPU: its processes counted a tick with a launch since the last look.
    // A high-priority tenant's processes stamp their bursts there too, to the microsecond; where
    // they stamped nothing, its launches are stamped here, to the tick.
    bool wants = false, stamped = false;
    uint64_t held = 0;
    if (auto a = activity.find(id); a != activity.end() && a->second) {
      DeviceSlot::Seen& seen = slot.seen[id];
      node::ActivityReader::Reading r = a->second->Read(seen.gpu);
      wants = r.active_ticks != seen.active_ticks;
      seen.active_ticks = r.active_ticks;
      held = r.held;
      stamped = r.burst.stamp_ns != 0 && slot.authority->TenantPriority(t) == node::Priority::kHigh;
      if (stamped) slot.authority->SetBurstFrom(t, r.burst, now_ns);
    }
    node::ComputeVerdict v =
        slot.authority->TenantComputeTick(t, now_ns, gpu_ns[t], wants, unmeasured, !stamped);
    bool muted = false;  // its rhythm is not published (below)
    if (slot.authority->TenantPriority(t) == node::Priority::kHigh) {
      // Its rhythm comes from what its processes wrote (stamped, or the activity counted here), so
      // it is believed only as far as the device measured it using: a rhythm of bursts that never
      // end, with no launch behind them, would hold every neighbour off the GPU.
      DeviceSlot::Seen& seen = slot.seen[id];
      bool kept_clear = !seen.muted && node::InBurst(*slot.authority->BurstOf(t), now_ns);
      double keep = seen.ticked_ns ? std::exp(-double(now_ns - std::min(now_ns, seen.ticked_ns)) /
                                              double(node::kUseWindowNs))
                                   : 1.0;
      seen.kept_clear = seen.kept_clear * keep + (kept_clear ? 1 - keep : 0);
      seen.muted = seen.kept_clear >= std::max(node::kMostYield, 2 * slot.authority->TenantUse(t));
      seen.ticked_ns = now_ns;
      muted = seen.muted;
    }
    slot.authority->SetHeld(t, held);
    if (std::optional<int> view = slot.ledger->FindTenant(id)) {
      slot.ledger->SetGate(*view, v.hold);
      slot.ledger->SetHeld(*view, held);
      // For lower tenants' launch forecasts; none while its claims are past its measured use.
      if (muted)
        slot.ledger->ClearRhythm(*view);
      else
        slot.ledger->CopyRhythm(*view, *slot.authority, t);
    }
  }
}

}  // namespace gpumux::agent
