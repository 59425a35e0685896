// A GPU a tenant runs on, real or simulated, and the environment that starts a tenant on it under
// the shim. Shared by `gpumux run` and gpumuxd so both start tenants the same way.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/gpu_kind.h"

namespace gpumux::node {

class DeviceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Device {
  int index = 0;
  std::string name;
  uint64_t memory = 0;
  int sms = 0;
  double bandwidth = 0, flops = 0;  // simulated only: what its kernels run at
  bool simulated = false;
};

// The simulated GPU `index` of kind `kind` (memory, SMs, bandwidth, bf16 FLOP/s from the catalog).
Device SimulatedDevice(const GpuKind& kind, int index);

// Real GPU `index` as NVML describes it, opened at run time (no NVIDIA header or library is needed
// to build gpumux). Throws DeviceError naming what is missing.
Device RealDevice(int index);
// How many real GPUs NVML sees; throws DeviceError without a driver.
int RealDeviceCount();

// Where libgpumux.so and simgpu/ are: beside the running executable (a build tree), else in
// <prefix>/lib/gpumux next to <prefix>/bin (an installed tree).
std::string RuntimeLibraryDir();

// Environment variables that run a program as `tenant` of `device` under the shim found in
// `bin_dir` (libgpumux.so, and simgpu/ for a simulated device), with the device's ledger at
// `ledger_path`; LD_PRELOAD and LD_LIBRARY_PATH are prepended to `inherited_*`.
std::vector<std::pair<std::string, std::string>> TenantEnvironment(const Device& device, const std::string& ledger_path,
                                                                   const std::string& tenant, const std::string& bin_dir,
                                                                   const std::string& inherited_preload = "",
                                                                   const std::string& inherited_library_path = "");

}  // namespace gpumux::node
