// The simulated GPU's driver: a stand-in for libcuda.so.1 with the real C ABI, so that programs,
// the shim and the tests run on machines without a GPU. The devices are described by the
// environment (`gpumux run --sim KIND` sets it from the catalog; sim_state.h): one or several of
// one kind. Their memory use lives in shared files (GPUMUX_SIM_STATE) so that several processes
// share a device, as on real hardware; memory of a process that died is returned on the next
// allocation, as the real driver returns it when the process exits. Out of memory answers
// CUDA_ERROR_OUT_OF_MEMORY like the real driver.
//
// Implemented here: initialisation, device queries, contexts (one per device, current per thread;
// memory and work go to the current context's device), peer access, the allocation family (plain,
// pitch, managed, async and pools, virtual-memory handles on a device or on the host, arrays) and
// frees, memory opened from another process (IPC handles of device allocations; POSIX
// file-descriptor handles of virtual-memory allocations, which take no memory again where they are
// opened), memory info, error strings and cuGetProcAddress (honouring the
// per-thread-default-stream flag). Modules, streams, events, launches, copies and graphs are in
// sim_exec.cc; NVML in sim_nvml.cc.
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "abi/driver_api.h"
#include "simgpu/sim_context.h"
#include "simgpu/sim_memory_limits.h"
#include "simgpu/sim_state.h"

using namespace gpumux::cuda;

namespace {

using gpumux::sim::Device;
using gpumux::sim::DeviceCount;
using gpumux::sim::kMaxSimDevices;
using gpumux::sim::SimDevice;

// An allocation of this process: its bytes and the ordinal of the device that holds them (-1: host
// memory, which takes none of a device's).
struct Held {
  uint64_t bytes;
  int device;
};

// What this process allocated, by kind of handle, so frees give back the right amount; and what it
// opened of other processes' memory, which it frees by closing (IPC) or releasing (VMM) and which
// gives nothing back here.
struct Allocations {
  std::mutex mu;
  std::unordered_map<uint64_t, Held> by_kind[3];  // 0 pointers, 1 VMM handles, 2 arrays
  std::unordered_set<uint64_t> exportable;        // VMM handles made with a POSIX fd handle type
  std::unordered_set<uint64_t> opened_pointers;   // cuIpcOpenMemHandle
  std::unordered_set<uint64_t> imported_handles;  // cuMemImportFromShareableHandle
  std::set<std::pair<int, int>> peers;            // (device, peer) with peer access enabled
};

// One context per device (the primary one; cuCtxCreate hands it out too).
struct SimContext {
  int ordinal;
};
SimContext* Contexts() {
  static SimContext* contexts = [] {
    auto* c = new SimContext[kMaxSimDevices];  // never destroyed: callable during exit
    for (int i = 0; i < kMaxSimDevices; ++i) c[i].ordinal = i;
    return c;
  }();
  return contexts;
}
SimContext* ContextOf(CUcontext ctx) {
  auto* c = reinterpret_cast<SimContext*>(ctx);
  return c >= Contexts() && c < Contexts() + DeviceCount() ? c : nullptr;
}

// The calling thread's current context, as the driver keeps it: per thread, set by cuCtxSetCurrent
// or cuCtxCreate (the CUDA runtime sets the primary one on each thread before its first call).
thread_local SimContext* t_current = nullptr;

Allocations& Local() {
  static Allocations* a = new Allocations();  // never destroyed: atexit handlers may still free
  return *a;
}

bool Ready() { return gpumux::sim::HasDevices(); }

// Device `dev` if this process sees it.
const SimDevice* DeviceOf(CUdevice dev) {
  const SimDevice& d = Device(dev);
  return d.state ? &d : nullptr;
}

// The device of the current context.
const SimDevice& Current() { return Device(t_current ? t_current->ordinal : -1); }

CUresult Take(int kind, uint64_t key, const SimDevice& device, uint64_t bytes) {
  if (!gpumux::sim::Take(device, bytes)) return kErrorOutOfMemory;
  std::lock_guard<std::mutex> lock(Local().mu);
  Local().by_kind[kind][key] = {bytes, device.ordinal};
  return kSuccess;
}

CUresult Give(int kind, uint64_t key) {
  Held held;
  {
    std::lock_guard<std::mutex> lock(Local().mu);
    auto& map = Local().by_kind[kind];
    auto it = map.find(key);
    if (it == map.end()) return kErrorInvalidValue;
    held = it->second;
    map.erase(it);
    Local().exportable.erase(key);
  }
  if (held.device >= 0) gpumux::sim::Give(Device(held.device), held.bytes);
  return kSuccess;
}

// Takes `bytes` of the current device's memory under a new handle of `kind` (0 pointers, 1 VMM
// handles, 2 arrays); `mark` is or'ed into the handle (VMM handles are odd, never a device
// pointer).
template <typename Handle>
CUresult TakeHandle(int kind, uint64_t bytes, Handle* out, uint64_t mark = 0) {
  if (!Ready()) return kErrorNotInitialized;
  if (!t_current) return kErrorInvalidContext;  // as the driver refuses
  if (!out || bytes == 0) return kErrorInvalidValue;
  const SimDevice& device = Current();
  uint64_t handle = gpumux::sim::NewAddress(device, bytes) | mark;
  CUresult r = Take(kind, handle, device, bytes);
  if (r == kSuccess) *out = (Handle)handle;
  return r;
}

CUresult Allocate(CUdeviceptr* dptr, uint64_t bytes) { return TakeHandle(0, bytes, dptr); }

// What an IPC handle or an exported VMM file holds: enough to map the memory again elsewhere.
struct SharedMemory {
  char magic[8];
  int32_t pid;  // of the process that made it
  int32_t reserved;
  uint64_t address;
  uint64_t bytes;
};
constexpr char kIpcMagic[8] = "GPUXIPC";
constexpr char kVmmMagic[8] = "GPUXVMM";
static_assert(sizeof(SharedMemory) <= sizeof(CUipcMemHandle));

}  // namespace

int gpumux::sim::CurrentDeviceOrdinal() { return t_current ? t_current->ordinal : -1; }

extern "C" {

CUresult cuInit(unsigned int) {
  if (!Ready()) return kErrorNoDevice;
  for (int d = 0; d < DeviceCount(); ++d) gpumux::sim::ProcessSlot(Device(d));
  return kSuccess;
}
CUresult cuDriverGetVersion(int* v) {
  if (!v) return kErrorInvalidValue;
  *v = 12040;
  return kSuccess;
}
CUresult cuDeviceGetCount(int* count) {
  if (!count) return kErrorInvalidValue;
  *count = Ready() ? DeviceCount() : 0;
  return Ready() ? kSuccess : kErrorNotInitialized;
}
CUresult cuDeviceGet(CUdevice* dev, int ordinal) {
  if (!Ready()) return kErrorNotInitialized;
  if (!dev || !DeviceOf(ordinal)) return kErrorInvalidDevice;
  *dev = ordinal;
  return kSuccess;
}
CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  if (!Ready()) return kErrorNotInitialized;
  if (!name || len <= 0 || !DeviceOf(dev)) return kErrorInvalidValue;
  std::strncpy(name, Device(dev).name.c_str(), size_t(len) - 1);
  name[len - 1] = 0;
  return kSuccess;
}
CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  if (!Ready()) return kErrorNotInitialized;
  if (!bytes || !DeviceOf(dev)) return kErrorInvalidValue;
  *bytes = Device(dev).memory;
  return kSuccess;
}
CUresult cuDeviceGetAttribute(int* value, int attribute, CUdevice dev) {
  if (!Ready()) return kErrorNotInitialized;
  if (!value || !DeviceOf(dev)) return kErrorInvalidValue;
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
    *value = Device(dev).sms;
    return kSuccess;
  }
  auto it = fixed->find(attribute);
  if (it == fixed->end()) return kErrorInvalidValue;
  *value = it->second;
  return kSuccess;
}
CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice dev) {
  if (!Ready()) return kErrorNotInitialized;
  if (!ctx || !DeviceOf(dev)) return kErrorInvalidValue;
  *ctx = reinterpret_cast<CUcontext>(&Contexts()[dev]);
  return kSuccess;
}
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice) {
  return Ready() ? kSuccess : kErrorNotInitialized;
}
CUresult cuCtxCreate_v2(CUcontext* ctx, unsigned int, CUdevice dev) {
  CUresult r = cuDevicePrimaryCtxRetain(ctx, dev);
  if (r == kSuccess) t_current = ContextOf(*ctx);
  return r;
}
CUresult cuCtxDestroy_v2(CUcontext) { return kSuccess; }
CUresult cuCtxSetCurrent(CUcontext ctx) {
  if (ctx && !ContextOf(ctx)) return kErrorInvalidContext;
  t_current = ContextOf(ctx);
  return kSuccess;
}
CUresult cuCtxGetCurrent(CUcontext* ctx) {
  if (!ctx) return kErrorInvalidValue;
  *ctx = reinterpret_cast<CUcontext>(t_current);
  return kSuccess;
}
CUresult cuCtxGetDevice(CUdevice* dev) {
  if (!dev) return kErrorInvalidValue;
  if (!t_current) return kErrorInvalidContext;
  *dev = t_current->ordinal;
  return kSuccess;
}

// Peer access: every pair of distinct simulated devices may reach each other's memory, once the
// context that reaches enables it (and not twice).
CUresult cuDeviceCanAccessPeer(int* can, CUdevice dev, CUdevice peer) {
  if (!Ready()) return kErrorNotInitialized;
  if (!can) return kErrorInvalidValue;
  if (!DeviceOf(dev) || !DeviceOf(peer)) return kErrorInvalidDevice;
  *can = dev != peer;
  return kSuccess;
}
CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags) {
  if (!t_current) return kErrorInvalidContext;
  SimContext* p = ContextOf(peer);
  if (!p) return kErrorInvalidContext;
  if (flags != 0) return kErrorInvalidValue;
  if (p == t_current) return kErrorInvalidDevice;
  std::lock_guard<std::mutex> lock(Local().mu);
  return Local().peers.insert({t_current->ordinal, p->ordinal}).second
             ? kSuccess
             : kErrorPeerAccessAlreadyEnabled;
}
CUresult cuCtxDisablePeerAccess(CUcontext peer) {
  if (!t_current) return kErrorInvalidContext;
  SimContext* p = ContextOf(peer);
  if (!p) return kErrorInvalidContext;
  std::lock_guard<std::mutex> lock(Local().mu);
  return Local().peers.erase({t_current->ordinal, p->ordinal}) ? kSuccess
                                                               : kErrorPeerAccessNotEnabled;
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
// address ranges; memory located on the host takes none of a device's.
CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t bytes,
                     const CUmemAllocationProp* prop, unsigned long long) {
  if (!prop || !handle || bytes == 0) return kErrorInvalidValue;
  if (!Ready()) return kErrorNotInitialized;
  if (!t_current) return kErrorInvalidContext;
  int where = prop->location.type;
  uint64_t made;
  if (where == kMemLocationDevice) {
    const SimDevice* device = DeviceOf(prop->location.id);
    if (!device) return kErrorInvalidDevice;
    made = gpumux::sim::NewAddress(*device, bytes) | 1;
    if (CUresult r = Take(1, made, *device, bytes); r != kSuccess) return r;
  } else if (where == kMemLocationHost || where == kMemLocationHostNuma ||
             where == kMemLocationHostNumaCurrent) {
    made = gpumux::sim::NewAddress(Current(), bytes) | 1;
    std::lock_guard<std::mutex> lock(Local().mu);
    Local().by_kind[1][made] = {bytes, -1};
  } else {
    return kErrorInvalidValue;
  }
  if (prop->requestedHandleTypes & kMemHandlePosixFileDescriptor) {
    std::lock_guard<std::mutex> lock(Local().mu);
    Local().exportable.insert(made);
  }
  *handle = made;
  return kSuccess;
}
CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  if (!Ready()) return kErrorNotInitialized;
  {
    std::lock_guard<std::mutex> lock(Local().mu);
    if (Local().imported_handles.erase(handle)) return kSuccess;  // its maker holds the memory
  }
  return Give(1, handle);
}
// A POSIX file descriptor of a file that describes the memory (what NCCL passes between processes
// over a Unix socket); only for memory made with that handle type requested.
CUresult cuMemExportToShareableHandle(void* shareable, CUmemGenericAllocationHandle handle,
                                      int handle_type, unsigned long long flags) {
  if (!Ready()) return kErrorNotInitialized;
  if (!shareable || handle_type != kMemHandlePosixFileDescriptor || flags != 0)
    return kErrorInvalidValue;
  SharedMemory shared{};
  {
    std::lock_guard<std::mutex> lock(Local().mu);
    auto it = Local().by_kind[1].find(handle);
    if (it == Local().by_kind[1].end() || !Local().exportable.count(handle))
      return kErrorInvalidValue;
    shared.bytes = it->second.bytes;
  }
  std::memcpy(shared.magic, kVmmMagic, sizeof(shared.magic));
  shared.pid = getpid();
  shared.address = handle;
  int fd = memfd_create("gpumux-sim-vmm", MFD_CLOEXEC);
  if (fd < 0) return kErrorOutOfMemory;
  if (pwrite(fd, &shared, sizeof(shared), 0) != ssize_t(sizeof(shared))) {
    close(fd);
    return kErrorOutOfMemory;
  }
  *static_cast<int*>(shareable) = fd;
  return kSuccess;
}
CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* os_handle,
                                        int handle_type) {
  if (!Ready()) return kErrorNotInitialized;
  if (!handle || handle_type != kMemHandlePosixFileDescriptor) return kErrorInvalidValue;
  SharedMemory shared{};
  int fd = int(reinterpret_cast<intptr_t>(os_handle));
  if (pread(fd, &shared, sizeof(shared), 0) != ssize_t(sizeof(shared)) ||
      std::memcmp(shared.magic, kVmmMagic, sizeof(shared.magic)) != 0)
    return kErrorInvalidValue;
  uint64_t imported = gpumux::sim::NewAddress(Device(0), shared.bytes) | 1;
  std::lock_guard<std::mutex> lock(Local().mu);
  Local().imported_handles.insert(imported);
  *handle = imported;
  return kSuccess;
}

// IPC handles of device allocations (cuMemAlloc's): opened in another process as a new mapping of
// the same memory, which that process closes and never frees.
CUresult cuIpcGetMemHandle(CUipcMemHandle* handle, CUdeviceptr dptr) {
  if (!Ready()) return kErrorNotInitialized;
  if (!handle) return kErrorInvalidValue;
  SharedMemory shared{};
  {
    std::lock_guard<std::mutex> lock(Local().mu);
    auto it = Local().by_kind[0].find(dptr);
    if (it == Local().by_kind[0].end()) return kErrorInvalidValue;
    shared.bytes = it->second.bytes;
  }
  std::memcpy(shared.magic, kIpcMagic, sizeof(shared.magic));
  shared.pid = getpid();
  shared.address = dptr;
  std::memset(handle, 0, sizeof(*handle));
  std::memcpy(handle->reserved, &shared, sizeof(shared));
  return kSuccess;
}
CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* dptr, CUipcMemHandle handle, unsigned int) {
  if (!Ready()) return kErrorNotInitialized;
  if (!t_current) return kErrorInvalidContext;
  if (!dptr) return kErrorInvalidValue;
  SharedMemory shared;
  std::memcpy(&shared, handle.reserved, sizeof(shared));
  if (std::memcmp(shared.magic, kIpcMagic, sizeof(shared.magic)) != 0) return kErrorInvalidValue;
  // The driver opens another process's handles only.
  if (shared.pid == getpid()) return kErrorInvalidContext;
  uint64_t mapped = gpumux::sim::NewAddress(Current(), shared.bytes);
  std::lock_guard<std::mutex> lock(Local().mu);
  Local().opened_pointers.insert(mapped);
  *dptr = mapped;
  return kSuccess;
}
CUresult cuIpcCloseMemHandle(CUdeviceptr dptr) {
  if (!Ready()) return kErrorNotInitialized;
  std::lock_guard<std::mutex> lock(Local().mu);
  return Local().opened_pointers.erase(dptr) ? kSuccess : kErrorInvalidValue;
}
CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t, CUdeviceptr,
                             unsigned long long) {
  if (!Ready()) return kErrorNotInitialized;
  if (!ptr || size == 0) return kErrorInvalidValue;
  *ptr = gpumux::sim::NewAddress(t_current ? Current() : Device(0), size);
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
  if (!t_current) return kErrorInvalidContext;
  if (!free_bytes || !total_bytes) return kErrorInvalidValue;
  gpumux::sim::SimState* s = Current().state;
  gpumux::sim::ReclaimDeadProcesses(s);
  *total_bytes = s->capacity;
  *free_bytes = s->capacity - s->used.load();
  // In a cgroup the driver limits (R615+), the limit is the total, as NVIDIA documents.
  if (std::optional<gpumux::sim::SimGroupLimits> l = gpumux::sim::LimitOfThisProcess(Current());
      l && l->hard < *total_bytes) {
    *total_bytes = l->hard;
    *free_bytes = std::min<size_t>(*free_bytes, l->hard > l->used ? l->hard - l->used : 0);
  }
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
    {kErrorPeerAccessAlreadyEnabled, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
     "peer access is already enabled"},
    {kErrorPeerAccessNotEnabled, "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED",
     "peer access has not been enabled"},
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
      {"cuCtxGetDevice", {(void*)&cuCtxGetDevice}},
      {"cuDeviceCanAccessPeer", {(void*)&cuDeviceCanAccessPeer}},
      {"cuCtxEnablePeerAccess", {(void*)&cuCtxEnablePeerAccess}},
      {"cuCtxDisablePeerAccess", {(void*)&cuCtxDisablePeerAccess}},
      {"cuIpcGetMemHandle", {(void*)&cuIpcGetMemHandle}},
      {"cuIpcOpenMemHandle", {(void*)&cuIpcOpenMemHandle_v2}},
      {"cuIpcCloseMemHandle", {(void*)&cuIpcCloseMemHandle}},
      {"cuMemExportToShareableHandle", {(void*)&cuMemExportToShareableHandle}},
      {"cuMemImportFromShareableHandle", {(void*)&cuMemImportFromShareableHandle}},
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
