// The simulated GPU's NVML: a stand-in for libnvidia-ml.so.1 that reports the simulated devices
// (sim_state.h): count, handles, index, name, memory, running processes, device utilisation and
// per-process utilisation. Utilisation is measured from the GPU time charged to each process, over
// the time since this caller's previous query (real NVML samples the hardware on its own clock);
// the simulator charges work when it is submitted, so a short window can read above 100%. Its MIG
// half is sim_nvml_mig.cc.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "base/clock.h"

#include "abi/nvml_api.h"
#include "simgpu/sim_memory_limits.h"
#include "simgpu/sim_nvml_device.h"
#include "simgpu/sim_state.h"

using namespace gpumux::nvml;
using gpumux::sim::Device;
using gpumux::sim::DeviceCount;
using gpumux::sim::DeviceOfHandle;
using gpumux::sim::NvmlHandle;
using gpumux::sim::SimDevice;

namespace {
bool Ready() { return gpumux::sim::HasDevices(); }
}  // namespace

extern "C" {

nvmlReturn_t nvmlInit_v2() { return Ready() ? kSuccess : kErrorDriverNotLoaded; }
nvmlReturn_t nvmlInitWithFlags(unsigned int) { return nvmlInit_v2(); }
nvmlReturn_t nvmlShutdown() { return kSuccess; }
const char* nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case kSuccess: return "Success";
    case kErrorUninitialized: return "Uninitialized";
    case kErrorInvalidArgument: return "Invalid Argument";
    case kErrorNotSupported: return "Not Supported";
    case kErrorNoPermission: return "Insufficient Permissions";
    case kErrorNotFound: return "Not Found";
    case kErrorInsufficientSize: return "Insufficient Size";
    case kErrorDriverNotLoaded: return "Driver Not Loaded";
    case kErrorInUse: return "In use by another client";
    case kErrorInsufficientResources: return "Insufficient Resources";
    default: return "Unknown Error";
  }
}
// The driver's version: GPUMUX_SIM_DRIVER_VERSION's release, else one before memory limits.
nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  if (!version || length == 0) return kErrorInvalidArgument;
  const char* release =
      gpumux::sim::SimDriverHasMemoryLimits() ? std::getenv("GPUMUX_SIM_DRIVER_VERSION") : "570";
  int n = std::snprintf(version, length, "%d.00.00", std::atoi(release));
  return n >= 0 && unsigned(n) < length ? kSuccess : kErrorInsufficientSize;
}
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  if (!count) return kErrorInvalidArgument;
  *count = Ready() ? unsigned(DeviceCount()) : 0;
  return Ready() ? kSuccess : kErrorUninitialized;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  if (!Ready()) return kErrorUninitialized;
  if (!device || index >= unsigned(DeviceCount())) return kErrorInvalidArgument;
  *device = NvmlHandle(int(index));
  return kSuccess;
}
nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t d, unsigned int* index) {
  const SimDevice* device = DeviceOfHandle(d);
  if (!device || !index) return kErrorInvalidArgument;
  *index = unsigned(device->ordinal);
  return kSuccess;
}
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char* name, unsigned int length) {
  const SimDevice* device = DeviceOfHandle(d);
  if (!device || !name || length == 0) return kErrorInvalidArgument;
  std::strncpy(name, device->name.c_str(), length - 1);
  name[length - 1] = 0;
  return kSuccess;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t* m) {
  const SimDevice* device = DeviceOfHandle(d);
  if (!device || !m) return kErrorInvalidArgument;
  gpumux::sim::SimState* s = device->state;
  gpumux::sim::ReclaimDeadProcesses(s);
  m->total = s->capacity;
  m->used = s->used.load();
  m->free = m->total - m->used;
  return kSuccess;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t* m) {
  nvmlMemory_t v1;
  if (!m) return kErrorInvalidArgument;
  nvmlReturn_t r = nvmlDeviceGetMemoryInfo(d, &v1);
  if (r != kSuccess) return r;
  m->total = v1.total;
  m->reserved = 0;
  m->free = v1.free;
  m->used = v1.used;
  return kSuccess;
}
// Every process that holds memory on the device; call with *count = 0 to learn how many.
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int* count,
                                                     nvmlProcessInfo_t* infos) {
  const SimDevice* device = DeviceOfHandle(d);
  if (!device || !count) return kErrorInvalidArgument;
  gpumux::sim::SimState* s = device->state;
  gpumux::sim::ReclaimDeadProcesses(s);
  unsigned int n = 0;
  for (const auto& p : s->processes) {
    int32_t pid = p.pid.load();
    if (pid <= 0) continue;
    if (infos && n < *count) infos[n] = {unsigned(pid), p.used.load(), kNotMig, kNotMig};
    ++n;
  }
  bool fits = n <= *count;
  *count = n;
  return fits ? kSuccess : kErrorInsufficientSize;
}
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t* u) {
  const SimDevice* device = DeviceOfHandle(d);
  if (!device || !u) return kErrorInvalidArgument;
  static auto* mu = new std::mutex();  // never destroyed: a governor thread may call during exit
  static uint64_t last_ns_of[gpumux::sim::kMaxSimDevices],
      last_busy_of[gpumux::sim::kMaxSimDevices];
  std::lock_guard<std::mutex> lock(*mu);
  uint64_t &last_ns = last_ns_of[device->ordinal], &last_busy = last_busy_of[device->ordinal];
  uint64_t busy = 0, now = gpumux::NowNs();
  for (const auto& p : device->state->processes) busy += p.pid.load() > 0 ? p.gpu_ns.load() : 0;
  double share = last_ns && now > last_ns
                     ? double(busy - std::min(busy, last_busy)) / double(now - last_ns)
                     : 0;
  u->gpu = unsigned(std::lround(std::min(share, 1.0) * 100));
  u->memory = u->gpu;
  last_ns = now, last_busy = busy;
  return kSuccess;
}
// One sample per process with a device context: its share of GPU time since the previous query.
nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t d,
                                             nvmlProcessUtilizationSample_t* samples,
                                             unsigned int* count, unsigned long long) {
  const SimDevice* device = DeviceOfHandle(d);
  if (!device || !count) return kErrorInvalidArgument;
  struct Seen {
    uint64_t gpu_ns, at_ns;
  };
  static auto* mu = new std::mutex();  // never destroyed: a governor thread may call during exit
  // pid -> at the previous query, per device
  static auto* seen_of = new std::unordered_map<uint32_t, Seen>[gpumux::sim::kMaxSimDevices];
  std::lock_guard<std::mutex> lock(*mu);
  auto* seen = &seen_of[device->ordinal];
  uint64_t now = gpumux::NowNs();
  unsigned int n = 0;
  for (const auto& p : device->state->processes) {
    int32_t pid = p.pid.load();
    if (pid <= 0) continue;
    if (samples && n < *count) {
      uint64_t gpu = p.gpu_ns.load();
      auto [it, fresh] = seen->try_emplace(uint32_t(pid), Seen{gpu, now});
      double window = double(now - it->second.at_ns);
      unsigned util = fresh || window <= 0
                          ? 0
                          : unsigned(std::lround(100.0 * double(gpu - it->second.gpu_ns) / window));
      it->second = {gpu, now};
      samples[n] = {unsigned(pid), now / 1000, util, util, 0, 0};
    }
    ++n;
  }
  bool fits = samples && n <= *count;
  *count = n;
  return fits ? kSuccess : kErrorInsufficientSize;
}

// Memory limits per cgroup (sim_memory_limits.h): a whole GPU's handle only, not in MIG mode.
namespace {
nvmlReturn_t LimitsDevice(nvmlDevice_t d, const char* group, const SimDevice** device) {
  if (!Ready()) return kErrorUninitialized;
  if (!group) return kErrorInvalidArgument;
  *device = DeviceOfHandle(d);
  if (!*device) return kErrorNotSupported;  // a MIG device's handle
  unsigned int current = kMigDisable, pending = kMigDisable;
  if (nvmlDeviceGetMigMode(d, &current, &pending) == kSuccess && current == kMigEnable)
    return kErrorNotSupported;
  return kSuccess;
}
}  // namespace

nvmlReturn_t nvmlDeviceSetMemoryLimits_v1(nvmlDevice_t d, nvmlSetMemoryLimits_v1_t* limits) {
  const SimDevice* device = nullptr;
  if (!limits) return kErrorInvalidArgument;
  if (nvmlReturn_t r = LimitsDevice(d, limits->nameSpace, &device); r != kSuccess) return r;
  return gpumux::sim::SetSimMemoryLimits(device->path, limits->nameSpace, limits->softLimit,
                                         limits->hardLimit);
}
nvmlReturn_t nvmlDeviceGetMemoryLimits_v1(nvmlDevice_t d, nvmlGetMemoryLimits_v1_t* limits) {
  const SimDevice* device = nullptr;
  if (!limits) return kErrorInvalidArgument;
  if (nvmlReturn_t r = LimitsDevice(d, limits->nameSpace, &device); r != kSuccess) return r;
  gpumux::sim::SimGroupLimits got;
  nvmlReturn_t r = gpumux::sim::GetSimMemoryLimits(device->path, limits->nameSpace, &got);
  if (r == kSuccess)
    limits->softLimit = got.soft, limits->hardLimit = got.hard, limits->currentUsed = got.used;
  return r;
}

}  // extern "C"
