#include "node/agent/share_backend.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>

#include "base/cgroup.h"
#include "base/error.h"
#include "node/mig_control.h"
#include "node/nvml_library.h"
#include "simgpu/sim_memory_limits.h"
#include "simgpu/sim_state.h"

namespace gpumux::agent {

const char* EnforcementName(QuotaEnforcement e) {
  switch (e) {
    case QuotaEnforcement::kDriver: return "driver";
    case QuotaEnforcement::kMig: return "mig";
    case QuotaEnforcement::kShim: break;
  }
  return "shim";
}

void AddMpsClientPriority(const node::TenantLimits& limits,
                          std::vector<std::pair<std::string, std::string>>* env) {
  if (limits.priority == node::Priority::kLow) env->push_back({"CUDA_MPS_CLIENT_PRIORITY", "1"});
}

namespace {

class SimulatedBackend : public ShareBackend {
 public:
  explicit SimulatedBackend(std::string dir) : dir_(std::move(dir)) {}
  void Prepare(const node::Device& device, ShareMode mode) override {
    // The simulated GPU's scheduling knobs as `gpumux run --sim` takes them: from the environment.
    if (!sim::CreateSimState(Path(device),
                             sim::WithSchedulingFromEnvironment(
                                 {device.memory, device.bandwidth, device.flops, SimMode(mode)}))) {
      throw Unavailable(Path(device) +
                        ": cannot create the simulated GPU's state (or it is not one)");
    }
  }
  // MIG instances are simulated devices of their own (their state files made here), placed as the
  // driver would by the catalog's geometry; the whole GPU's device is left as it is, unused while
  // the GPU is in MIG mode.
  std::vector<node::Device> SetMode(const node::Device& gpu, ShareMode mode,
                                    const std::vector<std::string>& layout) override {
    if (mode == ShareMode::kMig) {
      if (!gpu.mig) throw BadInput("the catalog knows no MIG geometry for " + gpu.name);
      MigLayout placed = PlaceInCreationOrder(*gpu.mig, layout);
      // An instance another takes the number of (a layout changed instance by instance) is a new
      // device: its state file goes; those kept keep theirs, and their processes' memory.
      std::vector<std::string>& was = layouts_[gpu.index];
      std::vector<std::string> now;
      for (const MigInstance& m : placed.instances)
        now.push_back(m.Entry());
      for (size_t k = 0; k < was.size(); ++k) {
        if (k < now.size() && now[k] == was[k]) continue;
        node::Device gone = gpu;
        gone.mig_instance = int(k);
        unlink(Path(gone).c_str());
      }
      was = now;
      std::vector<node::Device> instances;
      for (size_t k = 0; k < placed.instances.size(); ++k) {
        instances.push_back(node::MigInstanceDevice(gpu, placed, int(k)));
        Prepare(instances.back(), ShareMode::kTimeSlice);
      }
      return instances;
    }
    Prepare(gpu, mode);
    if (!sim::SetSimMode(Path(gpu), SimMode(mode)))
      throw Unavailable(Path(gpu) + " is not a simulated GPU's state");
    return {};
  }
  std::vector<std::pair<std::string, std::string>> ClientEnvironment(
      const node::Device&, ShareMode mode, const node::TenantLimits& limits) const override {
    std::vector<std::pair<std::string, std::string>> env = {
        {"GPUMUX_SIM_MODE", mode == ShareMode::kMps ? "mps" : "timeslice"}};
    if (mode == ShareMode::kMps) AddMpsClientPriority(limits, &env);
    return env;
  }
  bool Healthy(const node::Device& gpu) const override {
    return access((Path(gpu) + ".lost").c_str(), F_OK) != 0;
  }
  std::unique_ptr<DeviceMeter> Meter(const node::Device& device) const override {
    return MakeSimulatedMeter(Path(device));
  }
  MigGeometry MigGeometryOf(const node::Device& gpu) const override {
    if (!gpu.mig) throw BadInput("the catalog knows no MIG geometry for " + gpu.name);
    return *gpu.mig;
  }
  QuotaEnforcement Enforcement(const node::Device& device) const override {
    if (device.mig_instance >= 0) return QuotaEnforcement::kMig;
    return sim::SimDriverHasMemoryLimits() && CgroupV2Mounted() ? QuotaEnforcement::kDriver
                                                                : QuotaEnforcement::kShim;
  }
  void SetGroupLimit(const node::Device& gpu, const std::string& group_dir,
                     std::optional<uint64_t> hard) override {
    nvmlReturn_t r =
        sim::SetSimMemoryLimits(Path(gpu), group_dir, 0, hard.value_or(nvml::kMemoryLimitMax));
    if (r != nvml::kSuccess)
      throw Unavailable(group_dir + ": the simulated driver refused its memory limit (NVML " +
                        std::to_string(r) + ")");
  }

 private:
  // The simulated device runs its processes' work concurrently (MPS) or one at a time.
  static ShareMode SimMode(ShareMode m) {
    return m == ShareMode::kMps ? ShareMode::kMps : ShareMode::kTimeSlice;
  }
  std::string Path(const node::Device& device) const {
    return dir_ + "/sim-" + node::DeviceStem(device) + ".state";
  }
  std::string dir_;
  // The MIG layout each GPU was last given here ("NAME@START" by instance number).
  std::map<int, std::vector<std::string>> layouts_;
};

class NvidiaBackend : public ShareBackend {
 public:
  explicit NvidiaBackend(std::string dir) : dir_(std::move(dir)) {}
  void Prepare(const node::Device&, ShareMode) override {}  // the driver's default is time-slicing
  std::vector<node::Device> SetMode(const node::Device& gpu, ShareMode mode,
                                    const std::vector<std::string>& layout) override {
    if (mode == ShareMode::kMig) return LayOutMig(gpu, layout);
    node::SetMigMode(gpu.index, false);
    std::string pipe = PipeDir(gpu), log = dir_ + "/mps" + std::to_string(gpu.index) + "-log";
    mkdir(pipe.c_str(), 0755);
    mkdir(log.c_str(), 0755);
    std::string env = "CUDA_VISIBLE_DEVICES=" + std::to_string(gpu.index) +
                      " CUDA_MPS_PIPE_DIRECTORY=" + pipe + " CUDA_MPS_LOG_DIRECTORY=" + log + " ";
    // Starting a running daemon or stopping a stopped one fails harmlessly; the result is checked
    // by asking the daemon afterwards.
    std::string command = mode == ShareMode::kMps
                              ? env + "nvidia-cuda-mps-control -d"
                              : "echo quit | " + env + "nvidia-cuda-mps-control";
    int rc = std::system((command + " >/dev/null 2>&1").c_str());
    bool running =
        std::system(("echo get_server_list | " + env + "nvidia-cuda-mps-control >/dev/null 2>&1")
                        .c_str()) == 0;
    if ((mode == ShareMode::kMps) != running) {
      throw Unavailable("GPU " + std::to_string(gpu.index) + ": '" + command +
                        "' did not take effect (exit " + std::to_string(rc) +
                        "; is nvidia-cuda-mps-control installed, and are we root?)");
    }
    return {};
  }
  std::vector<std::pair<std::string, std::string>> ClientEnvironment(
      const node::Device& gpu, ShareMode mode, const node::TenantLimits& limits) const override {
    if (mode != ShareMode::kMps) return {};
    std::vector<std::pair<std::string, std::string>> env = {
        {"CUDA_MPS_PIPE_DIRECTORY", PipeDir(gpu)},
        // The MPS server sees only its GPU, so it is device 0 to its clients.
        {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=" + std::to_string(limits.memory >> 20) + "M"},
    };
    if (limits.cap_permille < node::kNoCap) {
      env.push_back(
          {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", std::to_string((limits.cap_permille + 9) / 10)});
    }
    AddMpsClientPriority(limits, &env);
    return env;
  }
  bool Healthy(const node::Device& gpu) const override {
    try {
      node::RealDevice(gpu.index);  // NVML answers NVML_ERROR_GPU_IS_LOST for a lost GPU
      return true;
    } catch (const Error&) {
      return false;
    }
  }
  // NVML measures no per-process GPU time inside MIG instances: their meter reads nothing (and
  // gpumuxd refuses caps and weights there).
  std::unique_ptr<DeviceMeter> Meter(const node::Device& device) const override {
    return MakeNvmlMeter(device.mig_instance >= 0 ? -1 : device.index);
  }
  MigGeometry MigGeometryOf(const node::Device& gpu) const override {
    return node::ReadMigGeometry(gpu.index);
  }
  QuotaEnforcement Enforcement(const node::Device& device) const override {
    if (device.mig_instance >= 0) return QuotaEnforcement::kMig;
    try {
      const node::NvmlLibrary& nvml = node::Nvml();
      return nvml.has_memory_limits() && CgroupV2Mounted() ? QuotaEnforcement::kDriver
                                                           : QuotaEnforcement::kShim;
    } catch (const Error&) {
      return QuotaEnforcement::kShim;  // no driver: the GPU is not answering either
    }
  }
  void SetGroupLimit(const node::Device& gpu, const std::string& group_dir,
                     std::optional<uint64_t> hard) override {
    const node::NvmlLibrary& nvml = node::Nvml();
    nvmlSetMemoryLimits_v1_t limits{group_dir.c_str(), 0, hard.value_or(nvml::kMemoryLimitMax)};
    nvml.Check(nvml.set_memory_limits(nvml.Gpu(gpu.index), &limits),
               "GPU " + std::to_string(gpu.index) + " memory limit of " + group_dir);
  }

 private:
  std::string PipeDir(const node::Device& gpu) const {
    return dir_ + "/mps" + std::to_string(gpu.index);
  }

  // MIG mode on, the layout checked against the geometry the driver lists and made (or kept); each
  // instance is a device with the memory and SMs its profile has and its MIG device's UUID.
  static std::vector<node::Device> LayOutMig(const node::Device& gpu,
                                             const std::vector<std::string>& layout) {
    node::SetMigMode(gpu.index, true);
    node::Device described = gpu;
    described.mig = node::ReadMigGeometry(gpu.index);
    MigLayout placed = PlaceInCreationOrder(*described.mig, layout);
    std::vector<std::string> uuids = node::ApplyMigLayout(gpu.index, *described.mig, placed);
    std::vector<node::Device> instances;
    for (size_t k = 0; k < placed.instances.size(); ++k) {
      instances.push_back(node::MigInstanceDevice(described, placed, int(k)));
      instances.back().uuid = uuids[k];
    }
    return instances;
  }

  std::string dir_;
};

}  // namespace

std::unique_ptr<ShareBackend> MakeSimulatedBackend(const std::string& runtime_dir) {
  return std::make_unique<SimulatedBackend>(runtime_dir);
}
std::unique_ptr<ShareBackend> MakeNvidiaBackend(const std::string& runtime_dir) {
  return std::make_unique<NvidiaBackend>(runtime_dir);
}

}  // namespace gpumux::agent
