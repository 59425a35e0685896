// The simulated driver's memory limits per cgroup, as NVIDIA's driver keeps them from release 615
// (NVML nvmlDeviceSetMemoryLimits_v1 / nvmlDeviceGetMemoryLimits_v1; the MPS documentation's
// "memory partitioning", docs.nvidia.com/deploy/mps/, and the NVML API reference's
// structnvmlSetMemoryLimits__v1__t): for one GPU, a cgroup v2 directory gets a soft and a hard
// limit; an allocation by a process in that group (or below it) that would take the group past its
// hard limit fails with CUDA_ERROR_OUT_OF_MEMORY, and cuMemGetInfo in the group reports the limit
// as the total. Only root sets limits; anyone reads them. Not on MIG devices.
//
// The simulated driver offers them where GPUMUX_SIM_DRIVER_VERSION is 615 or more (unset: an older
// driver, without them). They live in a file beside each device's state (<state>.limits, mode
// 0644, root's): tenants read it and cannot write it, as they cannot write the real driver's.
// The soft limit is kept and reported, and never acted on (the driver reclaims from a group past it
// only under pressure, which the simulator does not model).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "abi/nvml_types.h"
#include "simgpu/sim_state.h"

namespace gpumux::sim {

inline constexpr int kMaxSimMemoryLimits = 64;

// Whether the simulated driver offers memory limits (GPUMUX_SIM_DRIVER_VERSION >= 615).
bool SimDriverHasMemoryLimits();

// Sets the limits of the group whose directory is `group_dir` (a full path) on the device whose
// state file is `state_path`; soft 0 and hard nvml::kMemoryLimitMax clear them. Returns the NVML
// code the driver would: kErrorNotSupported where the driver does not offer them,
// kErrorNoPermission unless root, kErrorNotFound where `group_dir` is not a cgroup v2 directory,
// kErrorInsufficientResources when the table is full. Thread-safe.
nvmlReturn_t SetSimMemoryLimits(const std::string& state_path, const std::string& group_dir,
                                uint64_t soft, uint64_t hard);

struct SimGroupLimits {
  uint64_t soft = 0, hard = nvml::kMemoryLimitMax;
  uint64_t used = 0;  // what the group's processes (and its descendants') hold on the device
};
// The limits of `group_dir` on the device of `state_path`: kErrorNotFound where none are set
// (NVML's answer for a group without its own), kErrorNotSupported as above. Thread-safe.
nvmlReturn_t GetSimMemoryLimits(const std::string& state_path, const std::string& group_dir,
                                SimGroupLimits* limits);

// The tightest hard limit among the groups this process is in on `device`, with what that group
// holds; nullopt where none applies. For the simulated driver's allocations and cuMemGetInfo.
std::optional<SimGroupLimits> LimitOfThisProcess(const SimDevice& device);

}  // namespace gpumux::sim
