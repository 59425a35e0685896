// The simulated GPU's driver: a stand-in for libcuda.so.1 with the real C ABI, so that programs,
// the shim and the tests run on machines without a GPU. The device is described by the environment
// (`gpumux run --sim KIND` sets it from the catalog): GPUMUX_SIM_NAME, GPUMUX_SIM_MEMORY (bytes),
// GPUMUX_SIM_SMS. Its memory use lives in a shared file (GPUMUX_SIM_STATE) so that several processes
// share one device, as on real hardware; memory of a process that died is returned on the next
// allocation, as the real driver returns it when the process exits. Out of memory answers
// CUDA_ERROR_OUT_OF_MEMORY like the real driver.
//
// This slice implements initialisation, device queries, contexts, the allocation family (plain,
// pitch, managed) and frees, memory info, error strings and cuGetProcAddress. Kernels, streams,
// events, graphs and NVML are not simulated yet.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include "node/ledger/ledger.h"
#include "simgpu/cuda_types.h"

using namespace gpumux::cuda;

namespace {

constexpr uint64_t kStateMagic = 0x4d49535855504725ull;  // "%GPUXSIM"
constexpr int kMaxSimProcesses = 1024;

struct SimProcess {
  std::atomic<int32_t> pid;
  uint64_t start_time;
  std::atomic<uint64_t> used;
};

struct SimState {
  uint64_t magic;
  uint64_t capacity;
  std::atomic<uint64_t> used;
  std::atomic<uint64_t> next_address;
  SimProcess processes[kMaxSimProcesses];
};

struct Device {
  bool ready = false;
  std::string name;
  uint64_t memory = 0;
  int sms = 0;
  SimState* state = nullptr;
  int slot = -1;                                   // this process's SimProcess
  std::mutex mu;                                   // guards `sizes`
  std::unordered_map<CUdeviceptr, uint64_t> sizes;
  CUcontext current = nullptr;
};

Device& Dev() {
  static Device* d = new Device();  // never destroyed: atexit handlers may still allocate
  return *d;
}

SimState* MapState(const std::string& path, uint64_t capacity) {
  int fd = open(path.c_str(), O_RDWR | O_CREAT, 0600);
  if (fd < 0) return nullptr;
  flock(fd, LOCK_EX);
  struct stat st;
  fstat(fd, &st);
  bool fresh = st.st_size == 0;
  if (fresh && ftruncate(fd, sizeof(SimState)) != 0) {
    close(fd);
    return nullptr;
  }
  void* p = mmap(nullptr, sizeof(SimState), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  SimState* s = p == MAP_FAILED ? nullptr : static_cast<SimState*>(p);
  if (s && fresh) {
    s->capacity = capacity;
    s->next_address.store(0x7f0000000000ull);
    s->magic = kStateMagic;
  }
  if (s && s->magic != kStateMagic) s = nullptr;
  flock(fd, LOCK_UN);
  close(fd);
  return s;
}

// Returns the memory of processes that died without freeing it, as the driver does at exit.
void ReclaimDeadProcesses(SimState* s) {
  for (SimProcess& p : s->processes) {
    int32_t pid = p.pid.load();
    if (pid <= 0) continue;
    auto start = gpumux::node::ProcessStartTime(pid);
    if (start && *start == p.start_time) continue;
    if (!p.pid.compare_exchange_strong(pid, -1)) continue;
    s->used.fetch_sub(p.used.exchange(0));
    p.pid.store(0);
  }
}

CUresult Init() {
  Device& d = Dev();
  std::lock_guard<std::mutex> lock(d.mu);
  if (d.ready) return kSuccess;
  const char* mem = std::getenv("GPUMUX_SIM_MEMORY");
  if (!mem || !*mem) return kErrorNoDevice;
  d.memory = std::strtoull(mem, nullptr, 10);
  const char* name = std::getenv("GPUMUX_SIM_NAME");
  d.name = name ? name : "gpumux simulated GPU";
  const char* sms = std::getenv("GPUMUX_SIM_SMS");
  d.sms = sms ? std::atoi(sms) : 108;
  const char* state = std::getenv("GPUMUX_SIM_STATE");
  std::string path = state && *state ? state : "/dev/shm/gpumux-sim-" + std::to_string(getuid());
  d.state = MapState(path, d.memory);
  if (!d.state) return kErrorNotInitialized;
  auto start = gpumux::node::ProcessStartTime(getpid());
  for (int i = 0; i < kMaxSimProcesses && start; ++i) {
    int32_t expected = 0;
    if (d.state->processes[i].pid.compare_exchange_strong(expected, -1)) {
      d.state->processes[i].start_time = *start;
      d.state->processes[i].used.store(0);
      d.state->processes[i].pid.store(getpid());
      d.slot = i;
      break;
    }
  }
  d.ready = true;
  return kSuccess;
}

CUresult Allocate(CUdeviceptr* dptr, uint64_t bytes) {
  Device& d = Dev();
  if (!d.ready) return kErrorNotInitialized;
  if (!dptr || bytes == 0) return kErrorInvalidValue;
  uint64_t used = d.state->used.load();
  do {
    if (used + bytes > d.state->capacity) {
      ReclaimDeadProcesses(d.state);
      used = d.state->used.load();
      if (used + bytes > d.state->capacity) return kErrorOutOfMemory;
    }
  } while (!d.state->used.compare_exchange_weak(used, used + bytes));
  if (d.slot >= 0) d.state->processes[d.slot].used.fetch_add(bytes);
  uint64_t aligned = (bytes + 511) & ~uint64_t(511);
  *dptr = d.state->next_address.fetch_add(aligned);
  std::lock_guard<std::mutex> lock(d.mu);
  d.sizes[*dptr] = bytes;
  return kSuccess;
}

}  // namespace

extern "C" {

CUresult cuInit(unsigned int) { return Init(); }
CUresult cuDriverGetVersion(int* v) {
  if (!v) return kErrorInvalidValue;
  *v = 12040;
  return kSuccess;
}
CUresult cuDeviceGetCount(int* count) {
  if (!count) return kErrorInvalidValue;
  *count = Dev().ready ? 1 : 0;
  return Dev().ready ? kSuccess : kErrorNotInitialized;
}
CUresult cuDeviceGet(CUdevice* dev, int ordinal) {
  if (!Dev().ready) return kErrorNotInitialized;
  if (!dev || ordinal != 0) return kErrorInvalidDevice;
  *dev = 0;
  return kSuccess;
}
CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  if (!Dev().ready) return kErrorNotInitialized;
  if (!name || len <= 0 || dev != 0) return kErrorInvalidValue;
  std::strncpy(name, Dev().name.c_str(), size_t(len) - 1);
  name[len - 1] = 0;
  return kSuccess;
}
CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  if (!Dev().ready) return kErrorNotInitialized;
  if (!bytes || dev != 0) return kErrorInvalidValue;
  *bytes = Dev().memory;
  return kSuccess;
}
CUresult cuDeviceGetAttribute(int* value, int attribute, CUdevice dev) {
  if (!Dev().ready) return kErrorNotInitialized;
  if (!value || dev != 0) return kErrorInvalidValue;
  if (attribute != kAttributeMultiprocessorCount) return kErrorInvalidValue;
  *value = Dev().sms;
  return kSuccess;
}
CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice dev) {
  if (!Dev().ready) return kErrorNotInitialized;
  if (!ctx || dev != 0) return kErrorInvalidValue;
  *ctx = reinterpret_cast<CUcontext>(&Dev());
  return kSuccess;
}
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice) { return Dev().ready ? kSuccess : kErrorNotInitialized; }
CUresult cuCtxCreate_v2(CUcontext* ctx, unsigned int, CUdevice dev) {
  CUresult r = cuDevicePrimaryCtxRetain(ctx, dev);
  if (r == kSuccess) Dev().current = *ctx;
  return r;
}
CUresult cuCtxDestroy_v2(CUcontext) { return kSuccess; }
CUresult cuCtxSetCurrent(CUcontext ctx) {
  Dev().current = ctx;
  return kSuccess;
}
CUresult cuCtxGetCurrent(CUcontext* ctx) {
  if (!ctx) return kErrorInvalidValue;
  *ctx = Dev().current;
  return kSuccess;
}

CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytes) { return Allocate(dptr, bytes); }
CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height, unsigned int) {
  if (!pitch) return kErrorInvalidValue;
  *pitch = (width + 511) & ~size_t(511);
  return Allocate(dptr, uint64_t(*pitch) * height);
}
CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytes, unsigned int) { return Allocate(dptr, bytes); }
CUresult cuMemFree_v2(CUdeviceptr dptr) {
  Device& d = Dev();
  if (!d.ready) return kErrorNotInitialized;
  uint64_t bytes;
  {
    std::lock_guard<std::mutex> lock(d.mu);
    auto it = d.sizes.find(dptr);
    if (it == d.sizes.end()) return kErrorInvalidValue;
    bytes = it->second;
    d.sizes.erase(it);
  }
  d.state->used.fetch_sub(bytes);
  if (d.slot >= 0) d.state->processes[d.slot].used.fetch_sub(bytes);
  return kSuccess;
}
CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  Device& d = Dev();
  if (!d.ready) return kErrorNotInitialized;
  if (!free_bytes || !total_bytes) return kErrorInvalidValue;
  ReclaimDeadProcesses(d.state);
  *total_bytes = d.state->capacity;
  *free_bytes = d.state->capacity - d.state->used.load();
  return kSuccess;
}

CUresult cuGetErrorName(CUresult error, const char** str) {
  if (!str) return kErrorInvalidValue;
  switch (error) {
    case kSuccess: *str = "CUDA_SUCCESS"; break;
    case kErrorInvalidValue: *str = "CUDA_ERROR_INVALID_VALUE"; break;
    case kErrorOutOfMemory: *str = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case kErrorNotInitialized: *str = "CUDA_ERROR_NOT_INITIALIZED"; break;
    case kErrorNoDevice: *str = "CUDA_ERROR_NO_DEVICE"; break;
    case kErrorInvalidDevice: *str = "CUDA_ERROR_INVALID_DEVICE"; break;
    case kErrorInvalidContext: *str = "CUDA_ERROR_INVALID_CONTEXT"; break;
    case kErrorNotFound: *str = "CUDA_ERROR_NOT_FOUND"; break;
    default: *str = nullptr; return kErrorInvalidValue;
  }
  return kSuccess;
}
CUresult cuGetErrorString(CUresult error, const char** str) {
  if (!str) return kErrorInvalidValue;
  switch (error) {
    case kSuccess: *str = "no error"; break;
    case kErrorInvalidValue: *str = "invalid argument"; break;
    case kErrorOutOfMemory: *str = "out of memory"; break;
    case kErrorNotInitialized: *str = "initialization error"; break;
    case kErrorNoDevice: *str = "no CUDA-capable device is detected"; break;
    case kErrorInvalidDevice: *str = "invalid device ordinal"; break;
    case kErrorInvalidContext: *str = "invalid device context"; break;
    case kErrorNotFound: *str = "named symbol not found"; break;
    default: *str = nullptr; return kErrorInvalidValue;
  }
  return kSuccess;
}

// cuGetProcAddress: the driver entry points by base name ("cuMemAlloc" resolves to cuMemAlloc_v2).
CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int, cuuint64_t, CUdriverProcAddressQueryResult* status);
CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  return cuGetProcAddress_v2(symbol, pfn, version, flags, nullptr);
}
CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int, cuuint64_t, CUdriverProcAddressQueryResult* status) {
  static const std::unordered_map<std::string, void*> table = {
      {"cuInit", (void*)&cuInit},
      {"cuDriverGetVersion", (void*)&cuDriverGetVersion},
      {"cuDeviceGetCount", (void*)&cuDeviceGetCount},
      {"cuDeviceGet", (void*)&cuDeviceGet},
      {"cuDeviceGetName", (void*)&cuDeviceGetName},
      {"cuDeviceTotalMem", (void*)&cuDeviceTotalMem_v2},
      {"cuDeviceGetAttribute", (void*)&cuDeviceGetAttribute},
      {"cuDevicePrimaryCtxRetain", (void*)&cuDevicePrimaryCtxRetain},
      {"cuDevicePrimaryCtxRelease", (void*)&cuDevicePrimaryCtxRelease_v2},
      {"cuCtxCreate", (void*)&cuCtxCreate_v2},
      {"cuCtxDestroy", (void*)&cuCtxDestroy_v2},
      {"cuCtxSetCurrent", (void*)&cuCtxSetCurrent},
      {"cuCtxGetCurrent", (void*)&cuCtxGetCurrent},
      {"cuMemAlloc", (void*)&cuMemAlloc_v2},
      {"cuMemAllocPitch", (void*)&cuMemAllocPitch_v2},
      {"cuMemAllocManaged", (void*)&cuMemAllocManaged},
      {"cuMemFree", (void*)&cuMemFree_v2},
      {"cuMemGetInfo", (void*)&cuMemGetInfo_v2},
      {"cuGetErrorName", (void*)&cuGetErrorName},
      {"cuGetErrorString", (void*)&cuGetErrorString},
      {"cuGetProcAddress", (void*)&cuGetProcAddress_v2},
  };
  if (!symbol || !pfn) return kErrorInvalidValue;
  auto it = table.find(symbol);
  if (it == table.end()) {
    *pfn = nullptr;
    if (status) *status = kProcAddressSymbolNotFound;
    return kErrorNotFound;
  }
  *pfn = it->second;
  if (status) *status = kProcAddressSuccess;
  return kSuccess;
}

}  // extern "C"
