// The simulated GPU's NVML: a stand-in for libnvidia-ml.so.1 that reports the simulated device
// (sim_state.h): count, handle, name, memory, running processes and utilisation (zero: kernels are
// not simulated yet).
#include <cstring>

#include "simgpu/nvml_types.h"
#include "simgpu/sim_state.h"

using namespace gpumux::nvml;
using gpumux::sim::Device;

namespace {

nvmlDevice_t TheDevice() { return reinterpret_cast<nvmlDevice_t>(const_cast<gpumux::sim::SimDevice*>(&Device())); }
bool Valid(nvmlDevice_t d) { return Device().state && d == TheDevice(); }

}  // namespace

extern "C" {

nvmlReturn_t nvmlInit_v2() { return Device().state ? kSuccess : kErrorDriverNotLoaded; }
nvmlReturn_t nvmlInitWithFlags(unsigned int) { return nvmlInit_v2(); }
nvmlReturn_t nvmlShutdown() { return kSuccess; }
const char* nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case kSuccess: return "Success";
    case kErrorUninitialized: return "Uninitialized";
    case kErrorInvalidArgument: return "Invalid Argument";
    case kErrorNotFound: return "Not Found";
    case kErrorInsufficientSize: return "Insufficient Size";
    case kErrorDriverNotLoaded: return "Driver Not Loaded";
    default: return "Unknown Error";
  }
}
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  if (!count) return kErrorInvalidArgument;
  *count = Device().state ? 1 : 0;
  return Device().state ? kSuccess : kErrorUninitialized;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  if (!Device().state) return kErrorUninitialized;
  if (!device || index != 0) return kErrorInvalidArgument;
  *device = TheDevice();
  return kSuccess;
}
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char* name, unsigned int length) {
  if (!Valid(d) || !name || length == 0) return kErrorInvalidArgument;
  std::strncpy(name, Device().name.c_str(), length - 1);
  name[length - 1] = 0;
  return kSuccess;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t* m) {
  if (!Valid(d) || !m) return kErrorInvalidArgument;
  gpumux::sim::SimState* s = Device().state;
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
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int* count, nvmlProcessInfo_t* infos) {
  if (!Valid(d) || !count) return kErrorInvalidArgument;
  gpumux::sim::SimState* s = Device().state;
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
  if (!Valid(d) || !u) return kErrorInvalidArgument;
  u->gpu = 0;
  u->memory = 0;
  return kSuccess;
}

}  // extern "C"
