#include "node/nvml_library.h"

#include <dlfcn.h>

#include <cstdlib>

#include "base/error.h"
#include "node/device.h"

namespace gpumux::node {
namespace {

template <typename Fn>
void Bind(void* lib, Fn& fn, const char* symbol) {
  fn = reinterpret_cast<Fn>(dlsym(lib, symbol));
}

}  // namespace

bool NvmlLibrary::has_mig() const {
  return get_mig_mode && set_mig_mode && gpu_instance_profile && possible_placements &&
         gpu_instances && create_gpu_instance && gpu_instance_info && destroy_gpu_instance &&
         compute_instance_profile && create_compute_instance && compute_instances &&
         destroy_compute_instance && max_mig_devices && mig_device && gpu_instance_id;
}

bool NvmlLibrary::has_memory_limits() const {
  char version[80] = {0};
  if (!set_memory_limits || !get_memory_limits || !driver_version ||
      driver_version(version, sizeof(version)) != nvml::kSuccess)
    return false;
  return std::atoi(version) >= 615;  // "615.71.09"
}

void NvmlLibrary::Check(nvmlReturn_t r, const std::string& what) const {
  if (r == nvml::kSuccess) return;
  std::string message = what + ": " + (error_string ? error_string(r) : "NVML error") + " (NVML " +
                        std::to_string(r) + ")";
  if (r == nvml::kErrorInUse) throw Conflict(message);
  throw Unavailable(message);
}

nvmlDevice_t NvmlLibrary::Gpu(int index) const {
  nvmlDevice_t device = nullptr;
  Check(handle(unsigned(index), &device), "GPU " + std::to_string(index));
  return device;
}

const NvmlLibrary& Nvml() {
  static const NvmlLibrary* nvml = [] {
    auto* n = new NvmlLibrary();
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (!lib) return n;
    decltype(&nvmlInit_v2) init = nullptr;
    Bind(lib, init, "nvmlInit_v2");
    Bind(lib, n->error_string, "nvmlErrorString");
    Bind(lib, n->count, "nvmlDeviceGetCount_v2");
    Bind(lib, n->handle, "nvmlDeviceGetHandleByIndex_v2");
    Bind(lib, n->name, "nvmlDeviceGetName");
    Bind(lib, n->uuid, "nvmlDeviceGetUUID");
    Bind(lib, n->memory, "nvmlDeviceGetMemoryInfo");
    Bind(lib, n->process_utilization, "nvmlDeviceGetProcessUtilization");
    Bind(lib, n->compute_processes, "nvmlDeviceGetComputeRunningProcesses_v3");
    Bind(lib, n->driver_version, "nvmlSystemGetDriverVersion");
    Bind(lib, n->set_memory_limits, "nvmlDeviceSetMemoryLimits_v1");
    Bind(lib, n->get_memory_limits, "nvmlDeviceGetMemoryLimits_v1");
    Bind(lib, n->get_mig_mode, "nvmlDeviceGetMigMode");
    Bind(lib, n->set_mig_mode, "nvmlDeviceSetMigMode");
    Bind(lib, n->gpu_instance_profile, "nvmlDeviceGetGpuInstanceProfileInfoV");
    Bind(lib, n->possible_placements, "nvmlDeviceGetGpuInstancePossiblePlacements_v2");
    Bind(lib, n->gpu_instances, "nvmlDeviceGetGpuInstances");
    Bind(lib, n->create_gpu_instance, "nvmlDeviceCreateGpuInstanceWithPlacement");
    Bind(lib, n->gpu_instance_info, "nvmlGpuInstanceGetInfo");
    Bind(lib, n->destroy_gpu_instance, "nvmlGpuInstanceDestroy");
    Bind(lib, n->compute_instance_profile, "nvmlGpuInstanceGetComputeInstanceProfileInfo");
    Bind(lib, n->create_compute_instance, "nvmlGpuInstanceCreateComputeInstance");
    Bind(lib, n->compute_instances, "nvmlGpuInstanceGetComputeInstances");
    Bind(lib, n->destroy_compute_instance, "nvmlComputeInstanceDestroy");
    Bind(lib, n->max_mig_devices, "nvmlDeviceGetMaxMigDeviceCount");
    Bind(lib, n->mig_device, "nvmlDeviceGetMigDeviceHandleByIndex");
    Bind(lib, n->gpu_instance_id, "nvmlDeviceGetGpuInstanceId");
    if (!init || !n->count || !n->handle || !n->name || !n->uuid || !n->memory ||
        init() != nvml::kSuccess)
      n->count = nullptr;
    return n;
  }();
  if (!nvml->count) {
    throw Unavailable(
        "no NVIDIA driver found (libnvidia-ml.so.1); use the simulated GPU (--sim KIND) instead");
  }
  return *nvml;
}

}  // namespace gpumux::node
