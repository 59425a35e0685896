// gpumuxd's compute tick of one device: charges the GPU time the device measured to the tenant of
// each process (or, for a process that bypassed the shim, to the tenant the memory check found it
// to be), reads each tenant's launch activity from its own activity file, ticks every tenant's
// share in the authority ledger (node/ledger/compute_share.h) and writes each tenant's gate, held
// launches and (high priority) rhythm into the view its processes map. Nothing a tenant can write
// is read as truth about another tenant; a high-priority tenant's rhythm is published only while
// the device measures it using what it claims.
//
// Hot path: once a millisecond per device, with the Agent's lock held; no allocation once its
// scratch has grown. Not thread-safe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "node/agent/device_slot.h"
#include "node/ledger/activity.h"

namespace gpumux::agent {

// Each admitted tenant's activity file, by tenant id (gpumuxd reads; its processes write).
using ActivityFiles = std::map<std::string, std::unique_ptr<node::ActivityReader>>;

class ComputeTicker {
 public:
  // Ticks the compute shares of `slot`'s tenants at `now_ns` (NowNs()).
  void Tick(DeviceSlot& slot, uint64_t now_ns, const ActivityFiles& activity);

 private:
  std::vector<DeviceMeter::Use> uses_;       // scratch
  std::vector<std::pair<pid_t, int>> pids_;  // scratch
};

}  // namespace gpumux::agent
