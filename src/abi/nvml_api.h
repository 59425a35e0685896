// The NVML entry points gpumux calls or simulates, one prototype each (as in NVML's public API).
// The simulated NVML (sim_nvml*.cc) defines them, so the compiler checks it against this list;
// gpumuxd opens the real library at run time and takes each pointer's type from here
// (node/nvml_library.h). Types: nvml_types.h.
#pragma once

#include "abi/nvml_types.h"

extern "C" {
nvmlReturn_t nvmlInit_v2();
nvmlReturn_t nvmlInitWithFlags(unsigned int flags);
nvmlReturn_t nvmlShutdown();
const char* nvmlErrorString(nvmlReturn_t result);
nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device);
nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int* index);
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length);
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory);
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* count,
                                                     nvmlProcessInfo_t* infos);
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* utilization);
nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                             nvmlProcessUtilizationSample_t* samples,
                                             unsigned int* count, unsigned long long last_seen_us);
// Per-cgroup memory limits (R615+): setting is root's; neither takes a MIG device's handle.
nvmlReturn_t nvmlDeviceSetMemoryLimits_v1(nvmlDevice_t device, nvmlSetMemoryLimits_v1_t* limits);
nvmlReturn_t nvmlDeviceGetMemoryLimits_v1(nvmlDevice_t device, nvmlGetMemoryLimits_v1_t* limits);

// Multi-Instance GPU.
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* current,
                                  unsigned int* pending);
nvmlReturn_t nvmlDeviceSetMigMode(nvmlDevice_t device, unsigned int mode,
                                  nvmlReturn_t* activation_status);
nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(nvmlDevice_t device, unsigned int profile,
                                                  nvmlGpuInstanceProfileInfo_v2_t* info);
nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements_v2(nvmlDevice_t device,
                                                           unsigned int profile_id,
                                                           nvmlGpuInstancePlacement_t* placements,
                                                           unsigned int* count);
nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t device, unsigned int profile_id,
                                       nvmlGpuInstance_t* instances, unsigned int* count);
nvmlReturn_t nvmlDeviceCreateGpuInstanceWithPlacement(nvmlDevice_t device, unsigned int profile_id,
                                                      const nvmlGpuInstancePlacement_t* placement,
                                                      nvmlGpuInstance_t* instance);
nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t instance, nvmlGpuInstanceInfo_t* info);
nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t instance);
nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t instance,
                                                          unsigned int profile,
                                                          unsigned int engine_profile,
                                                          nvmlComputeInstanceProfileInfo_t* info);
nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t instance,
                                                  unsigned int profile_id,
                                                  nvmlComputeInstance_t* compute);
nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t instance, unsigned int profile_id,
                                                nvmlComputeInstance_t* computes,
                                                unsigned int* count);
nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t compute);
nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int* count);
nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                 nvmlDevice_t* mig_device);
nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t mig_device, unsigned int* id);
}
