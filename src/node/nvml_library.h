// NVML, opened at run time: gpumux needs no NVIDIA header or library to build, and runs without a
// driver wherever it does not touch a real GPU. Each entry point's type comes from the one
// prototype list (abi/nvml_api.h).
#pragma once

#include <string>

#include "abi/nvml_api.h"

namespace gpumux::node {

struct NvmlLibrary {
  decltype(&nvmlErrorString) error_string = nullptr;
  decltype(&nvmlDeviceGetCount_v2) count = nullptr;
  decltype(&nvmlDeviceGetHandleByIndex_v2) handle = nullptr;
  decltype(&nvmlDeviceGetName) name = nullptr;
  decltype(&nvmlDeviceGetUUID) uuid = nullptr;
  decltype(&nvmlDeviceGetMemoryInfo) memory = nullptr;
  // Per-process GPU time samples; null where the driver's NVML lacks it.
  decltype(&nvmlDeviceGetProcessUtilization) process_utilization = nullptr;
  // The processes holding memory on a device, and how much each holds.
  decltype(&nvmlDeviceGetComputeRunningProcesses_v3) compute_processes = nullptr;
  decltype(&nvmlSystemGetDriverVersion) driver_version = nullptr;
  // Memory limits per cgroup; null where the driver predates them (before R615).
  decltype(&nvmlDeviceSetMemoryLimits_v1) set_memory_limits = nullptr;
  decltype(&nvmlDeviceGetMemoryLimits_v1) get_memory_limits = nullptr;
  // Multi-Instance GPU; null where the driver's NVML predates it.
  decltype(&nvmlDeviceGetMigMode) get_mig_mode = nullptr;
  decltype(&nvmlDeviceSetMigMode) set_mig_mode = nullptr;
  decltype(&nvmlDeviceGetGpuInstanceProfileInfoV) gpu_instance_profile = nullptr;
  decltype(&nvmlDeviceGetGpuInstancePossiblePlacements_v2) possible_placements = nullptr;
  decltype(&nvmlDeviceGetGpuInstances) gpu_instances = nullptr;
  decltype(&nvmlDeviceCreateGpuInstanceWithPlacement) create_gpu_instance = nullptr;
  decltype(&nvmlGpuInstanceGetInfo) gpu_instance_info = nullptr;
  decltype(&nvmlGpuInstanceDestroy) destroy_gpu_instance = nullptr;
  decltype(&nvmlGpuInstanceGetComputeInstanceProfileInfo) compute_instance_profile = nullptr;
  decltype(&nvmlGpuInstanceCreateComputeInstance) create_compute_instance = nullptr;
  decltype(&nvmlGpuInstanceGetComputeInstances) compute_instances = nullptr;
  decltype(&nvmlComputeInstanceDestroy) destroy_compute_instance = nullptr;
  decltype(&nvmlDeviceGetMaxMigDeviceCount) max_mig_devices = nullptr;
  decltype(&nvmlDeviceGetMigDeviceHandleByIndex) mig_device = nullptr;
  decltype(&nvmlDeviceGetGpuInstanceId) gpu_instance_id = nullptr;

  bool has_mig() const;
  // Whether the driver limits memory per cgroup: the calls resolve and the driver is R615 or later.
  bool has_memory_limits() const;
  // Throws Error "`what`: <NVML's message>" unless `r` is success: conflict where the driver says
  // something is in use (a MIG instance a process runs on), else unavailable.
  void Check(nvmlReturn_t r, const std::string& what) const;
  // The handle of GPU `index`; throws Error (unavailable).
  nvmlDevice_t Gpu(int index) const;
};

// libnvidia-ml.so.1, initialised once (thread-safe). Throws Error (unavailable) when there is no
// driver.
const NvmlLibrary& Nvml();

}  // namespace gpumux::node
