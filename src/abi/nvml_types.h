// The NVML types and codes gpumux uses (its simulated NVML, the shim, gpumuxd), declared from the
// public ABI as NVML's documentation describes it (../shared/reference/mig-mps-gpus.md §5;
// structure layouts as in the NVML API reference, R535 and later); no vendor header is copied.
#pragma once

extern "C" {
typedef int nvmlReturn_t;
typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct nvmlGpuInstance_st* nvmlGpuInstance_t;
typedef struct nvmlComputeInstance_st* nvmlComputeInstance_t;
typedef struct {
  unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
  unsigned int version;
  unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;
typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;
typedef struct {
  unsigned int gpu, memory;
} nvmlUtilization_t;
typedef struct {
  unsigned int pid;
  unsigned long long timeStamp;                    // microseconds
  unsigned int smUtil, memUtil, encUtil, decUtil;  // percent of the time since the previous sample
} nvmlProcessUtilizationSample_t;

// Multi-Instance GPU. A GPU instance sits at a placement (start and size on the memory-slot axis);
// a compute instance inside it runs the work; the pair is a "MIG device" with its own UUID.
typedef struct {
  unsigned int start, size;
} nvmlGpuInstancePlacement_t;
typedef struct {
  unsigned int version;  // kGpuInstanceProfileInfoV2
  unsigned int id;       // the profile ID that creation takes (nvidia-smi's "ID" column)
  unsigned int isP2pSupported, sliceCount, instanceCount, multiprocessorCount;
  unsigned int copyEngineCount, decoderCount, encoderCount, jpegCount, ofaCount;
  unsigned long long memorySizeMB;
  char name[96];  // "MIG 1g.10gb"
} nvmlGpuInstanceProfileInfo_v2_t;
typedef struct {
  nvmlDevice_t device;
  unsigned int id, profileId;
  nvmlGpuInstancePlacement_t placement;
} nvmlGpuInstanceInfo_t;
typedef struct {
  unsigned int id, sliceCount, instanceCount, multiprocessorCount;
  unsigned int sharedCopyEngineCount, sharedDecoderCount, sharedEncoderCount, sharedJpegCount,
      sharedOfaCount;
} nvmlComputeInstanceProfileInfo_t;
// Per-cgroup memory limits (driver R615+, NVML of CUDA 13.4): `nameSpace` is the full path of a
// cgroup v2 directory ("/sys/fs/cgroup/kubepods/pod<UID>"); limits in bytes. Clearing is soft 0
// and hard NVML_DEVICE_MEMORY_LIMIT_MAX (kMemoryLimitMax). (NVML API reference,
// structnvmlSetMemoryLimits__v1__t and structnvmlGetMemoryLimits__v1__t.)
typedef struct {
  const char* nameSpace;
  unsigned long long softLimit, hardLimit;
} nvmlSetMemoryLimits_v1_t;
typedef struct {
  const char* nameSpace;
  unsigned long long softLimit, hardLimit;
  unsigned long long currentUsed;  // what the group's processes hold on the device
} nvmlGetMemoryLimits_v1_t;
}

namespace gpumux::nvml {
inline constexpr nvmlReturn_t kSuccess = 0;
inline constexpr nvmlReturn_t kErrorUninitialized = 1;
inline constexpr nvmlReturn_t kErrorInvalidArgument = 2;
inline constexpr nvmlReturn_t kErrorNotSupported = 3;
inline constexpr nvmlReturn_t kErrorNoPermission = 4;
inline constexpr nvmlReturn_t kErrorNotFound = 6;
inline constexpr nvmlReturn_t kErrorInsufficientSize = 7;
inline constexpr nvmlReturn_t kErrorDriverNotLoaded = 9;
inline constexpr nvmlReturn_t kErrorInUse = 19;
inline constexpr nvmlReturn_t kErrorInsufficientResources = 23;
// NVML_DEVICE_MEMORY_LIMIT_MAX: no hard limit. Its value is not on the reference pages read; ~0, as
// a published R615 prototype written from nvml.h uses.
inline constexpr unsigned long long kMemoryLimitMax = ~0ull;
inline constexpr unsigned int kNotMig = 0xFFFFFFFFu;

inline constexpr unsigned int kMigDisable = 0, kMigEnable = 1;
// GPU instance profile constants (NVML_GPU_INSTANCE_PROFILE_*) run from 0; newer drivers add more.
// gpumux asks for each below this bound and matches the answers by name.
inline constexpr unsigned int kGpuInstanceProfileBound = 64;
// Compute instance profile constants (NVML_COMPUTE_INSTANCE_PROFILE_*), likewise.
inline constexpr unsigned int kComputeInstanceProfileBound = 16;
inline constexpr unsigned int kComputeInstanceEngineShared = 0;
inline constexpr unsigned int kGpuInstanceProfileInfoV2 =
    unsigned(sizeof(nvmlGpuInstanceProfileInfo_v2_t)) | (2u << 24);
inline constexpr unsigned int kUuidBufferSize = 96;
}  // namespace gpumux::nvml
