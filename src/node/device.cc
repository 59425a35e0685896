#include "node/device.h"

#include <cstdio>
#include <filesystem>

#include "node/nvml_library.h"

namespace gpumux::node {
namespace {

std::string Joined(const std::string& first, const std::string& rest) {
  return rest.empty() ? first : first + ":" + rest;
}

}  // namespace

std::string RuntimeLibraryDir() {
  std::filesystem::path exe_dir = std::filesystem::read_symlink("/proc/self/exe").parent_path();
  if (std::filesystem::exists(exe_dir / "libgpumux.so")) return exe_dir.string();
  return (exe_dir.parent_path() / "lib" / "gpumux").string();
}

Device SimulatedDevice(const GpuKind& kind, int index) {
  return {index,
          kind.name + " (simulated)",
          uint64_t(kind.memory_bytes),
          kind.sms,
          kind.bandwidth,
          kind.PeakFlops(DType::kBf16),
          true,
          -1,
          kind.mig,
          ""};
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
  Nvml().Check(Nvml().count(&n), "counting the GPUs");
  return int(n);
}

Device RealDevice(int index) {
  const NvmlLibrary& nvml = Nvml();
  nvmlDevice_t dev = nvml.Gpu(index);
  nvmlMemory_t m{};
  char name[96] = {0}, uuid[nvml::kUuidBufferSize] = {0};
  std::string where = "GPU " + std::to_string(index);
  nvml.Check(nvml.memory(dev, &m), where + ": memory");
  nvml.Check(nvml.name(dev, name, sizeof(name)), where + ": name");
  nvml.Check(nvml.uuid(dev, uuid, sizeof(uuid)), where + ": UUID");
  return {index, name, m.total, 0, 0, 0, false, -1, std::nullopt, uuid};
}

std::vector<std::pair<std::string, std::string>> TenantEnvironment(
    const Device& device, const std::string& ledger_path, const std::string& tenant,
    const std::string& bin_dir, const std::string& inherited_preload,
    const std::string& inherited_library_path) {
  std::vector<std::pair<std::string, std::string>> env = {
      {"LD_PRELOAD", Joined(bin_dir + "/libgpumux.so", inherited_preload)},
      {"GPUMUX_LEDGER", ledger_path},
      {"GPUMUX_TENANT", tenant},
      {"GPUMUX_GPU", std::to_string(device.index)},
  };
  if (device.simulated) {
    std::string dir = ledger_path.substr(0, ledger_path.rfind('/'));
    for (auto& kv : SimulatedGpuEnvironment(device, dir + "/sim-" + DeviceStem(device) + ".state",
                                            bin_dir, inherited_library_path)) {
      env.push_back(std::move(kv));
    }
  } else if (!device.uuid.empty()) {
    env.push_back({"CUDA_VISIBLE_DEVICES", device.uuid});
  }
  return env;
}

std::vector<std::pair<std::string, std::string>> SimulatedGpuEnvironment(
    const Device& device, const std::string& state_path, const std::string& bin_dir,
    const std::string& inherited_library_path) {
  char number[32];
  std::vector<std::pair<std::string, std::string>> env;
  env.push_back({"LD_LIBRARY_PATH", Joined(bin_dir + "/simgpu", inherited_library_path)});
  env.push_back({"GPUMUX_SIM_NAME", device.name});
  env.push_back({"GPUMUX_SIM_MEMORY", std::to_string(device.memory)});
  env.push_back({"GPUMUX_SIM_SMS", std::to_string(device.sms)});
  std::snprintf(number, sizeof(number), "%.6g", device.bandwidth);
  env.push_back({"GPUMUX_SIM_BANDWIDTH", number});
  std::snprintf(number, sizeof(number), "%.6g", device.flops);
  env.push_back({"GPUMUX_SIM_FLOPS", number});
  env.push_back({"GPUMUX_SIM_STATE", state_path});
  if (device.mig) {
    // "slots=8 compute=7 sms=132|1g.10gb id=19 g=1 size=1 mib=9984 sms=16 max=7 starts=0,1,2|..."
    const MigGeometry& geo = *device.mig;
    std::string text = "slots=" + std::to_string(geo.slots) +
                       " compute=" + std::to_string(geo.compute_slices) +
                       " sms=" + std::to_string(geo.sms);
    for (const MigProfile& p : geo.profiles) {
      std::string starts;
      for (int s : p.placement_starts) starts += (starts.empty() ? "" : ",") + std::to_string(s);
      text += "|" + p.name + " id=" + std::to_string(p.id) +
              " g=" + std::to_string(p.compute_slices) +
              " size=" + std::to_string(p.memory_slices) +
              " mib=" + std::to_string(uint64_t(p.memory_bytes) >> 20) +
              " sms=" + std::to_string(p.sms) + " max=" + std::to_string(p.max_instances) +
              " starts=" + starts;
    }
    env.push_back({"GPUMUX_SIM_MIG", text});
  }
  return env;
}

}  // namespace gpumux::node
