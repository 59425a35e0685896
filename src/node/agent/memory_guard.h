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

// What a tenant's processes may hold beyond their grants (their CUDA contexts and loaded modules,
// which no allocation call makes): `per_process` for each registered process the driver counts,
// and `per_tenant` for all of them together, so that a tenant cannot buy room outside its quota by
// starting processes (up to node::kMaxProcessesPerTenant of them).
struct ContextAllowance {
  uint64_t per_process = 0;
  uint64_t per_tenant = 0;
};

// One tenant on one device.
struct MemoryCheck {
  uint64_t held = 0;       // what its processes hold, as the driver counts it
  uint64_t outside = 0;    // what they hold beyond what they were granted
  uint64_t footprint = 0;  // each process's grant or holding, whichever is larger, summed
  // The quota, and the context allowance of its registered processes the driver counts: a
  // process that never registered had no context of the shim's to allow for.
  uint64_t limit = 0;
  // When the footprint is over the limit, the processes whose end brings it back within it (or
  // all that can be blamed, where that cannot): first those most beyond their own allowance (one
  // allocating around the shim, not one whose context is merely large), then those holding the
  // most outside their grants. Empty when it is within the limit, or all of the excess was
  // granted (memory adopted past the quota, Ledger::Adopt).
  std::vector<pid_t> over;
};

// Checks a tenant of quota `quota` whose processes on the device are `processes`.
MemoryCheck CheckTenantMemory(uint64_t quota, const std::vector<ProcessMemory>& processes,
                              ContextAllowance allowance);

}  // namespace gpumux::agent
