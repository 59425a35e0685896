// The simulated NVML's handle of the simulated GPU (sim_state.h), shared by sim_nvml.cc and
// sim_nvml_mig.cc: the device's own address.
#pragma once

#include "abi/nvml_types.h"
#include "simgpu/sim_state.h"

namespace gpumux::sim {

inline nvmlDevice_t NvmlHandle() {
  return reinterpret_cast<nvmlDevice_t>(const_cast<SimDevice*>(&Device()));
}
// Whether `d` is the simulated GPU's handle (and the environment describes one).
inline bool IsNvmlHandle(nvmlDevice_t d) { return Device().state && d == NvmlHandle(); }

}  // namespace gpumux::sim
