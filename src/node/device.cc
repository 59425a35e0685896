#include "node/device.h"

#include <cstdio>
#include <filesystem>

#include "base/comma_list.h"
#include "base/error.h"
#include "core/units.h"
#include "node/nvml_library.h"

namespace gpumux::node {
namespace {

std::string Joined(const std::string& first, const std::string& rest) {
  return rest.empty() ? first : first + ":" + rest;
}

}  // namespace

std::optional<Ledger> OpenDeviceLedger(const std::string& path, const Device& device,
                                       std::string* problem, mode_t sole_mode) {
  try {
    Ledger ledger = !sole_mode ? Ledger::CreateOrOpen(path, device.memory, device.name)
                    : std::filesystem::exists(std::filesystem::symlink_status(path))
                        ? Ledger::OpenSole(path)
                        : Ledger::MakeSole(path, device.memory, device.name, sole_mode);
    if (ledger.gpu_name() == device.name && ledger.capacity() == device.memory) return ledger;
    *problem = path + ": the ledger of a " + ledger.gpu_name() + " (" +
               FormatBytes(double(ledger.capacity())) + "), not of this " + device.name + " (" +
               FormatBytes(double(device.memory)) + ")";
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kBadInput) throw;
    *problem = e.what();
  }
  return std::nullopt;
}

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
    const std::vector<Device>& devices, const std::vector<std::string>& ledger_paths,
    const std::string& tenant, const std::string& bin_dir, const std::string& inherited_preload,
    const std::string& inherited_library_path) {
  if (devices.empty() || devices.size() != ledger_paths.size())
    throw BadInput("a tenant needs one ledger for each of its GPUs");
  std::string ledgers, gpus, states, uuids;
  for (size_t i = 0; i < devices.size(); ++i) {
    const Device& d = devices[i];
    const std::string& ledger = ledger_paths[i];
    if (ledger.find(',') != std::string::npos)
      throw BadInput("ledger path '" + ledger +
                     "' holds a comma; choose a GPUMUX_RUNTIME_DIR without one");
    // The simulated driver gives every device of a process the first one's kind.
    if (d.simulated != devices[0].simulated || (d.simulated && d.name != devices[0].name))
      throw BadInput("a tenant's simulated GPUs must be of one kind (" + devices[0].name + ", " +
                     d.name + ")");
    std::string sep = i == 0 ? "" : ",";
    ledgers += sep + ledger;
    // NVML's index of the GPU, for the governor: the simulated NVML sees the tenant's devices in
    // order; a real one sees the node's.
    gpus += sep + std::to_string(d.simulated ? int(i) : d.index);
    states += sep + ledger.substr(0, ledger.rfind('/')) + "/sim-" + DeviceStem(d) + ".state";
    uuids += sep + d.uuid;
  }
  std::vector<std::pair<std::string, std::string>> env = {
      {"LD_PRELOAD", Joined(bin_dir + "/libgpumux.so", inherited_preload)},
      {"GPUMUX_LEDGER", ledgers},
      {"GPUMUX_TENANT", tenant},
      {"GPUMUX_GPU", gpus},
  };
  if (devices[0].simulated) {
    Device kind = devices[0];
    if (devices.size() > 1) kind.mig.reset();  // MIG is simulated on a tenant's only GPU
    for (auto& kv : SimulatedGpuEnvironment(kind, states, bin_dir, inherited_library_path))
      env.push_back(std::move(kv));
  } else if (!devices[0].uuid.empty()) {
    env.push_back({"CUDA_VISIBLE_DEVICES", uuids});
  }
  return env;
}

std::vector<std::pair<std::string, std::string>> SimulatedGpuEnvironment(
    const Device& device, const std::string& state_paths, const std::string& bin_dir,
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
  env.push_back({"GPUMUX_SIM_STATE", state_paths});
  if (device.mig) {
    // "slots=8 compute=7 sms=132|1g.10gb id=19 g=1 size=1 mib=9984 sms=16 max=7 starts=0,1,2|..."
    const MigGeometry& geo = *device.mig;
    std::string text = "slots=" + std::to_string(geo.slots) +
                       " compute=" + std::to_string(geo.compute_slices) +
                       " sms=" + std::to_string(geo.sms);
    for (const MigProfile& p : geo.profiles) {
      std::string starts = JoinCommas(p.placement_starts, [](int s) { return std::to_string(s); });
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
