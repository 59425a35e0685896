// The NVML types and codes gpumux's simulated NVML and shim use, declared from the public ABI
// (see ../shared/reference/mig-mps-gpus.md §5; no vendor header is copied).
#pragma once

extern "C" {
typedef int nvmlReturn_t;
typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct { unsigned int version; unsigned long long total, reserved, free, used; } nvmlMemory_v2_t;
typedef struct { unsigned int pid; unsigned long long usedGpuMemory; unsigned int gpuInstanceId, computeInstanceId; }
    nvmlProcessInfo_t;
typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;
typedef struct {
  unsigned int pid;
  unsigned long long timeStamp;  // microseconds
  unsigned int smUtil, memUtil, encUtil, decUtil;  // percent of the time since the previous sample
} nvmlProcessUtilizationSample_t;
}

namespace gpumux::nvml {
inline constexpr nvmlReturn_t kSuccess = 0;
inline constexpr nvmlReturn_t kErrorUninitialized = 1;
inline constexpr nvmlReturn_t kErrorInvalidArgument = 2;
inline constexpr nvmlReturn_t kErrorNotFound = 6;
inline constexpr nvmlReturn_t kErrorInsufficientSize = 7;
inline constexpr nvmlReturn_t kErrorDriverNotLoaded = 9;
inline constexpr unsigned int kNotMig = 0xFFFFFFFFu;
}  // namespace gpumux::nvml
