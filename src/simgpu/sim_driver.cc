// The simulated GPU's driver: a stand-in for libcuda.so.1 with the real C ABI, so that programs,
// the shim and the tests run on machines without a GPU. The device is described by the environment
// (`gpumux run --sim KIND` sets it from the catalog): GPUMUX_SIM_NAME, GPUMUX_SIM_MEMORY (bytes),
// GPUMUX_SIM_SMS. Its memory use lives in a shared file (GPUMUX_SIM_STATE) so that several
// processes share one device, as on real hardware; memory of a process that died is returned on the
// next allocation, as the real driver returns it when the process exits. Out of memory answers
// CUDA_ERROR_OUT_OF_MEMORY like the real driver.
//
// Implemented here: initialisation, device queries, contexts, the allocation family (plain, pitch,
// managed, async and pools, virtual-memory handles, arrays) and frees, memory info, error strings
// and cuGetProcAddress (honouring the per-thread-default-stream flag). Modules, streams, events,
// launches, copies and graphs are in sim_exec.cc; NVML in sim_nvml.cc.
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include "abi/driver_api.h"
#include "simgpu/sim_context.h"
#include "simgpu/sim_state.h"

using namespace gpumux::cuda;

namespace {

using gpumux::sim::Device;

// What this process allocated, by kind of handle, so frees give back the right amount.
struct Allocations {
  std::mutex mu;
  std::unordered_map<uint64_t, uint64_t> by_kind[3];  // 0 pointers, 1 VMM handles, 2 arrays
};

// The calling thread's current context, as the driver keeps it: per thread, set by cuCtxSetCurrent
// or cuCtxCreate (the CUDA runtime sets the primary one on each thread before its first call).
thread_local CUcontext t_current = nullptr;

Allocations& Local() {
  static Allocations* a = new Allocations();  // never destroyed: atexit handlers may still free
  return *a;
}

bool Ready() { return Device().state != nullptr; }

CUresult Take(int kind, uint64_t key, uint64_t bytes) {
  if (!gpumux::sim::Take(bytes)) return kErrorOutOfMemory;
  std::lock_guard<std::mutex> lock(Local().mu);
  Local().by_kind[kind][key] = bytes;
  return kSuccess;
}

CUresult Give(int kind, uint64_t key) {
  uint64_t bytes;
  {
    std::lock_guard<std::mutex> lock(Local().mu);
    auto& map = Local().by_kind[kind];
    auto it = map.find(key);
    if (it == map.end()) return kErrorInvalidValue;
    bytes = it->second;
    map.erase(it);
  }
  gpumux::sim::Give(bytes);
  return kSuccess;
}

// Takes `bytes` of device memory under a new handle of `kind` (0 pointers, 1 VMM handles, 2
// arrays); `mark` is or'ed into the handle (VMM handles are odd, never a device pointer).
template <typename Handle>
CUresult TakeHandle(int kind, uint64_t bytes, Handle* out, uint64_t mark = 0) {
  if (!Ready()) return kErrorNotInitialized;
  if (!t_current) return kErrorInvalidContext;  // as the driver refuses
  if (!out || bytes == 0) return kErrorInvalidValue;
  uint64_t handle = gpumux::sim::NewAddress(bytes) | mark;
  CUresult r = Take(kind, handle, bytes);
  if (r == kSuccess) *out = (Handle)handle;
  return r;
}

CUresult Allocate(CUdeviceptr* dptr, uint64_t bytes) { return TakeHandle(0, bytes, dptr); }

}  // namespace

bool gpumux::sim::HasCurrentContext() { return t_current != nullptr; }

extern "C" {

CUresult cuInit(unsigned int) {
  if (!Ready()) return kErrorNoDevice;
  gpumux::sim::ProcessSlot();
  return kSuccess;
}
CUresult cuDriverGetVersion(int* v) {
  if (!v) return kErrorInvalidValue;
  *v = 12040;
  return kSuccess;
}
CUresult cuDeviceGetCount(int* count) {
  if (!count) return kErrorInvalidValue;
  *count = Ready() ? 1 : 0;
  return Ready() ? kSuccess : kErrorNotInitialized;
}
CUresult cuDeviceGet(CUdevice* dev, int ordinal) {
  if (!Ready()) return kErrorNotInitialized;
  if (!dev || ordinal != 0) return kErrorInvalidDevice;
  *dev = 0;
  return kSuccess;
}
CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  if (!Ready()) return kErrorNotInitialized;
  if (!name || len <= 0 || dev != 0) return kErrorInvalidValue;
  std::strncpy(name, Device().name.c_str(), size_t(len) - 1);
  name[len - 1] = 0;
  return kSuccess;
}
CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  if (!Ready()) return kErrorNotInitialized;
  if (!bytes || dev != 0) return kErrorInvalidValue;
  *bytes = Device().memory;
  return kSuccess;
}
CUresult cuDeviceGetAttribute(int* value, int attribute, CUdevice dev) {
  if (!Ready()) return kErrorNotInitialized;
  if (!value || dev != 0) return kErrorInvalidValue;
  // The attributes frameworks ask for at start-up (CUdevice_attribute values); the SM count is the
  // simulated kind's, the rest those of a compute capability 9.0 part.
  static const auto* fixed = new std::unordered_map<int, int>{
      // never destroyed: callable during exit
      {1, 1024},   // MAX_THREADS_PER_BLOCK
      {8, 49152},  // MAX_SHARED_MEMORY_PER_BLOCK
      {10, 32},    // WARP_SIZE
      {41, 1},     // UNIFIED_ADDRESSING
      {75, 9},     // COMPUTE_CAPABILITY_MAJOR
      {76, 0},     // COMPUTE_CAPABILITY_MINOR
      {83, 1},     // MANAGED_MEMORY
      {89, 1},     // CONCURRENT_MANAGED_ACCESS
      {95, 1},     // COOPERATIVE_LAUNCH
      {102, 1},    // VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
      {115, 1},    // MEMORY_POOLS_SUPPORTED
  };
  if (attribute == kAttributeMultiprocessorCount) {
    *value = Device().sms;
    return kSuccess;
  }
  auto it = fixed->find(attribute);
  if (it == fixed->end()) return kErrorInvalidValue;
  *value = it->second;
  return kSuccess;
}
CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice dev) {
  if (!Ready()) return kErrorNotInitialized;
  if (!ctx || dev != 0) return kErrorInvalidValue;
  *ctx = reinterpret_cast<CUcontext>(&Local());
  return kSuccess;
}
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice) {
  return Ready() ? kSuccess : kErrorNotInitialized;
}
CUresult cuCtxCreate_v2(CUcontext* ctx, unsigned int, CUdevice dev) {
  CUresult r = cuDevicePrimaryCtxRetain(ctx, dev);
  if (r == kSuccess) t_current = *ctx;
  return r;
}
CUresult cuCtxDestroy_v2(CUcontext) { return kSuccess; }
CUresult cuCtxSetCurrent(CUcontext ctx) {
  t_current = ctx;
  return kSuccess;
}
CUresult cuCtxGetCurrent(CUcontext* ctx) {
  if (!ctx) return kErrorInvalidValue;
  *ctx = t_current;
  return kSuccess;
}

CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytes) { return Allocate(dptr, bytes); }
CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height,
                            unsigned int) {
  if (!pitch) return kErrorInvalidValue;
  *pitch = (width + 511) & ~size_t(511);
  return Allocate(dptr, uint64_t(*pitch) * height);
}
CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytes, unsigned int) {
  return Allocate(dptr, bytes);
}
CUresult cuMemFree_v2(CUdeviceptr dptr) {
  if (!Ready()) return kErrorNotInitialized;
  return Give(0, dptr);
}
CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytes, CUstream) {
  return Allocate(dptr, bytes);
}
CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytes, CUmemoryPool, CUstream) {
  return Allocate(dptr, bytes);
}
CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream) { return cuMemFree_v2(dptr); }
// The simulator has one default stream, so the per-thread-stream variants behave the same.
CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytes, CUstream) {
  return Allocate(dptr, bytes);
}
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytes, CUmemoryPool, CUstream) {
  return Allocate(dptr, bytes);
}
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream) { return cuMemFree_v2(dptr); }

// Virtual memory management: physical memory is taken by cuMemCreate, not by reserving or mapping
// address ranges.
CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t bytes,
                     const CUmemAllocationProp* prop, unsigned long long) {
  if (!prop) return kErrorInvalidValue;
  return TakeHandle(1, bytes, handle, /*mark=*/1);
}
CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  if (!Ready()) return kErrorNotInitialized;
  return Give(1, handle);
}
CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t, CUdeviceptr,
                             unsigned long long) {
  if (!Ready()) return kErrorNotInitialized;
  if (!ptr || size == 0) return kErrorInvalidValue;
  *ptr = gpumux::sim::NewAddress(size);
  return kSuccess;
}
CUresult cuMemAddressFree(CUdeviceptr, size_t) { return Ready() ? kSuccess : kErrorNotInitialized; }
CUresult cuMemMap(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long) {
  return Ready() ? kSuccess : kErrorNotInitialized;
}
CUresult cuMemUnmap(CUdeviceptr, size_t) { return Ready() ? kSuccess : kErrorNotInitialized; }

CUresult cuArrayCreate_v2(CUarray* array, const CUDA_ARRAY_DESCRIPTOR* desc) {
  if (!desc) return kErrorInvalidValue;
  return TakeHandle(2, ArrayBytes(*desc), array);
}
CUresult cuArrayDestroy(CUarray array) {
  if (!Ready()) return kErrorNotInitialized;
  return Give(2, reinterpret_cast<uint64_t>(array));
}
CUresult cuArray3DCreate_v2(CUarray* array, const CUDA_ARRAY3D_DESCRIPTOR* desc) {
  if (!desc) return kErrorInvalidValue;
  return TakeHandle(2, Array3DBytes(*desc), array);
}
CUresult cuMipmappedArrayCreate(CUmipmappedArray* array, const CUDA_ARRAY3D_DESCRIPTOR* desc,
                                unsigned int levels) {
  if (!desc) return kErrorInvalidValue;
  return TakeHandle(2, Array3DBytes(*desc, levels), array);  // 0 levels -> 0 bytes -> invalid
}
CUresult cuMipmappedArrayDestroy(CUmipmappedArray array) {
  if (!Ready()) return kErrorNotInitialized;
  return Give(2, reinterpret_cast<uint64_t>(array));
}

CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  if (!Ready()) return kErrorNotInitialized;
  if (!free_bytes || !total_bytes) return kErrorInvalidValue;
  gpumux::sim::SimState* s = Device().state;
  gpumux::sim::ReclaimDeadProcesses(s);
  *total_bytes = s->capacity;
  *free_bytes = s->capacity - s->used.load();
  return kSuccess;
}

struct ErrorText {
  CUresult code;
  const char* name;
  const char* text;
};
static const ErrorText kErrors[] = {
    {kSuccess, "CUDA_SUCCESS", "no error"},
    {kErrorInvalidValue, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {kErrorOutOfMemory, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {kErrorNotInitialized, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {kErrorNoDevice, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {kErrorInvalidDevice, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {kErrorInvalidContext, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {kErrorInvalidImage, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {kErrorFileNotFound, "CUDA_ERROR_FILE_NOT_FOUND", "file not found"},
    {kErrorInvalidHandle, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {kErrorNotFound, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {kErrorNotReady, "CUDA_ERROR_NOT_READY", "device not ready"},
    {kErrorStreamCaptureUnsupported, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
     "operation not permitted when stream is capturing"},
};

static CUresult LookUpError(CUresult error, const char** str, const char* ErrorText::*field) {
  if (!str) return kErrorInvalidValue;
  *str = nullptr;
  for (const ErrorText& e : kErrors) {
    if (e.code == error) *str = e.*field;
  }
  return *str ? kSuccess : kErrorInvalidValue;
}
CUresult cuGetErrorName(CUresult error, const char** str) {
  return LookUpError(error, str, &ErrorText::name);
}
CUresult cuGetErrorString(CUresult error, const char** str) {
  return LookUpError(error, str, &ErrorText::text);
}

// cuGetProcAddress: the driver entry points by base name ("cuMemAlloc" resolves to cuMemAlloc_v2);
// with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM the per-thread-stream (_ptsz) variant where
// the driver has one.
CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  return cuGetProcAddress_v2(symbol, pfn, version, flags, nullptr);
}
CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* status) {
  constexpr cuuint64_t kPerThreadDefaultStream = 2;
  struct Entry {
    void* legacy;
    void* per_thread = nullptr;
  };
  static const auto* table = new std::unordered_map<std::string, Entry>{
      // never destroyed: callable during exit
      {"cuInit", {(void*)&cuInit}},
      {"cuDriverGetVersion", {(void*)&cuDriverGetVersion}},
      {"cuDeviceGetCount", {(void*)&cuDeviceGetCount}},
      {"cuDeviceGet", {(void*)&cuDeviceGet}},
      {"cuDeviceGetName", {(void*)&cuDeviceGetName}},
      {"cuDeviceTotalMem", {(void*)&cuDeviceTotalMem_v2}},
      {"cuDeviceGetAttribute", {(void*)&cuDeviceGetAttribute}},
      {"cuDevicePrimaryCtxRetain", {(void*)&cuDevicePrimaryCtxRetain}},
      {"cuDevicePrimaryCtxRelease", {(void*)&cuDevicePrimaryCtxRelease_v2}},
      {"cuCtxCreate", {(void*)&cuCtxCreate_v2}},
      {"cuCtxDestroy", {(void*)&cuCtxDestroy_v2}},
      {"cuCtxSetCurrent", {(void*)&cuCtxSetCurrent}},
      {"cuCtxGetCurrent", {(void*)&cuCtxGetCurrent}},
      {"cuCtxSynchronize", {(void*)&cuCtxSynchronize}},
      {"cuMemAlloc", {(void*)&cuMemAlloc_v2}},
      {"cuMemAllocPitch", {(void*)&cuMemAllocPitch_v2}},
      {"cuMemAllocManaged", {(void*)&cuMemAllocManaged}},
      {"cuMemFree", {(void*)&cuMemFree_v2}},
      {"cuMemAllocAsync", {(void*)&cuMemAllocAsync, (void*)&cuMemAllocAsync_ptsz}},
      {"cuMemAllocFromPoolAsync",
       {(void*)&cuMemAllocFromPoolAsync, (void*)&cuMemAllocFromPoolAsync_ptsz}},
      {"cuMemFreeAsync", {(void*)&cuMemFreeAsync, (void*)&cuMemFreeAsync_ptsz}},
      {"cuMemCreate", {(void*)&cuMemCreate}},
      {"cuMemRelease", {(void*)&cuMemRelease}},
      {"cuMemAddressReserve", {(void*)&cuMemAddressReserve}},
      {"cuMemAddressFree", {(void*)&cuMemAddressFree}},
      {"cuMemMap", {(void*)&cuMemMap}},
      {"cuMemUnmap", {(void*)&cuMemUnmap}},
      {"cuArrayCreate", {(void*)&cuArrayCreate_v2}},
      {"cuArrayDestroy", {(void*)&cuArrayDestroy}},
      {"cuArray3DCreate", {(void*)&cuArray3DCreate_v2}},
      {"cuMipmappedArrayCreate", {(void*)&cuMipmappedArrayCreate}},
      {"cuMipmappedArrayDestroy", {(void*)&cuMipmappedArrayDestroy}},
      {"cuMemGetInfo", {(void*)&cuMemGetInfo_v2}},
      {"cuMemcpyHtoD", {(void*)&cuMemcpyHtoD_v2}},
      {"cuMemcpyDtoH", {(void*)&cuMemcpyDtoH_v2}},
      {"cuMemcpyDtoD", {(void*)&cuMemcpyDtoD_v2}},
      {"cuMemcpyHtoDAsync", {(void*)&cuMemcpyHtoDAsync_v2}},
      {"cuMemcpyDtoHAsync", {(void*)&cuMemcpyDtoHAsync_v2}},
      {"cuMemsetD8", {(void*)&cuMemsetD8_v2}},
      {"cuMemsetD32", {(void*)&cuMemsetD32_v2}},
      {"cuMemsetD8Async", {(void*)&cuMemsetD8Async}},
      {"cuModuleLoad", {(void*)&cuModuleLoad}},
      {"cuModuleLoadData", {(void*)&cuModuleLoadData}},
      {"cuModuleUnload", {(void*)&cuModuleUnload}},
      {"cuModuleGetFunction", {(void*)&cuModuleGetFunction}},
      {"cuStreamCreate", {(void*)&cuStreamCreate}},
      {"cuStreamCreateWithPriority", {(void*)&cuStreamCreateWithPriority}},
      {"cuStreamDestroy", {(void*)&cuStreamDestroy_v2}},
      {"cuStreamSynchronize", {(void*)&cuStreamSynchronize}},
      {"cuStreamQuery", {(void*)&cuStreamQuery}},
      {"cuStreamWaitEvent", {(void*)&cuStreamWaitEvent}},
      {"cuEventCreate", {(void*)&cuEventCreate}},
      {"cuEventDestroy", {(void*)&cuEventDestroy_v2}},
      {"cuEventRecord", {(void*)&cuEventRecord}},
      {"cuEventSynchronize", {(void*)&cuEventSynchronize}},
      {"cuEventQuery", {(void*)&cuEventQuery}},
      {"cuEventElapsedTime", {(void*)&cuEventElapsedTime}},
      {"cuLaunchKernel", {(void*)&cuLaunchKernel, (void*)&cuLaunchKernel_ptsz}},
      {"cuLaunchKernelEx", {(void*)&cuLaunchKernelEx, (void*)&cuLaunchKernelEx_ptsz}},
      {"cuLaunchCooperativeKernel",
       {(void*)&cuLaunchCooperativeKernel, (void*)&cuLaunchCooperativeKernel_ptsz}},
      {"cuStreamBeginCapture", {(void*)&cuStreamBeginCapture_v2}},
      {"cuStreamEndCapture", {(void*)&cuStreamEndCapture}},
      {"cuStreamIsCapturing", {(void*)&cuStreamIsCapturing}},
      {"cuGraphCreate", {(void*)&cuGraphCreate}},
      {"cuGraphDestroy", {(void*)&cuGraphDestroy}},
      {"cuGraphAddKernelNode", {(void*)&cuGraphAddKernelNode_v2}},
      {"cuGraphAddMemAllocNode", {(void*)&cuGraphAddMemAllocNode}},
      {"cuGraphAddMemFreeNode", {(void*)&cuGraphAddMemFreeNode}},
      {"cuGraphInstantiate", {(void*)&cuGraphInstantiateWithFlags}},
      {"cuGraphInstantiateWithFlags", {(void*)&cuGraphInstantiateWithFlags}},
      {"cuGraphExecDestroy", {(void*)&cuGraphExecDestroy}},
      {"cuGraphLaunch", {(void*)&cuGraphLaunch, (void*)&cuGraphLaunch_ptsz}},
      {"cuGetErrorName", {(void*)&cuGetErrorName}},
      {"cuGetErrorString", {(void*)&cuGetErrorString}},
      {"cuGetProcAddress", {(void*)&cuGetProcAddress_v2}},
  };
  if (!symbol || !pfn) return kErrorInvalidValue;
  auto it = table->find(symbol);
  if (it == table->end()) {
    *pfn = nullptr;
    if (status) *status = kProcAddressSymbolNotFound;
    return kErrorNotFound;
  }
  bool per_thread = (flags & kPerThreadDefaultStream) && it->second.per_thread;
  *pfn = per_thread ? it->second.per_thread : it->second.legacy;
  if (status) *status = kProcAddressSuccess;
  return kSuccess;
}

}  // extern "C"
