// gpumuxd's check of what a tenant's processes hold on a device as the driver counts it
// (DeviceMeter::ReadMemory), against the tenant's quota: the last resort against a program that
// allocates around the shim (an unset LD_PRELOAD, static linking, raw ioctls), whose memory no
// grant ever saw. Pure arithmetic: the agent gathers the figures, and kills and reports
// (docs/threat-model.md).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <vector>

namespace gpumux::agent {

// One process of a tenant on one device.
struct ProcessMemory {
  pid_t pid = 0;
  uint64_t granted = 0;    // what gpumuxd granted it: what the shim's allocations draw on
  uint64_t held = 0;       // what the driver counts it holding, its CUDA context included
  bool registered = true;  // it registered through the shim; false: found on the device only
};

// One tenant on one device.
struct MemoryCheck {
  uint64_t held = 0;       // what its processes hold, as the driver counts it
  uint64_t outside = 0;    // what they hold beyond what they were granted
  uint64_t footprint = 0;  // each process's grant or holding, whichever is larger, summed
  // The quota, and a context allowance for each registered process the driver counts: a process
  // that never registered had no context of the shim's to allow for.
  uint64_t limit = 0;
  // When the footprint is over the limit, the process that holds the most outside its grants
  // beyond its own allowance (the one allocating around the shim, not one whose context is merely
  // large); 0 when none is over, or all of the excess was granted (memory adopted past the quota,
  // Ledger::Adopt).
  pid_t over = 0;
};

// Checks a tenant of quota `quota` whose processes on the device are `processes`.
// `context_allowance`: what a registered process may hold beyond its grants without allocating
// around the shim (its CUDA context and loaded modules, which no allocation call makes).
MemoryCheck CheckTenantMemory(uint64_t quota, const std::vector<ProcessMemory>& processes,
                              uint64_t context_allowance);

}  // namespace gpumux::agent
