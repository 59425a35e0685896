// libgpumux.so: the LD_PRELOAD interposer that enforces a tenant's memory quota on a shared GPU.
//
// It wraps the driver API's allocation family and memory queries, reached in any of the three ways
// programs reach the driver: direct symbol binding, dlsym() on a dlopen'ed libcuda, and
// cuGetProcAddress (which the CUDA runtime uses for every entry point). Each allocation is reserved
// in the GPU's shared ledger before the driver is called and released if the driver fails, so a
// tenant is refused at exactly its quota however many processes and threads it runs; memory queries
// report the quota as the device's size, so frameworks size their pools to it.
//
// Configured by `gpumux run`: GPUMUX_LEDGER (ledger file) and GPUMUX_TENANT (tenant id). Without
// them the shim passes every call through. If they are set but the ledger cannot be used, it fails
// closed: allocations return CUDA_ERROR_NOT_INITIALIZED and one line says why.
//
// This slice covers cuMemAlloc_v2, cuMemAllocPitch_v2, cuMemAllocManaged, cuMemFree_v2,
// cuMemGetInfo_v2 and cuDeviceTotalMem_v2. Not yet: async/pool/VMM/array allocations, graph memory
// nodes, NVML, compute shares and the launch path (the next slices of this work).
#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "node/ledger/ledger.h"
#include "simgpu/cuda_types.h"

using namespace gpumux::cuda;

namespace {

using DlsymFn = void* (*)(void*, const char*);
using MemAllocFn = CUresult (*)(CUdeviceptr*, size_t);
using MemAllocPitchFn = CUresult (*)(CUdeviceptr*, size_t*, size_t, size_t, unsigned int);
using MemAllocManagedFn = CUresult (*)(CUdeviceptr*, size_t, unsigned int);
using MemFreeFn = CUresult (*)(CUdeviceptr);
using MemGetInfoFn = CUresult (*)(size_t*, size_t*);
using DeviceTotalMemFn = CUresult (*)(size_t*, CUdevice);
using GetProcAddressFn = CUresult (*)(const char*, void**, int, cuuint64_t);
using GetProcAddressV2Fn = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);

DlsymFn RealDlsym() {
  static DlsymFn real = [] {
    for (const char* version : {"GLIBC_2.34", "GLIBC_2.2.5"}) {
      if (void* p = dlvsym(RTLD_NEXT, "dlsym", version)) return reinterpret_cast<DlsymFn>(p);
    }
    return static_cast<DlsymFn>(nullptr);
  }();
  return real;
}

// The driver's own entry point for `name`: looked up past this library (the LD_PRELOAD case), else in
// libcuda.so.1 itself (when this library was loaded after the driver). Null if there is no driver.
template <typename Fn>
Fn Real(const char* name) {
  if (void* p = RealDlsym()(RTLD_NEXT, name)) return reinterpret_cast<Fn>(p);
  static void* driver = [] {
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    return h ? h : dlopen("libcuda.so.1", RTLD_NOW);
  }();
  return driver ? reinterpret_cast<Fn>(RealDlsym()(driver, name)) : nullptr;
}

// Calls the driver's `fn` if it exists; a missing driver answers like the real one would.
template <typename Fn, typename... Args>
CUresult CallReal(Fn fn, Args... args) {
  return fn ? fn(args...) : kErrorNotInitialized;
}

struct Enforcement {
  enum class Mode { kUnset, kPassThrough, kEnforce, kBroken };
  std::atomic<Mode> mode{Mode::kUnset};
  std::optional<gpumux::node::Ledger> ledger;
  std::string tenant;
  int process = -1;
  std::mutex mu;                                   // guards sizes and initialisation
  std::unordered_map<CUdeviceptr, uint64_t> sizes; // this process's reserved allocations
};

Enforcement& State() {
  static Enforcement* e = new Enforcement();  // never destroyed: frees may run during exit
  return *e;
}

void AtExit() {
  Enforcement& e = State();
  std::lock_guard<std::mutex> lock(e.mu);
  if (e.mode == Enforcement::Mode::kEnforce) e.ledger->UnregisterProcess(e.process);
}

void AfterFork() {
  // The child is a new process: it registers on its first allocation; what the parent reserved
  // stays the parent's.
  Enforcement& e = State();
  new (&e.mu) std::mutex();
  e.sizes.clear();
  if (e.mode.load() == Enforcement::Mode::kEnforce) e.mode.store(Enforcement::Mode::kUnset);
}

// Sets the mode on first use. Called with e.mu held.
void Initialise(Enforcement& e) {
  if (e.mode != Enforcement::Mode::kUnset) return;
  const char* path = std::getenv("GPUMUX_LEDGER");
  const char* tenant = std::getenv("GPUMUX_TENANT");
  if (!path || !tenant) {
    e.mode = Enforcement::Mode::kPassThrough;
    return;
  }
  try {
    if (!e.ledger) e.ledger.emplace(gpumux::node::Ledger::Open(path));
    std::optional<int> slot = e.ledger->FindTenant(tenant);
    if (!slot) throw gpumux::node::LedgerError(std::string("tenant '") + tenant + "' is not in the ledger");
    e.process = e.ledger->RegisterProcess(*slot);
    e.tenant = tenant;
    e.mode = Enforcement::Mode::kEnforce;
    static std::once_flag hooks;
    std::call_once(hooks, [] {
      std::atexit(AtExit);
      pthread_atfork(nullptr, nullptr, AfterFork);
    });
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "gpumux: memory quota cannot be enforced, refusing GPU allocations: %s\n", ex.what());
    e.mode = Enforcement::Mode::kBroken;
  }
}

// After the first call a single atomic load: no lock on the allocation path.
void EnsureInitialised(Enforcement& e) {
  if (e.mode.load(std::memory_order_acquire) != Enforcement::Mode::kUnset) return;
  std::lock_guard<std::mutex> lock(e.mu);
  Initialise(e);
}

// One line per refusal, at most one a second per process (a program that retries in a loop would
// flood its log otherwise); the next line counts what was not printed.
void LogRefusal(Enforcement& e, const char* what, uint64_t bytes) {
  static std::atomic<int64_t> last_second{-1};
  static std::atomic<uint64_t> unlogged{0};
  int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                    std::chrono::steady_clock::now().time_since_epoch()).count();
  int64_t last = last_second.load();
  if (last == now || !last_second.compare_exchange_strong(last, now)) {
    ++unlogged;
    return;
  }
  int t = e.ledger->ProcessTenant(e.process);
  uint64_t skipped = unlogged.exchange(0);
  std::fprintf(stderr, "gpumux: tenant '%s' refused %s of %llu bytes: %llu of its %llu-byte quota in use%s\n",
               e.tenant.c_str(), what, (unsigned long long)bytes, (unsigned long long)e.ledger->TenantUsed(t),
               (unsigned long long)e.ledger->TenantQuota(t),
               skipped ? (" (" + std::to_string(skipped) + " more refused since the last line)").c_str() : "");
}

// Reserves, calls the driver, and records or rolls back. `allocate` performs the real call.
template <typename Call>
CUresult Guarded(CUdeviceptr* dptr, uint64_t bytes, const char* what, Call allocate) {
  Enforcement& e = State();
  EnsureInitialised(e);
  if (e.mode == Enforcement::Mode::kPassThrough) return allocate();
  if (e.mode == Enforcement::Mode::kBroken) return kErrorNotInitialized;
  if (!e.ledger->TryReserve(e.process, bytes)) {
    // Dead processes of this tenant may still hold reservations: reclaim once and retry.
    if (e.ledger->ReclaimDead() == 0 || !e.ledger->TryReserve(e.process, bytes)) {
      LogRefusal(e, what, bytes);
      return kErrorOutOfMemory;
    }
  }
  CUresult r = allocate();
  if (r != kSuccess) {
    e.ledger->Release(e.process, bytes);
    return r;
  }
  std::lock_guard<std::mutex> lock(e.mu);
  e.sizes[*dptr] = bytes;
  return r;
}

}  // namespace

extern "C" {

CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytes) {
  static MemAllocFn real = Real<MemAllocFn>("cuMemAlloc_v2");
  if (!dptr) return CallReal(real, dptr, bytes);
  return Guarded(dptr, bytes, "cuMemAlloc", [&] { return CallReal(real, dptr, bytes); });
}

CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height, unsigned int element) {
  static MemAllocPitchFn real = Real<MemAllocPitchFn>("cuMemAllocPitch_v2");
  if (!dptr || !pitch) return CallReal(real, dptr, pitch, width, height, element);
  // The pitch is the driver's to choose; reserve for the widest row it may pick (512-byte aligned).
  uint64_t bytes = uint64_t((width + 511) & ~size_t(511)) * height;
  return Guarded(dptr, bytes, "cuMemAllocPitch", [&] { return CallReal(real, dptr, pitch, width, height, element); });
}

CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytes, unsigned int flags) {
  static MemAllocManagedFn real = Real<MemAllocManagedFn>("cuMemAllocManaged");
  if (!dptr) return CallReal(real, dptr, bytes, flags);
  return Guarded(dptr, bytes, "cuMemAllocManaged", [&] { return CallReal(real, dptr, bytes, flags); });
}

CUresult cuMemFree_v2(CUdeviceptr dptr) {
  static MemFreeFn real = Real<MemFreeFn>("cuMemFree_v2");
  CUresult r = CallReal(real, dptr);
  Enforcement& e = State();
  if (r != kSuccess || e.mode != Enforcement::Mode::kEnforce) return r;
  uint64_t bytes = 0;
  {
    std::lock_guard<std::mutex> lock(e.mu);
    auto it = e.sizes.find(dptr);
    if (it == e.sizes.end()) return r;
    bytes = it->second;
    e.sizes.erase(it);
  }
  e.ledger->Release(e.process, bytes);
  return r;
}

CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  static MemGetInfoFn real = Real<MemGetInfoFn>("cuMemGetInfo_v2");
  CUresult r = CallReal(real, free_bytes, total_bytes);
  Enforcement& e = State();
  EnsureInitialised(e);
  if (r != kSuccess || e.mode != Enforcement::Mode::kEnforce) return r;
  int t = e.ledger->ProcessTenant(e.process);
  uint64_t quota = e.ledger->TenantQuota(t), used = e.ledger->TenantUsed(t);
  uint64_t left = used >= quota ? 0 : quota - used;
  *total_bytes = std::min<uint64_t>(*total_bytes, quota);
  *free_bytes = std::min<uint64_t>(*free_bytes, left);
  return r;
}

CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  static DeviceTotalMemFn real = Real<DeviceTotalMemFn>("cuDeviceTotalMem_v2");
  CUresult r = CallReal(real, bytes, dev);
  Enforcement& e = State();
  EnsureInitialised(e);
  if (r == kSuccess && e.mode == Enforcement::Mode::kEnforce) {
    *bytes = std::min<uint64_t>(*bytes, e.ledger->TenantQuota(e.ledger->ProcessTenant(e.process)));
  }
  return r;
}

// The wrapper for a driver entry point, by the base name cuGetProcAddress uses or the exported
// (versioned) name dlsym uses; null when this library does not wrap it.
static void* Wrapper(const char* name, bool versioned) {
  struct Entry { const char* base; const char* exported; void* fn; };
  static const Entry entries[] = {
      {"cuMemAlloc", "cuMemAlloc_v2", (void*)&cuMemAlloc_v2},
      {"cuMemAllocPitch", "cuMemAllocPitch_v2", (void*)&cuMemAllocPitch_v2},
      {"cuMemAllocManaged", "cuMemAllocManaged", (void*)&cuMemAllocManaged},
      {"cuMemFree", "cuMemFree_v2", (void*)&cuMemFree_v2},
      {"cuMemGetInfo", "cuMemGetInfo_v2", (void*)&cuMemGetInfo_v2},
      {"cuDeviceTotalMem", "cuDeviceTotalMem_v2", (void*)&cuDeviceTotalMem_v2},
  };
  for (const Entry& e : entries) {
    if (std::strcmp(name, versioned ? e.exported : e.base) == 0) return e.fn;
  }
  return nullptr;
}

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* status) {
  static GetProcAddressV2Fn real = Real<GetProcAddressV2Fn>("cuGetProcAddress_v2");
  CUresult r = CallReal(real, symbol, pfn, version, flags, status);
  if (r != kSuccess || !symbol || !pfn) return r;
  if (std::strcmp(symbol, "cuGetProcAddress") == 0) {
    *pfn = (void*)&cuGetProcAddress_v2;  // later lookups through the returned pointer stay wrapped
  } else if (void* w = Wrapper(symbol, false)) {
    *pfn = w;
  }
  return r;
}

CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  return cuGetProcAddress_v2(symbol, pfn, version, flags, nullptr);
}

// dlsym: a program that dlopens libcuda and looks entry points up by name gets the wrappers too.
void* dlsym(void* handle, const char* name) {
  void* real = RealDlsym()(handle, name);
  if (!real || name[0] != 'c' || name[1] != 'u') return real;
  if (std::strcmp(name, "cuGetProcAddress") == 0) return (void*)&cuGetProcAddress;
  if (std::strcmp(name, "cuGetProcAddress_v2") == 0) return (void*)&cuGetProcAddress_v2;
  if (void* w = Wrapper(name, true)) return w;
  return real;
}

}  // extern "C"
