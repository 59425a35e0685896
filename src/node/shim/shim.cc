// libgpumux.so: the LD_PRELOAD interposer that enforces a tenant's memory quota and compute share
// on a shared GPU.
//
// It wraps the driver API's allocation family and memory queries, reached in any of the three ways
// programs reach the driver: direct symbol binding, dlsym() on a dlopen'ed libcuda, and
// cuGetProcAddress (which the CUDA runtime uses for every entry point). Each allocation is reserved
// (in `gpumux run`'s ledger, or as gpumuxd's grant) before the driver is called and released if the
// driver fails, so a tenant is refused at exactly its quota however many processes and threads it
// runs; memory queries report the quota as the device's size, so frameworks size their pools to it.
//
// Every launch passes the compute governor's gate (governor.h): held (sleeping) while its tenant is
// over its cap or weighted share, or while a higher-priority tenant has work in flight. A launch
// that needs nothing of the gate (its tick's launch noted, the gate open) jumps straight to the
// driver (launch_route.h): one pointer loaded, no frame.
//
// Configured by `gpumux run`: GPUMUX_LEDGER (ledger file), GPUMUX_TENANT (tenant id) and GPUMUX_GPU
// (NVML index, for GPU-time measurement). A tenant of several GPUs has one ledger per GPU, both
// lists comma-separated in the order of the device ordinals the program sees: each allocation is
// charged on the GPU of the current context (cuMemCreate: the GPU it is located on; memory located
// on the host is not charged), and memory queries (cuMemGetInfo, cuDeviceTotalMem, NVML by index)
// answer for the GPU asked about. Memory another process allocated and this one opens (IPC
// handles, imported shareable handles) is not allocated here and stays charged to its maker.
// Without them the shim passes every call through. Under gpumuxd (GPUMUX_AGENT: its socket) the
// ledger is a view mapped read-only, memory comes as grants, the process registers with gpumuxd
// before its first call goes through, and the governor follows the gate gpumuxd sets, publishing
// launch activity into the tenant's activity file, which gpumuxd hands it with the registration.
// If they are set but the ledger cannot be used, or gpumuxd does not register the process, it
// fails closed: allocations return CUDA_ERROR_NOT_INITIALIZED and one line says why.
//
// Covered: cuMemAlloc, cuMemAllocPitch, cuMemAllocManaged, cuMemAllocAsync,
// cuMemAllocFromPoolAsync, cuMemCreate (virtual memory), cuArrayCreate, cuArray3DCreate,
// cuMipmappedArrayCreate and their frees; graph memory nodes (reserved when the graph is
// instantiated, released with the executable graph); cuMemGetInfo, cuDeviceTotalMem; NVML's memory
// info and process list (`nvidia-smi` inside the tenant sees its quota and its own processes);
// launches: cuLaunchKernel, cuLaunchKernelEx, cuLaunchCooperativeKernel, cuGraphLaunch, each with
// its per-thread-stream (_ptsz) variant; synchronising calls (cuCtxSynchronize, cuStreamSynchronize
// and its _ptsz variant, cuEventSynchronize), which a high-priority tenant's processes stamp so
// that others see its bursts end (burst_stamps.h).
#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "abi/driver_api.h"
#include "abi/nvml_api.h"
#include "base/comma_list.h"
#include "node/ledger/activity.h"
#include "node/ledger/ledger.h"
#include "node/shim/burst_stamps.h"
#include "node/shim/governor.h"
#include "node/shim/launch_route.h"
#include "node/shim/memory_grant.h"

using namespace gpumux::cuda;

namespace {

using DlsymFn = void* (*)(void*, const char*);

DlsymFn RealDlsym() {
  static DlsymFn real = [] {
    for (const char* version : {"GLIBC_2.34", "GLIBC_2.2.5"}) {
      if (void* p = dlvsym(RTLD_NEXT, "dlsym", version)) return reinterpret_cast<DlsymFn>(p);
    }
    return static_cast<DlsymFn>(nullptr);
  }();
  return real;
}

void* OpenLibrary(const char* soname) {
  void* h = dlopen(soname, RTLD_NOW | RTLD_NOLOAD);
  return h ? h : dlopen(soname, RTLD_NOW);
}

// The real entry point for `name`: looked up past this library (the LD_PRELOAD case), else in
// libcuda.so.1 or libnvidia-ml.so.1 itself (when the program loaded it with dlopen, out of this
// library's reach). Null if the library is not there.
template <typename Fn>
Fn Real(const char* name) {
  if (void* p = RealDlsym()(RTLD_NEXT, name)) return reinterpret_cast<Fn>(p);
  void* lib = nullptr;
  if (std::strncmp(name, "nvml", 4) == 0) {
    static void* nvml = OpenLibrary("libnvidia-ml.so.1");
    lib = nvml;
  } else {
    static void* driver = OpenLibrary("libcuda.so.1");
    lib = driver;
  }
  return lib ? reinterpret_cast<Fn>(RealDlsym()(lib, name)) : nullptr;
}

// Calls the driver's `fn` if it exists; a missing driver answers like the real one would.
template <typename Fn, typename... Args>
CUresult CallReal(Fn fn, Args... args) {
  return fn ? fn(args...) : kErrorNotInitialized;
}

// One GPU of the tenant: its ledger (or gpumuxd's view of it), the tenant's slot there, and this
// process's registration, governor and launch forecast on it.
struct TenantGpu {
  // First, so that what a gated launch reads of them shares the cache line of Enforcement's head.
  gpumux::shim::Governor governor;
  gpumux::shim::LaunchForecast forecast;
  std::optional<gpumux::node::Ledger> ledger;
  // Under gpumuxd: memory comes as grants from it (memory_grant.h); the ledger then holds only
  // compute state and a view of the tenant's usage. Without: reservations in the ledger.
  std::optional<gpumux::shim::MemoryGrant> grant;
  int tenant_slot = -1;
  int process = -1;    // in the ledger; -1 under gpumuxd, which keeps processes itself
  int nvml_index = 0;  // NVML's index of the GPU (GPUMUX_GPU)
  gpumux::shim::BurstStamps stamps;  // a high-priority tenant's
};

// Which of the tenant's GPUs a call is for, besides an index into Enforcement::gpus.
constexpr int kCurrentGpu = -1;  // the GPU of the calling thread's current context
constexpr int kNotTenants = -2;  // a GPU that is not the tenant's, or no GPU could be told

// An allocation this process reserved: its bytes and the tenant GPU they are charged to.
struct Held {
  uint64_t bytes;
  int gpu;
};

struct alignas(64) Enforcement {
  enum class Mode { kUnset, kPassThrough, kEnforce, kBroken };
  // What every intercepted call reads first, together in one cache line.
  std::atomic<Mode> mode{Mode::kUnset};
  int gpu_count = 0;    // set once, before mode becomes kEnforce
  bool stamps = false;  // some GPU's BurstStamps is on; set once, before mode becomes kEnforce
  // The tenant's GPUs in the order the program sees them (device ordinal i is gpus[i]), one
  // unless the tenant spans several.
  TenantGpu gpus[gpumux::node::kMaxTenantGpus];
  std::optional<gpumux::node::ActivityWriter> activity;  // under gpumuxd
  std::string tenant;
  std::mutex mu;  // guards sizes, graph_bytes and initialisation
  // This process's reserved allocations by kind of handle (device pointer, VMM handle, array,
  // executable graph).
  std::unordered_map<uint64_t, Held> sizes[4];
  // Bytes of the memory nodes of each graph not yet instantiated.
  std::unordered_map<CUgraph, uint64_t> graph_bytes;
};

// Launch entry points of the driver's signatures: the driver's own, resolved before the first
// Initialise sets `mode` (a stand-in answering as CallReal does for one the driver lacks), or the
// shim's gated paths (kGatedRoute).
struct DriverLaunches {
  decltype(&cuLaunchKernel) kernel;
  decltype(&cuLaunchKernel_ptsz) kernel_ptsz;
  decltype(&cuLaunchKernelEx) kernel_ex;
  decltype(&cuLaunchKernelEx_ptsz) kernel_ex_ptsz;
  decltype(&cuLaunchCooperativeKernel) cooperative;
  decltype(&cuLaunchCooperativeKernel_ptsz) cooperative_ptsz;
  decltype(&cuGraphLaunch) graph;
  decltype(&cuGraphLaunch_ptsz) graph_ptsz;
};

extern const DriverLaunches kGatedRoute;  // the gated paths, defined with them below

// The shim's globals every launch reads, aligned so that the way launches go and the first seven
// of the driver's entry points (the last is a per-thread-stream graph launch) share one cache
// line.
struct alignas(64) LaunchGlobals {
  // Which entry points launches call (launch_route.h): &driver while a launch needs nothing of the
  // shim (RouteLaunchesStraight), else &kGatedRoute.
  std::atomic<const DriverLaunches*> route{&kGatedRoute};
  DriverLaunches driver{};
  bool resolved = false;                     // driver holds the driver's entry points
  std::atomic<Enforcement*> state{nullptr};  // the process's one Enforcement, once made
};
LaunchGlobals launch_globals;

// That Enforcement, made on first use (the shim is preloaded: calls may come before its
// constructors ran). Hot path: one load once made; the function-local static's guard is only on
// the first call of each thread that comes before it is published.
[[gnu::noinline]] Enforcement& MakeState() {
  static Enforcement* e = new Enforcement();  // never destroyed: frees may run during exit
  launch_globals.state.store(e, std::memory_order_release);
  return *e;
}
inline Enforcement& State() {
  Enforcement* e = launch_globals.state.load(std::memory_order_acquire);
  return e ? *e : MakeState();
}

void AtExit() {
  Enforcement& e = State();
  std::lock_guard<std::mutex> lock(e.mu);
  for (int g = 0; g < e.gpu_count; ++g) {
    TenantGpu& gpu = e.gpus[g];
    gpu.governor.Stop();
    if (e.mode == Enforcement::Mode::kEnforce && gpu.process >= 0)
      gpu.ledger->UnregisterProcess(gpu.process);
    if (gpu.grant) gpu.grant->ReturnAll();
  }
}

void AfterFork() {
  // The child is a new process: it registers on its first allocation; what the parent reserved
  // stays the parent's.
  Enforcement& e = State();
  new (&e.mu) std::mutex();
  for (auto& m : e.sizes) m.clear();
  e.graph_bytes.clear();
  for (int g = 0; g < e.gpu_count; ++g) {
    e.gpus[g].governor.Forget();
    if (e.gpus[g].grant) e.gpus[g].grant->Forget();
  }
  if (e.mode.load() == Enforcement::Mode::kEnforce) e.mode.store(Enforcement::Mode::kUnset);
  launch_globals.route.store(&kGatedRoute);  // the child's first launch initialises it again
}

// Sets the mode on first use. Called with e.mu held.
void Initialise(Enforcement& e) {
  if (e.mode != Enforcement::Mode::kUnset) return;
  const char* paths = std::getenv("GPUMUX_LEDGER");
  const char* tenant = std::getenv("GPUMUX_TENANT");
  if (!paths || !tenant) {
    e.mode = Enforcement::Mode::kPassThrough;
    return;
  }
  try {
    const char* agent = std::getenv("GPUMUX_AGENT");
    std::vector<std::string> ledgers = gpumux::SplitCommas(paths);
    const char* gpu_indices = std::getenv("GPUMUX_GPU");
    std::vector<std::string> indices = gpumux::SplitCommas(gpu_indices ? gpu_indices : "");
    if (int(ledgers.size()) > gpumux::node::kMaxTenantGpus)
      throw gpumux::BadInput("GPUMUX_LEDGER lists more than 8 GPUs");
    e.tenant = tenant;
    e.gpu_count = int(ledgers.size());
    for (int g = 0; g < e.gpu_count; ++g) {
      TenantGpu& gpu = e.gpus[g];
      if (!gpu.ledger) {
        gpu.ledger.emplace(agent ? gpumux::node::Ledger::OpenReadOnly(ledgers[g])
                                 : gpumux::node::Ledger::Open(ledgers[g]));
      }
      std::optional<int> slot = gpu.ledger->FindTenant(tenant);
      if (!slot)
        throw gpumux::NotFound(std::string("tenant '") + tenant + "' is not in the ledger " +
                               ledgers[g]);
      gpu.tenant_slot = *slot;
      gpu.nvml_index = size_t(g) < indices.size() ? std::atoi(indices[g].c_str()) : g;
    }
    // Every ledger found the tenant: only now register and start a governor on each.
    const gpumux::shim::EventCalls events = {
        Real<decltype(&cuEventCreate)>("cuEventCreate"),
        Real<decltype(&cuEventRecord)>("cuEventRecord"),
        Real<decltype(&cuEventQuery)>("cuEventQuery"),
        Real<decltype(&cuEventElapsedTime)>("cuEventElapsedTime"),
        Real<decltype(&cuEventDestroy_v2)>("cuEventDestroy_v2"),
        Real<decltype(&cuStreamIsCapturing)>("cuStreamIsCapturing")};
    for (int g = 0; g < e.gpu_count; ++g) {
      TenantGpu& gpu = e.gpus[g];
      int slot = gpu.tenant_slot;
      const bool high = gpu.ledger->TenantPriority(slot) == gpumux::node::Priority::kHigh;
      gpu.forecast.Start(&*gpu.ledger, slot, events);
      gpu.governor.Tick(&gpu.forecast);
      if (agent) {
        if (!gpu.grant) gpu.grant.emplace(agent, tenant, g);
        int activity = -1;  // the tenant's activity file, handed with the first answer
        if (std::string why; !gpu.grant->Register(&why, e.activity ? nullptr : &activity)) {
          throw gpumux::PermissionDenied("gpumuxd (" + std::string(agent) +
                                         ") did not register this process under tenant '" + tenant +
                                         "': " + why);
        }
        if (activity >= 0) e.activity.emplace(activity);
        gpu.governor.Follow(&*gpu.ledger, ledgers[g], slot, e.activity ? &*e.activity : nullptr, g);
        gpu.stamps.Start(e.activity ? e.activity->burst(g) : nullptr, high);
      } else {
        gpu.process = gpu.ledger->RegisterProcess(slot);
        gpu.stamps.Start(gpu.ledger->BurstOf(slot), high);
        gpu.governor.Start(&*gpu.ledger, gpu.process, gpu.nvml_index);
      }
      e.stamps = e.stamps || gpu.stamps.on();
    }
    e.mode = Enforcement::Mode::kEnforce;
    static std::once_flag hooks;
    std::call_once(hooks, [] {
      std::atexit(AtExit);
      pthread_atfork(nullptr, nullptr, AfterFork);
    });
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "gpumux: memory quota cannot be enforced, refusing GPU allocations: %s\n",
                 ex.what());
    e.mode = Enforcement::Mode::kBroken;
  }
}

// An entry point the driver lacks answers as CallReal does for it.
template <typename... Args>
CUresult MissingEntry(Args...) {
  return kErrorNotInitialized;
}
template <typename... Args>
auto OrMissing(CUresult (*fn)(Args...)) -> CUresult (*)(Args...) {
  return fn ? fn : &MissingEntry<Args...>;
}

// launch_route.h's reset: the next launches take the gated paths.
void RouteLaunchesThroughTheGate() {
  launch_globals.route.store(&kGatedRoute, std::memory_order_relaxed);
}

// The first call's: resolves the driver's launch entry points, then initialises.
[[gnu::noinline]] void InitialiseOnce(Enforcement& e) {
  std::lock_guard<std::mutex> lock(e.mu);
  if (!launch_globals.resolved) {
    launch_globals.driver = {
        OrMissing(Real<decltype(&cuLaunchKernel)>("cuLaunchKernel")),
        OrMissing(Real<decltype(&cuLaunchKernel_ptsz)>("cuLaunchKernel_ptsz")),
        OrMissing(Real<decltype(&cuLaunchKernelEx)>("cuLaunchKernelEx")),
        OrMissing(Real<decltype(&cuLaunchKernelEx_ptsz)>("cuLaunchKernelEx_ptsz")),
        OrMissing(Real<decltype(&cuLaunchCooperativeKernel)>("cuLaunchCooperativeKernel")),
        OrMissing(
            Real<decltype(&cuLaunchCooperativeKernel_ptsz)>("cuLaunchCooperativeKernel_ptsz")),
        OrMissing(Real<decltype(&cuGraphLaunch)>("cuGraphLaunch")),
        OrMissing(Real<decltype(&cuGraphLaunch_ptsz)>("cuGraphLaunch_ptsz")),
    };
    launch_globals.resolved = true;
    gpumux::shim::launch_route_reset.store(&RouteLaunchesThroughTheGate, std::memory_order_release);
  }
  Initialise(e);
}
// After the first call a single acquire load: no lock on the allocation path.
inline void EnsureInitialised(Enforcement& e) {
  if (e.mode.load(std::memory_order_acquire) == Enforcement::Mode::kUnset) [[unlikely]]
    InitialiseOnce(e);
}

// The tenant GPU that `which` names (kCurrentGpu: the current context's device, asked of the
// driver only when the tenant spans several), or kNotTenants. Hot path: one comparison for a tenant
// of one GPU.
[[gnu::noinline]] int TenantGpuIndexOfMany(Enforcement& e, int which) {
  if (which == kCurrentGpu) {
    static auto get_device = Real<decltype(&cuCtxGetDevice)>("cuCtxGetDevice");
    CUdevice dev = -1;
    if (!get_device || get_device(&dev) != kSuccess) return kNotTenants;
    which = dev;
  }
  return which >= 0 && which < e.gpu_count ? which : kNotTenants;
}
inline int TenantGpuIndex(Enforcement& e, int which) {
  if (which == kCurrentGpu && e.gpu_count == 1) return 0;
  return TenantGpuIndexOfMany(e, which);
}

// One line per refusal, at most one a second per process (a program that retries in a loop would
// flood its log otherwise); the next line counts what was not printed.
void LogRefusal(Enforcement& e, int g, const char* what, uint64_t bytes) {
  static std::atomic<int64_t> last_second{-1};
  static std::atomic<uint64_t> unlogged{0};
  int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                    std::chrono::steady_clock::now().time_since_epoch())
                    .count();
  int64_t last = last_second.load();
  if (last == now || !last_second.compare_exchange_strong(last, now)) {
    ++unlogged;
    return;
  }
  uint64_t skipped = unlogged.exchange(0);
  std::string where = e.gpu_count > 1 ? " on its GPU " + std::to_string(g) : "";
  if (g == kNotTenants) {
    std::fprintf(stderr, "gpumux: tenant '%s' refused %s of %llu bytes: not on one of its GPUs\n",
                 e.tenant.c_str(), what, (unsigned long long)bytes);
    return;
  }
  const TenantGpu& gpu = e.gpus[g];
  std::fprintf(
      stderr,
      "gpumux: tenant '%s' refused %s of %llu bytes%s: %llu of its %llu-byte quota in use%s\n",
      e.tenant.c_str(), what, (unsigned long long)bytes, where.c_str(),
      (unsigned long long)gpu.ledger->TenantUsed(gpu.tenant_slot),
      (unsigned long long)gpu.ledger->TenantQuota(gpu.tenant_slot),
      skipped ? (" (" + std::to_string(skipped) + " more refused since the last line)").c_str()
              : "");
}

enum Kind { kPointer = 0, kVmmHandle = 1, kArray = 2, kGraphExec = 3 };

// Hot path: reserves `bytes` on tenant GPU `g` for this process before the driver is called.
bool Reserve(Enforcement& e, int g, uint64_t bytes) {
  TenantGpu& gpu = e.gpus[g];
  if (gpu.grant) return gpu.grant->Take(bytes);
  if (gpu.ledger->TryReserve(gpu.process, bytes)) return true;
  // Dead processes of this tenant may still hold reservations: reclaim once and retry.
  return gpu.ledger->ReclaimDead() != 0 && gpu.ledger->TryReserve(gpu.process, bytes);
}

void Unreserve(Enforcement& e, int g, uint64_t bytes) {
  TenantGpu& gpu = e.gpus[g];
  if (gpu.grant) {
    gpu.grant->Give(bytes);
  } else {
    gpu.ledger->Release(gpu.process, bytes);
  }
}

// Reserves on the tenant GPU `which` names, calls the driver (`allocate`), and records the new
// handle (`handle()`) or rolls back.
template <typename Call, typename Handle>
CUresult Guarded(Kind kind, int which, uint64_t bytes, const char* what, Call allocate,
                 Handle handle) {
  Enforcement& e = State();
  EnsureInitialised(e);
  if (e.mode == Enforcement::Mode::kPassThrough) return allocate();
  if (e.mode == Enforcement::Mode::kBroken) return kErrorNotInitialized;
  int g = TenantGpuIndex(e, which);
  if (g == kNotTenants || !Reserve(e, g, bytes)) {
    LogRefusal(e, g, what, bytes);
    return kErrorOutOfMemory;
  }
  CUresult r = allocate();
  if (r != kSuccess) {
    Unreserve(e, g, bytes);
    return r;
  }
  std::lock_guard<std::mutex> lock(e.mu);
  e.sizes[kind][handle()] = {bytes, g};
  return r;
}

// After the driver freed `handle`, returns its reservation to the tenant.
void Forget(Kind kind, uint64_t handle) {
  Enforcement& e = State();
  if (e.mode != Enforcement::Mode::kEnforce) return;
  Held held;
  {
    std::lock_guard<std::mutex> lock(e.mu);
    auto it = e.sizes[kind].find(handle);
    if (it == e.sizes[kind].end()) return;
    held = it->second;
    e.sizes[kind].erase(it);
  }
  Unreserve(e, held.gpu, held.bytes);
}

// The tenant's quota and usage on the GPU `which` names, if this process is enforcing and it is
// one of the tenant's: what this process may still allocate there is quota - used.
bool TenantView(int which, uint64_t* quota, uint64_t* used) {
  Enforcement& e = State();
  EnsureInitialised(e);
  if (e.mode != Enforcement::Mode::kEnforce) return false;
  int g = TenantGpuIndex(e, which);
  if (g == kNotTenants) return false;
  const TenantGpu& gpu = e.gpus[g];
  *quota = gpu.ledger->TenantQuota(gpu.tenant_slot);
  *used = gpu.ledger->TenantUsed(gpu.tenant_slot);
  // gpumuxd counts this process's unspent credit as used; it is this process's to allocate.
  if (gpu.grant) *used -= std::min(*used, gpu.grant->credit());
  return true;
}

// The tenant GPU an NVML device is (by NVML's index), or kNotTenants. A tenant of one GPU whose
// NVML cannot tell the index is taken to ask of that GPU.
int TenantGpuOfNvml(nvmlDevice_t device) {
  Enforcement& e = State();
  EnsureInitialised(e);
  if (e.mode != Enforcement::Mode::kEnforce) return kNotTenants;
  static auto get_index = Real<decltype(&nvmlDeviceGetIndex)>("nvmlDeviceGetIndex");
  unsigned int index = 0;
  if (!get_index || get_index(device, &index) != gpumux::nvml::kSuccess)
    return e.gpu_count == 1 ? 0 : kNotTenants;
  for (int g = 0; g < e.gpu_count; ++g)
    if (e.gpus[g].nvml_index == int(index)) return g;
  return kNotTenants;
}

// NVML memory info as the tenant sees it: its quota as the total, its usage as used.
template <typename Memory>
nvmlReturn_t TenantMemory(nvmlDevice_t device, nvmlReturn_t r, Memory* m) {
  uint64_t quota, used;
  if (r != gpumux::nvml::kSuccess) return r;
  int g = TenantGpuOfNvml(device);
  if (g == kNotTenants || !TenantView(g, &quota, &used)) return r;
  m->total = std::min<unsigned long long>(m->total, quota);
  m->used = used;
  m->free = used >= m->total ? 0 : m->total - used;
  return r;
}

// A launch that does not go straight (LaunchGoesStraight) calls this before the driver, with the
// work it launches (a function or an executable graph) and its stream; it returns the tenant GPU
// it gated on. No lock, no system call while the tenant is within its share and no high-priority
// neighbour has a rhythm (and, for a tenant of several GPUs, the driver's current device).
[[gnu::always_inline]] inline int Gate(const void* work, CUstream stream) {
  Enforcement& e = State();
  EnsureInitialised(e);
  if (e.mode.load(std::memory_order_relaxed) != Enforcement::Mode::kEnforce) return kNotTenants;
  int g = TenantGpuIndex(e, kCurrentGpu);
  if (g == kNotTenants) return g;
  e.gpus[g].governor.BeforeLaunch();
  e.gpus[g].stamps.Launched();
  e.gpus[g].forecast.Before(work, stream);
  return g;
}
// Every synchronising call runs through this: a high-priority process stamps entering and
// returning (burst_stamps.h). Hot path: one acquire load and one branch for other processes.
template <typename Call>
CUresult Synchronising(Call call) {
  Enforcement& e = State();
  EnsureInitialised(e);
  int g = kNotTenants;
  if (e.mode.load(std::memory_order_relaxed) == Enforcement::Mode::kEnforce && e.stamps)
    g = TenantGpuIndex(e, kCurrentGpu);
  if (g == kNotTenants) return call();
  e.gpus[g].stamps.Synchronising(true);
  CUresult r = call();
  e.gpus[g].stamps.Synchronising(false);
  return r;
}
// Whether a launch needs nothing of the shim but the driver: gpumux does not govern this process,
// or its tenant has one GPU, whose gate is open with this tick's launch noted, no forecast that
// could hold or time it and no stamps. Asked by a gated launch (GatedLaunch), and again by
// RouteLaunchesStraight.
[[gnu::always_inline]] inline bool LaunchGoesStraight() {
  Enforcement* e = launch_globals.state.load(std::memory_order_acquire);
  if (!e) return false;
  Enforcement::Mode mode = e->mode.load(std::memory_order_acquire);
  if (mode != Enforcement::Mode::kEnforce) return mode != Enforcement::Mode::kUnset;
  return e->gpu_count == 1 && !e->stamps && e->gpus[0].governor.Open() && !e->gpus[0].forecast.on();
}

// Launches go straight from here on, unless something changed meanwhile that needs the gate
// (launch_route.h: the store, a fence, the check again, as the other side stores, fences, resets).
[[gnu::noinline]] void RouteLaunchesStraight() {
  launch_globals.route.store(&launch_globals.driver, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!LaunchGoesStraight()) RouteLaunchesThroughTheGate();
}

// A launch through the gated paths: the gate, then the driver's entry point `entry` with the
// call's own arguments, then, where something follows the launch (a high-priority process stamps
// its return; a launch the forecast timed records its end), that. A launch that finds nothing to
// do routes the next ones straight to the driver.
template <typename Fn, typename... Args>
[[gnu::noinline]] CUresult GatedLaunch(Fn DriverLaunches::*entry, const void* work, CUstream stream,
                                       Args... args) {
  int g = Gate(work, stream);  // initialises: launch_globals.driver is resolved from here on
  if (LaunchGoesStraight()) RouteLaunchesStraight();
  Fn real = launch_globals.driver.*entry;
  if (g == kNotTenants || !(State().stamps || gpumux::shim::LaunchForecast::Timing()))
    return CallReal(real, args...);
  CUresult r = CallReal(real, args...);
  TenantGpu& gpu = State().gpus[g];
  gpu.stamps.LaunchReturned();
  gpu.forecast.After(work, stream, r == kSuccess);
  return r;
}

// What a launch entry point launches and on which stream, from its own arguments.
struct Launched {
  const void* work;
  CUstream stream;
};
Launched OfKernel(CUfunction f, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                  unsigned, CUstream stream, void**, void**) {
  return {f, stream};
}
Launched OfKernelEx(const CUlaunchConfig* config, CUfunction f, void**, void**) {
  return {f, config ? config->hStream : nullptr};
}
Launched OfCooperative(CUfunction f, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                       unsigned, CUstream stream, void**) {
  return {f, stream};
}
Launched OfGraph(CUgraphExec exec, CUstream stream) { return {exec, stream}; }

// The gated path of entry point `entry`, with its parameters (`locate` finds the work and stream
// among them).
template <auto entry, auto locate, typename Fn>
struct GatedEntry;
template <auto entry, auto locate, typename... Args>
struct GatedEntry<entry, locate, CUresult (*)(Args...)> {
  static CUresult Call(Args... args) {
    Launched l = locate(args...);
    return GatedLaunch(entry, l.work, l.stream, args...);
  }
};
template <auto entry, auto locate>
constexpr auto kGated =
    &GatedEntry<entry, locate,
                std::remove_reference_t<decltype(std::declval<DriverLaunches&>().*entry)>>::Call;

constinit const DriverLaunches kGatedRoute = {
    kGated<&DriverLaunches::kernel, &OfKernel>,
    kGated<&DriverLaunches::kernel_ptsz, &OfKernel>,
    kGated<&DriverLaunches::kernel_ex, &OfKernelEx>,
    kGated<&DriverLaunches::kernel_ex_ptsz, &OfKernelEx>,
    kGated<&DriverLaunches::cooperative, &OfCooperative>,
    kGated<&DriverLaunches::cooperative_ptsz, &OfCooperative>,
    kGated<&DriverLaunches::graph, &OfGraph>,
    kGated<&DriverLaunches::graph_ptsz, &OfGraph>,
};

// Every launch entry point calls the entry point of the way launches go now, in tail position with
// its own arguments. Hot path: two loads in one cache line and a jump; the shim keeps no frame and
// moves no argument (a frame kept across an 11-argument launch cost ~30-50 ns a launch on the
// 2-core development machine, and a test before the jump, with a call on each of its branches,
// made the compiler reload the arguments passed on the stack and store them back: BM_Launch_Added).
inline const DriverLaunches& Route() {
  // Relaxed, and no weaker for the reader than consume: the route points to kGatedRoute (constant)
  // or to launch_globals.driver, which the thread that first stores that route (after its own
  // acquire of the mode set after them) and every later one read as written, and the entry loaded
  // through the pointer depends on it, which orders the two loads on every processor gpumux runs
  // on. An acquire here is a compiler barrier that made GCC reload and store back the arguments
  // passed on the stack before the jump.
  return *launch_globals.route.load(std::memory_order_relaxed);
}

}  // namespace

extern "C" {

CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytes) {
  static auto real = Real<decltype(&cuMemAlloc_v2)>("cuMemAlloc_v2");
  if (!dptr) return CallReal(real, dptr, bytes);
  return Guarded(
      kPointer, kCurrentGpu, bytes, "cuMemAlloc", [&] { return CallReal(real, dptr, bytes); },
      [&] { return *dptr; });
}

CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height,
                            unsigned int element) {
  static auto real = Real<decltype(&cuMemAllocPitch_v2)>("cuMemAllocPitch_v2");
  if (!dptr || !pitch) return CallReal(real, dptr, pitch, width, height, element);
  // The pitch is the driver's to choose; reserve for the widest row it may pick (512-byte aligned).
  uint64_t bytes = uint64_t((width + 511) & ~size_t(511)) * height;
  return Guarded(
      kPointer, kCurrentGpu, bytes, "cuMemAllocPitch",
      [&] { return CallReal(real, dptr, pitch, width, height, element); }, [&] { return *dptr; });
}

CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytes, unsigned int flags) {
  static auto real = Real<decltype(&cuMemAllocManaged)>("cuMemAllocManaged");
  if (!dptr) return CallReal(real, dptr, bytes, flags);
  return Guarded(
      kPointer, kCurrentGpu, bytes, "cuMemAllocManaged",
      [&] { return CallReal(real, dptr, bytes, flags); }, [&] { return *dptr; });
}

CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytes, CUstream stream) {
  static auto real = Real<decltype(&cuMemAllocAsync)>("cuMemAllocAsync");
  if (!dptr) return CallReal(real, dptr, bytes, stream);
  return Guarded(
      kPointer, kCurrentGpu, bytes, "cuMemAllocAsync",
      [&] { return CallReal(real, dptr, bytes, stream); }, [&] { return *dptr; });
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool,
                                 CUstream stream) {
  static auto real = Real<decltype(&cuMemAllocFromPoolAsync)>("cuMemAllocFromPoolAsync");
  if (!dptr) return CallReal(real, dptr, bytes, pool, stream);
  return Guarded(
      kPointer, kCurrentGpu, bytes, "cuMemAllocFromPoolAsync",
      [&] { return CallReal(real, dptr, bytes, pool, stream); }, [&] { return *dptr; });
}

// Per-thread-default-stream variants (what cuGetProcAddress returns to a program built with
// --default-stream per-thread): the same guard around the driver's own _ptsz entry points.
CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytes, CUstream stream) {
  static auto real = Real<decltype(&cuMemAllocAsync_ptsz)>("cuMemAllocAsync_ptsz");
  if (!dptr) return CallReal(real, dptr, bytes, stream);
  return Guarded(
      kPointer, kCurrentGpu, bytes, "cuMemAllocAsync",
      [&] { return CallReal(real, dptr, bytes, stream); }, [&] { return *dptr; });
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool,
                                      CUstream stream) {
  static auto real = Real<decltype(&cuMemAllocFromPoolAsync_ptsz)>("cuMemAllocFromPoolAsync_ptsz");
  if (!dptr) return CallReal(real, dptr, bytes, pool, stream);
  return Guarded(
      kPointer, kCurrentGpu, bytes, "cuMemAllocFromPoolAsync",
      [&] { return CallReal(real, dptr, bytes, pool, stream); }, [&] { return *dptr; });
}

// Charged to the GPU the allocation is located on; memory located on the host (CUDA 12.2+) holds
// none of a GPU's and is not charged.
CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t bytes,
                     const CUmemAllocationProp* prop, unsigned long long flags) {
  static auto real = Real<decltype(&cuMemCreate)>("cuMemCreate");
  if (!handle || !prop || prop->location.type != kMemLocationDevice)
    return CallReal(real, handle, bytes, prop, flags);
  return Guarded(
      kVmmHandle, prop->location.id, bytes, "cuMemCreate",
      [&] { return CallReal(real, handle, bytes, prop, flags); }, [&] { return *handle; });
}

CUresult cuArrayCreate_v2(CUarray* array, const CUDA_ARRAY_DESCRIPTOR* desc) {
  static auto real = Real<decltype(&cuArrayCreate_v2)>("cuArrayCreate_v2");
  if (!array || !desc) return CallReal(real, array, desc);
  return Guarded(
      kArray, kCurrentGpu, ArrayBytes(*desc), "cuArrayCreate",
      [&] { return CallReal(real, array, desc); },
      [&] { return reinterpret_cast<uint64_t>(*array); });
}

CUresult cuArray3DCreate_v2(CUarray* array, const CUDA_ARRAY3D_DESCRIPTOR* desc) {
  static auto real = Real<decltype(&cuArray3DCreate_v2)>("cuArray3DCreate_v2");
  if (!array || !desc) return CallReal(real, array, desc);
  return Guarded(
      kArray, kCurrentGpu, Array3DBytes(*desc), "cuArray3DCreate",
      [&] { return CallReal(real, array, desc); },
      [&] { return reinterpret_cast<uint64_t>(*array); });
}

CUresult cuMipmappedArrayCreate(CUmipmappedArray* array, const CUDA_ARRAY3D_DESCRIPTOR* desc,
                                unsigned int levels) {
  static auto real = Real<decltype(&cuMipmappedArrayCreate)>("cuMipmappedArrayCreate");
  if (!array || !desc) return CallReal(real, array, desc, levels);
  return Guarded(
      kArray, kCurrentGpu, Array3DBytes(*desc, levels), "cuMipmappedArrayCreate",
      [&] { return CallReal(real, array, desc, levels); },
      [&] { return reinterpret_cast<uint64_t>(*array); });
}

CUresult cuMipmappedArrayDestroy(CUmipmappedArray array) {
  static auto real = Real<decltype(&cuMipmappedArrayDestroy)>("cuMipmappedArrayDestroy");
  CUresult r = CallReal(real, array);
  if (r == kSuccess) Forget(kArray, reinterpret_cast<uint64_t>(array));
  return r;
}

CUresult cuMemFree_v2(CUdeviceptr dptr) {
  static auto real = Real<decltype(&cuMemFree_v2)>("cuMemFree_v2");
  CUresult r = CallReal(real, dptr);
  if (r == kSuccess) Forget(kPointer, dptr);
  return r;
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream) {
  static auto real = Real<decltype(&cuMemFreeAsync)>("cuMemFreeAsync");
  CUresult r = CallReal(real, dptr, stream);
  if (r == kSuccess) Forget(kPointer, dptr);
  return r;
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream) {
  static auto real = Real<decltype(&cuMemFreeAsync_ptsz)>("cuMemFreeAsync_ptsz");
  CUresult r = CallReal(real, dptr, stream);
  if (r == kSuccess) Forget(kPointer, dptr);
  return r;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  static auto real = Real<decltype(&cuMemRelease)>("cuMemRelease");
  CUresult r = CallReal(real, handle);
  if (r == kSuccess) Forget(kVmmHandle, handle);
  return r;
}

CUresult cuArrayDestroy(CUarray array) {
  static auto real = Real<decltype(&cuArrayDestroy)>("cuArrayDestroy");
  CUresult r = CallReal(real, array);
  if (r == kSuccess) Forget(kArray, reinterpret_cast<uint64_t>(array));
  return r;
}

CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  static auto real = Real<decltype(&cuMemGetInfo_v2)>("cuMemGetInfo_v2");
  CUresult r = CallReal(real, free_bytes, total_bytes);
  uint64_t quota, used;
  if (r != kSuccess || !TenantView(kCurrentGpu, &quota, &used)) return r;
  *total_bytes = std::min<uint64_t>(*total_bytes, quota);
  *free_bytes = std::min<uint64_t>(*free_bytes, used >= quota ? 0 : quota - used);
  return r;
}

CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  static auto real = Real<decltype(&cuDeviceTotalMem_v2)>("cuDeviceTotalMem_v2");
  CUresult r = CallReal(real, bytes, dev);
  uint64_t quota, used;
  if (r == kSuccess && TenantView(dev, &quota, &used)) *bytes = std::min<uint64_t>(*bytes, quota);
  return r;
}

// Launches: the governor's gate, then the driver.
CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                        unsigned int bx, unsigned int by, unsigned int bz,
                        unsigned int shared_bytes, CUstream stream, void** params, void** extra) {
  return Route().kernel(f, gx, gy, gz, bx, by, bz, shared_bytes, stream, params, extra);
}
CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                             unsigned int bx, unsigned int by, unsigned int bz,
                             unsigned int shared_bytes, CUstream stream, void** params,
                             void** extra) {
  return Route().kernel_ptsz(f, gx, gy, gz, bx, by, bz, shared_bytes, stream, params, extra);
}
CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  return Route().kernel_ex(config, f, params, extra);
}
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** params,
                               void** extra) {
  return Route().kernel_ex_ptsz(config, f, params, extra);
}
CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                   unsigned int bx, unsigned int by, unsigned int bz,
                                   unsigned int shared_bytes, CUstream stream, void** params) {
  return Route().cooperative(f, gx, gy, gz, bx, by, bz, shared_bytes, stream, params);
}
CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                        unsigned int gz, unsigned int bx, unsigned int by,
                                        unsigned int bz, unsigned int shared_bytes, CUstream stream,
                                        void** params) {
  return Route().cooperative_ptsz(f, gx, gy, gz, bx, by, bz, shared_bytes, stream, params);
}
CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream) { return Route().graph(exec, stream); }
CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream stream) {
  return Route().graph_ptsz(exec, stream);
}

// Synchronising calls: stamped for a high-priority tenant's bursts, then the driver.
CUresult cuCtxSynchronize() {
  static auto real = Real<decltype(&cuCtxSynchronize)>("cuCtxSynchronize");
  return Synchronising([] { return CallReal(real); });
}
CUresult cuStreamSynchronize(CUstream stream) {
  static auto real = Real<decltype(&cuStreamSynchronize)>("cuStreamSynchronize");
  return Synchronising([stream] { return CallReal(real, stream); });
}
CUresult cuStreamSynchronize_ptsz(CUstream stream) {
  static auto real = Real<decltype(&cuStreamSynchronize_ptsz)>("cuStreamSynchronize_ptsz");
  return Synchronising([stream] { return CallReal(real, stream); });
}
CUresult cuEventSynchronize(CUevent event) {
  static auto real = Real<decltype(&cuEventSynchronize)>("cuEventSynchronize");
  return Synchronising([event] { return CallReal(real, event); });
}

// Graph memory nodes: noted per graph when added, reserved in the ledger when the graph is
// instantiated (the executable graph holds the memory) and released when it is destroyed.
CUresult cuGraphAddMemAllocNode(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps,
                                size_t ndeps, CUDA_MEM_ALLOC_NODE_PARAMS* params) {
  static auto real = Real<decltype(&cuGraphAddMemAllocNode)>("cuGraphAddMemAllocNode");
  CUresult r = CallReal(real, node, graph, deps, ndeps, params);
  Enforcement& e = State();
  EnsureInitialised(e);
  if (r == kSuccess && params && e.mode == Enforcement::Mode::kEnforce) {
    std::lock_guard<std::mutex> lock(e.mu);
    e.graph_bytes[graph] += params->bytesize;
  }
  return r;
}
CUresult cuGraphDestroy(CUgraph graph) {
  static auto real = Real<decltype(&cuGraphDestroy)>("cuGraphDestroy");
  CUresult r = CallReal(real, graph);
  if (r == kSuccess) {
    std::lock_guard<std::mutex> lock(State().mu);
    State().graph_bytes.erase(graph);
  }
  return r;
}
CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph, unsigned long long flags) {
  static auto real = Real<decltype(&cuGraphInstantiateWithFlags)>("cuGraphInstantiateWithFlags");
  uint64_t bytes = 0;
  {
    std::lock_guard<std::mutex> lock(State().mu);
    if (auto it = State().graph_bytes.find(graph); it != State().graph_bytes.end())
      bytes = it->second;
  }
  if (!exec || bytes == 0) return CallReal(real, exec, graph, flags);
  return Guarded(
      kGraphExec, kCurrentGpu, bytes, "graph memory",
      [&] { return CallReal(real, exec, graph, flags); },
      [&] { return reinterpret_cast<uint64_t>(*exec); });
}
CUresult cuGraphExecDestroy(CUgraphExec exec) {
  static auto real = Real<decltype(&cuGraphExecDestroy)>("cuGraphExecDestroy");
  CUresult r = CallReal(real, exec);
  if (r == kSuccess) Forget(kGraphExec, reinterpret_cast<uint64_t>(exec));
  return r;
}

// NVML: the tenant sees its quota as the device's memory, and only its own processes.
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* m) {
  static auto real = Real<decltype(&nvmlDeviceGetMemoryInfo)>("nvmlDeviceGetMemoryInfo");
  return TenantMemory(device, real ? real(device, m) : gpumux::nvml::kErrorDriverNotLoaded, m);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* m) {
  static auto real = Real<decltype(&nvmlDeviceGetMemoryInfo_v2)>("nvmlDeviceGetMemoryInfo_v2");
  return TenantMemory(device, real ? real(device, m) : gpumux::nvml::kErrorDriverNotLoaded, m);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* count,
                                                     nvmlProcessInfo_t* infos) {
  static auto real = Real<decltype(&nvmlDeviceGetComputeRunningProcesses_v3)>(
      "nvmlDeviceGetComputeRunningProcesses_v3");
  if (!real) return gpumux::nvml::kErrorDriverNotLoaded;
  Enforcement& e = State();
  EnsureInitialised(e);
  if (e.mode != Enforcement::Mode::kEnforce || !count) return real(device, count, infos);
  // Ask for the whole list, keep the tenant's own processes.
  std::vector<nvmlProcessInfo_t> all(256);
  unsigned int n = unsigned(all.size());
  nvmlReturn_t r;
  while ((r = real(device, &n, all.data())) == gpumux::nvml::kErrorInsufficientSize)
    all.resize(n), n = unsigned(all.size());
  if (r != gpumux::nvml::kSuccess) return r;
  int g = TenantGpuOfNvml(device);
  if (g == kNotTenants) g = 0;  // on another GPU it still sees only its own processes
  const TenantGpu& gpu = e.gpus[g];
  int tenant = gpu.tenant_slot;
  std::vector<pid_t> mine;
  for (const auto& u : gpu.ledger->Snapshot()) {
    if (u.slot == tenant)
      for (auto [pid, bytes] : u.processes) mine.push_back(pid);
  }
  unsigned int kept = 0;
  for (unsigned int i = 0; i < n; ++i) {
    if (std::find(mine.begin(), mine.end(), pid_t(all[i].pid)) == mine.end()) continue;
    if (infos && kept < *count) infos[kept] = all[i];
    ++kept;
  }
  bool fits = kept <= *count;
  *count = kept;
  return fits ? gpumux::nvml::kSuccess : gpumux::nvml::kErrorInsufficientSize;
}

// The entry points this library wraps: the base name cuGetProcAddress is asked for, the exported
// name of the driver function the wrapper forwards to, and the wrapper.
struct WrappedEntry {
  const char* base;
  const char* exported;
  void* wrapper;
};

// Never destroyed: dlsym and cuGetProcAddress may be called by other threads (the governor's among
// them) while the process exits and static objects are being torn down.
static const std::vector<WrappedEntry>& WrappedEntries() {
  static const auto* entries = new std::vector<WrappedEntry>{
      {"cuMemAlloc", "cuMemAlloc_v2", (void*)&cuMemAlloc_v2},
      {"cuMemAllocPitch", "cuMemAllocPitch_v2", (void*)&cuMemAllocPitch_v2},
      {"cuMemAllocManaged", "cuMemAllocManaged", (void*)&cuMemAllocManaged},
      {"cuMemFree", "cuMemFree_v2", (void*)&cuMemFree_v2},
      {"cuMemAllocAsync", "cuMemAllocAsync", (void*)&cuMemAllocAsync},
      {"cuMemAllocAsync", "cuMemAllocAsync_ptsz", (void*)&cuMemAllocAsync_ptsz},
      {"cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync", (void*)&cuMemAllocFromPoolAsync},
      {"cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync_ptsz",
       (void*)&cuMemAllocFromPoolAsync_ptsz},
      {"cuMemFreeAsync", "cuMemFreeAsync", (void*)&cuMemFreeAsync},
      {"cuMemFreeAsync", "cuMemFreeAsync_ptsz", (void*)&cuMemFreeAsync_ptsz},
      {"cuMemCreate", "cuMemCreate", (void*)&cuMemCreate},
      {"cuMemRelease", "cuMemRelease", (void*)&cuMemRelease},
      {"cuArrayCreate", "cuArrayCreate_v2", (void*)&cuArrayCreate_v2},
      {"cuArrayDestroy", "cuArrayDestroy", (void*)&cuArrayDestroy},
      {"cuArray3DCreate", "cuArray3DCreate_v2", (void*)&cuArray3DCreate_v2},
      {"cuMipmappedArrayCreate", "cuMipmappedArrayCreate", (void*)&cuMipmappedArrayCreate},
      {"cuMipmappedArrayDestroy", "cuMipmappedArrayDestroy", (void*)&cuMipmappedArrayDestroy},
      {"cuMemGetInfo", "cuMemGetInfo_v2", (void*)&cuMemGetInfo_v2},
      {"cuDeviceTotalMem", "cuDeviceTotalMem_v2", (void*)&cuDeviceTotalMem_v2},
      {"cuLaunchKernel", "cuLaunchKernel", (void*)&cuLaunchKernel},
      {"cuLaunchKernel", "cuLaunchKernel_ptsz", (void*)&cuLaunchKernel_ptsz},
      {"cuLaunchKernelEx", "cuLaunchKernelEx", (void*)&cuLaunchKernelEx},
      {"cuLaunchKernelEx", "cuLaunchKernelEx_ptsz", (void*)&cuLaunchKernelEx_ptsz},
      {"cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel", (void*)&cuLaunchCooperativeKernel},
      {"cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel_ptsz",
       (void*)&cuLaunchCooperativeKernel_ptsz},
      {"cuGraphLaunch", "cuGraphLaunch", (void*)&cuGraphLaunch},
      {"cuGraphLaunch", "cuGraphLaunch_ptsz", (void*)&cuGraphLaunch_ptsz},
      {"cuCtxSynchronize", "cuCtxSynchronize", (void*)&cuCtxSynchronize},
      {"cuStreamSynchronize", "cuStreamSynchronize", (void*)&cuStreamSynchronize},
      {"cuStreamSynchronize", "cuStreamSynchronize_ptsz", (void*)&cuStreamSynchronize_ptsz},
      {"cuEventSynchronize", "cuEventSynchronize", (void*)&cuEventSynchronize},
      {"cuGraphAddMemAllocNode", "cuGraphAddMemAllocNode", (void*)&cuGraphAddMemAllocNode},
      {"cuGraphDestroy", "cuGraphDestroy", (void*)&cuGraphDestroy},
      {"cuGraphInstantiate", "cuGraphInstantiateWithFlags", (void*)&cuGraphInstantiateWithFlags},
      {"cuGraphInstantiateWithFlags", "cuGraphInstantiateWithFlags",
       (void*)&cuGraphInstantiateWithFlags},
      {"cuGraphExecDestroy", "cuGraphExecDestroy", (void*)&cuGraphExecDestroy},
      {"nvmlDeviceGetMemoryInfo", "nvmlDeviceGetMemoryInfo", (void*)&nvmlDeviceGetMemoryInfo},
      {"nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetMemoryInfo_v2",
       (void*)&nvmlDeviceGetMemoryInfo_v2},
      {"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v3",
       (void*)&nvmlDeviceGetComputeRunningProcesses_v3},
  };
  return *entries;
}

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* status) {
  static auto real = Real<decltype(&cuGetProcAddress_v2)>("cuGetProcAddress_v2");
  CUresult r = CallReal(real, symbol, pfn, version, flags, status);
  if (r != kSuccess || !symbol || !pfn) return r;
  if (std::strcmp(symbol, "cuGetProcAddress") == 0) {
    *pfn = (void*)&cuGetProcAddress_v2;  // later lookups through the returned pointer stay wrapped
    return r;
  }
  // Wrap only when the driver handed out exactly the function a wrapper forwards to: an older ABI
  // version or another stream variant is left alone rather than given the wrong semantics.
  for (const WrappedEntry& e : WrappedEntries()) {
    if (std::strcmp(symbol, e.base) == 0 && *pfn && *pfn == Real<void*>(e.exported)) {
      *pfn = e.wrapper;
      break;
    }
  }
  return r;
}

CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  return cuGetProcAddress_v2(symbol, pfn, version, flags, nullptr);
}
// dlsym: a program that dlopens libcuda and looks entry points up by name gets the wrappers too.
// RTLD_NEXT lookups go straight to glibc as a tail call: glibc resolves "next" relative to the
// calling object (found from the return address), so forwarding them with a normal call would make
// this library the caller and could hand a requester back its own symbol (sanitizer runtimes and
// other interposers do exactly such lookups). The shim is built with sibling-call optimisation in
// every build type for this reason (src/CMakeLists.txt).
void* dlsym(void* handle, const char* name) {
  if (handle == RTLD_NEXT) return RealDlsym()(handle, name);
  void* real = RealDlsym()(handle, name);
  if (!real || !(std::strncmp(name, "cu", 2) == 0 || std::strncmp(name, "nvml", 4) == 0))
    return real;
  if (std::strcmp(name, "cuGetProcAddress") == 0) return (void*)&cuGetProcAddress;
  if (std::strcmp(name, "cuGetProcAddress_v2") == 0) return (void*)&cuGetProcAddress_v2;
  for (const WrappedEntry& e : WrappedEntries()) {
    if (std::strcmp(name, e.exported) == 0) return e.wrapper;
  }
  return real;
}

}  // extern "C"
