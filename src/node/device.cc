#include "node/device.h"

#include <dlfcn.h>

#include <cstdio>
#include <filesystem>

namespace gpumux::node {
namespace {

struct Nvml {
  struct Memory {
    unsigned long long total, free, used;
  };
  int (*init)() = nullptr;
  int (*count)(unsigned*) = nullptr;
  int (*handle)(unsigned, void**) = nullptr;
  int (*memory)(void*, Memory*) = nullptr;
  int (*name)(void*, char*, unsigned) = nullptr;
};

const Nvml& OpenNvml() {
  static const Nvml nvml = [] {
    Nvml n;
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (!lib) return n;
    n.init = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlInit_v2"));
    n.count = reinterpret_cast<int (*)(unsigned*)>(dlsym(lib, "nvmlDeviceGetCount_v2"));
    n.handle = reinterpret_cast<int (*)(unsigned, void**)>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
    n.memory = reinterpret_cast<int (*)(void*, Nvml::Memory*)>(dlsym(lib, "nvmlDeviceGetMemoryInfo"));
    n.name = reinterpret_cast<int (*)(void*, char*, unsigned)>(dlsym(lib, "nvmlDeviceGetName"));
    if (!n.init || !n.count || !n.handle || !n.memory || !n.name || n.init() != 0) n.init = nullptr;
    return n;
  }();
  if (!nvml.init) {
    throw DeviceError("no NVIDIA driver found (libnvidia-ml.so.1); use the simulated GPU (--sim KIND) instead");
  }
  return nvml;
}

std::string Joined(const std::string& first, const std::string& rest) { return rest.empty() ? first : first + ":" + rest; }

}  // namespace

std::string RuntimeLibraryDir() {
  std::filesystem::path exe_dir = std::filesystem::read_symlink("/proc/self/exe").parent_path();
  if (std::filesystem::exists(exe_dir / "libgpumux.so")) return exe_dir.string();
  return (exe_dir.parent_path() / "lib" / "gpumux").string();
}

Device SimulatedDevice(const GpuKind& kind, int index) {
  return {index, kind.name + " (simulated)", uint64_t(kind.memory_bytes), kind.sms, kind.bandwidth,
          kind.PeakFlops(DType::kBf16), true, -1, kind.mig};
}

std::string DeviceStem(const Device& d) {
  std::string stem = "gpu" + std::to_string(d.index);
  return d.mig_instance < 0 ? stem : stem + "-mig" + std::to_string(d.mig_instance);
}

Device MigInstanceDevice(const Device& gpu, const MigLayout& layout, int k) {
  const MigGeometry& geo = *gpu.mig;
  const MigProfile& p = *layout.instances[size_t(k)].profile;
  Device d = gpu;
  d.name = gpu.name + " MIG " + p.name;
  d.memory = uint64_t(p.memory_bytes);
  d.sms = p.sms;
  d.bandwidth = gpu.bandwidth * p.memory_slices / geo.slots;
  d.flops = gpu.flops * p.compute_slices / geo.compute_slices;
  d.mig_instance = k;
  d.mig.reset();
  return d;
}

int RealDeviceCount() {
  unsigned n = 0;
  if (OpenNvml().count(&n) != 0) throw DeviceError("NVML cannot count the GPUs");
  return int(n);
}

Device RealDevice(int index) {
  const Nvml& nvml = OpenNvml();
  void* dev = nullptr;
  Nvml::Memory m{};
  char buf[96] = {0};
  if (nvml.handle(unsigned(index), &dev) != 0 || nvml.memory(dev, &m) != 0 || nvml.name(dev, buf, sizeof(buf)) != 0) {
    throw DeviceError("GPU " + std::to_string(index) + ": NVML cannot describe it (is the index right?)");
  }
  return {index, buf, m.total, 0, 0, 0, false, -1, std::nullopt};
}

std::vector<std::pair<std::string, std::string>> TenantEnvironment(const Device& device, const std::string& ledger_path,
                                                                   const std::string& tenant, const std::string& bin_dir,
                                                                   const std::string& inherited_preload,
                                                                   const std::string& inherited_library_path) {
  std::vector<std::pair<std::string, std::string>> env = {
      {"LD_PRELOAD", Joined(bin_dir + "/libgpumux.so", inherited_preload)},
      {"GPUMUX_LEDGER", ledger_path},
      {"GPUMUX_TENANT", tenant},
      {"GPUMUX_GPU", std::to_string(device.index)},
  };
  if (device.simulated) {
    char number[32];
    env.push_back({"LD_LIBRARY_PATH", Joined(bin_dir + "/simgpu", inherited_library_path)});
    env.push_back({"GPUMUX_SIM_NAME", device.name});
    env.push_back({"GPUMUX_SIM_MEMORY", std::to_string(device.memory)});
    env.push_back({"GPUMUX_SIM_SMS", std::to_string(device.sms)});
    std::snprintf(number, sizeof(number), "%.6g", device.bandwidth);
    env.push_back({"GPUMUX_SIM_BANDWIDTH", number});
    std::snprintf(number, sizeof(number), "%.6g", device.flops);
    env.push_back({"GPUMUX_SIM_FLOPS", number});
    std::string dir = ledger_path.substr(0, ledger_path.rfind('/'));
    env.push_back({"GPUMUX_SIM_STATE", dir + "/sim-" + DeviceStem(device) + ".state"});
  }
  return env;
}

}  // namespace gpumux::node
