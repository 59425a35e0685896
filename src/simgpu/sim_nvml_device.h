// The simulated NVML's handles of the simulated GPUs (sim_state.h), shared by sim_nvml.cc and
// sim_nvml_mig.cc: each device's own address. NVML's index of a device is its ordinal: the
// simulated NVML sees the devices this process was given, in their order.
#pragma once

#include "abi/nvml_types.h"
#include "simgpu/sim_state.h"

namespace gpumux::sim {

inline nvmlDevice_t NvmlHandle(int ordinal) {
  return reinterpret_cast<nvmlDevice_t>(const_cast<SimDevice*>(&Device(ordinal)));
}
// The device `d` is the handle of, or null (not a handle, or the environment describes none).
inline const SimDevice* DeviceOfHandle(nvmlDevice_t d) {
  for (int i = 0; i < DeviceCount(); ++i)
    if (d == NvmlHandle(i)) return Device(i).state ? &Device(i) : nullptr;
  return nullptr;
}
// Whether `d` is the handle of the first device: the one whose MIG state sim_nvml_mig.cc keeps
// (gpumuxd gives each simulated GPU a process view of its own; a tenant of several simulated GPUs
// sees them without MIG).
inline bool IsNvmlHandle(nvmlDevice_t d) {
  const SimDevice* device = DeviceOfHandle(d);
  return device && device->ordinal == 0;
}

}  // namespace gpumux::sim
