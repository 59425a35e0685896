#include "node/mig_control.h"

#include <algorithm>
#include <map>
#include <utility>

#include "base/error.h"
#include "node/device.h"
#include "node/nvml_library.h"

namespace gpumux::node {
namespace {

const NvmlLibrary& MigNvml() {
  const NvmlLibrary& nvml = Nvml();
  if (!nvml.has_mig())
    throw Unavailable(
        "this driver's NVML has no Multi-Instance GPU calls (R470 or later has them)");
  return nvml;
}

std::string Where(int gpu) { return "GPU " + std::to_string(gpu); }

struct GpuInstance {
  nvmlGpuInstance_t handle;
  nvmlGpuInstanceInfo_t info;
};

// Every GPU instance on the GPU, of the profiles in `geo`.
std::vector<GpuInstance> ListGpuInstances(const NvmlLibrary& nvml, nvmlDevice_t device, int gpu,
                                          const MigGeometry& geo) {
  std::vector<GpuInstance> all;
  for (const MigProfile& p : geo.profiles) {
    std::vector<nvmlGpuInstance_t> handles(size_t(std::max(p.max_instances, 1)) + 8);
    unsigned n = unsigned(handles.size());
    nvml.Check(nvml.gpu_instances(device, unsigned(p.id), handles.data(), &n),
               Where(gpu) + ": listing " + p.name + " instances");
    for (unsigned i = 0; i < n; ++i) {
      GpuInstance g{handles[i], {}};
      nvml.Check(nvml.gpu_instance_info(g.handle, &g.info),
                 Where(gpu) + ": describing a GPU instance");
      all.push_back(g);
    }
  }
  return all;
}

// The compute instance profile that spans the whole GPU instance (what `nvidia-smi mig -C` makes).
nvmlComputeInstanceProfileInfo_t WholeComputeProfile(const NvmlLibrary& nvml, nvmlGpuInstance_t gi,
                                                     int compute_slices, const std::string& where) {
  for (unsigned p = 0; p < nvml::kComputeInstanceProfileBound; ++p) {
    nvmlComputeInstanceProfileInfo_t info{};
    if (nvml.compute_instance_profile(gi, p, nvml::kComputeInstanceEngineShared, &info) ==
            nvml::kSuccess &&
        int(info.sliceCount) == compute_slices) {
      return info;
    }
  }
  throw Unavailable(where + ": the driver offers no compute instance spanning the GPU instance");
}

std::vector<nvmlComputeInstance_t> ComputeInstances(const NvmlLibrary& nvml, nvmlGpuInstance_t gi,
                                                    unsigned profile_id, const std::string& where) {
  std::vector<nvmlComputeInstance_t> cis(16);
  unsigned n = unsigned(cis.size());
  nvml.Check(nvml.compute_instances(gi, profile_id, cis.data(), &n),
             where + ": listing compute instances");
  cis.resize(n);
  return cis;
}

// Destroys GPU instance `g` and its compute instances; the driver refuses while a process uses it.
void DestroyOne(const NvmlLibrary& nvml, int gpu, const GpuInstance& g) {
  std::string where = Where(gpu) + " GPU instance " + std::to_string(g.info.id);
  for (unsigned p = 0; p < nvml::kComputeInstanceProfileBound; ++p) {
    nvmlComputeInstanceProfileInfo_t info{};
    if (nvml.compute_instance_profile(g.handle, p, nvml::kComputeInstanceEngineShared, &info) !=
        nvml::kSuccess)
      continue;
    for (nvmlComputeInstance_t ci : ComputeInstances(nvml, g.handle, info.id, where)) {
      nvml.Check(nvml.destroy_compute_instance(ci),
                 where + ": destroying a compute instance (is a process using it?)");
    }
  }
  nvml.Check(nvml.destroy_gpu_instance(g.handle), where + ": destroying it");
}

void DestroyAll(const NvmlLibrary& nvml, nvmlDevice_t device, int gpu, const MigGeometry& geo) {
  for (const GpuInstance& g : ListGpuInstances(nvml, device, gpu, geo)) DestroyOne(nvml, gpu, g);
}

// Gives GPU instance `g` (of `compute_slices`) the one compute instance spanning it that work runs
// through, unless it has it.
void SpanWithComputeInstance(const NvmlLibrary& nvml, int gpu, const GpuInstance& g,
                             int compute_slices) {
  std::string where = Where(gpu) + " GPU instance " + std::to_string(g.info.id);
  nvmlComputeInstanceProfileInfo_t whole =
      WholeComputeProfile(nvml, g.handle, compute_slices, where);
  if (!ComputeInstances(nvml, g.handle, whole.id, where).empty()) return;
  nvmlComputeInstance_t ci = nullptr;
  nvml.Check(nvml.create_compute_instance(g.handle, whole.id, &ci),
             where + ": creating its compute instance");
}

// Creates a GPU instance of `profile_id` at `start` (`size` memory slices).
GpuInstance CreateOne(const NvmlLibrary& nvml, nvmlDevice_t device, int gpu, unsigned profile_id,
                      unsigned start, unsigned size, const std::string& name) {
  std::string where = Where(gpu) + ": creating " + name + " at " + std::to_string(start);
  nvmlGpuInstancePlacement_t placement{start, size};
  GpuInstance g{};
  nvml.Check(nvml.create_gpu_instance(device, profile_id, &placement, &g.handle), where);
  nvml.Check(nvml.gpu_instance_info(g.handle, &g.info), where);
  return g;
}

// MIG device UUIDs by GPU instance id.
std::map<unsigned, std::string> MigDeviceUuids(const NvmlLibrary& nvml, nvmlDevice_t device,
                                               int gpu) {
  unsigned max = 0;
  nvml.Check(nvml.max_mig_devices(device, &max), Where(gpu) + ": counting MIG devices");
  std::map<unsigned, std::string> uuids;
  for (unsigned i = 0; i < max; ++i) {
    nvmlDevice_t mig = nullptr;
    if (nvml.mig_device(device, i, &mig) != nvml::kSuccess) continue;  // an empty index
    unsigned gi = 0;
    char uuid[nvml::kUuidBufferSize] = {0};
    nvml.Check(nvml.gpu_instance_id(mig, &gi), Where(gpu) + ": MIG device " + std::to_string(i));
    nvml.Check(nvml.uuid(mig, uuid, sizeof(uuid)),
               Where(gpu) + ": MIG device " + std::to_string(i) + " UUID");
    uuids[gi] = uuid;
  }
  return uuids;
}

}  // namespace

void SetMigMode(int gpu, bool on) {
  const NvmlLibrary& nvml = Nvml();
  if (!on && !nvml.has_mig()) return;  // a driver without MIG has it off
  MigNvml();
  nvmlDevice_t device = nvml.Gpu(gpu);
  unsigned current = 0, pending = 0, want = on ? nvml::kMigEnable : nvml::kMigDisable;
  nvmlReturn_t r = nvml.get_mig_mode(device, &current, &pending);
  if (!on && r == nvml::kErrorNotSupported) return;  // a GPU without MIG has it off
  nvml.Check(r, Where(gpu) + ": reading MIG mode (does this GPU support MIG?)");
  if (current == want && pending == want) return;
  if (!on && current == nvml::kMigEnable) DestroyAll(nvml, device, gpu, ReadMigGeometry(gpu));
  nvmlReturn_t activation = nvml::kSuccess;
  nvml.Check(nvml.set_mig_mode(device, want, &activation),
             Where(gpu) + ": turning MIG mode " + (on ? "on" : "off"));
  nvml.Check(nvml.get_mig_mode(device, &current, &pending), Where(gpu) + ": reading MIG mode");
  if (current != want) {
    throw Unavailable(Where(gpu) + ": MIG mode " + (on ? "on" : "off") +
                      " is pending until the GPU is reset (" +
                      (nvml.error_string ? nvml.error_string(activation) : "") +
                      "); stop its processes and run `nvidia-smi -i " + std::to_string(gpu) +
                      " -r`, then set the mode again");
  }
}

MigGeometry ReadMigGeometry(int gpu) {
  const NvmlLibrary& nvml = MigNvml();
  nvmlDevice_t device = nvml.Gpu(gpu);
  MigGeometry geo;
  for (unsigned constant = 0; constant < nvml::kGpuInstanceProfileBound; ++constant) {
    nvmlGpuInstanceProfileInfo_v2_t info{};
    info.version = nvml::kGpuInstanceProfileInfoV2;
    if (nvml.gpu_instance_profile(device, constant, &info) != nvml::kSuccess)
      continue;  // not on this GPU
    MigProfile p;
    p.name = info.name;
    if (p.name.rfind("MIG ", 0) == 0) p.name = p.name.substr(4);
    p.id = int(info.id);
    p.compute_slices = int(info.sliceCount);
    p.memory_bytes = double(info.memorySizeMB) * (1 << 20);
    p.sms = int(info.multiprocessorCount);
    p.max_instances = int(info.instanceCount);
    p.holds_media_engines = p.name.find("+me") != std::string::npos;
    std::vector<nvmlGpuInstancePlacement_t> placements(16);
    unsigned n = unsigned(placements.size());
    nvml.Check(nvml.possible_placements(device, info.id, placements.data(), &n),
               Where(gpu) + ": placements of " + p.name);
    for (unsigned i = 0; i < n; ++i) {
      p.placement_starts.push_back(int(placements[i].start));
      p.memory_slices = int(placements[i].size);
      geo.slots = std::max(geo.slots, int(placements[i].start + placements[i].size));
    }
    if (p.compute_slices > geo.compute_slices)
      geo.compute_slices = p.compute_slices, geo.sms = p.sms;
    geo.profiles.push_back(p);
  }
  if (geo.profiles.empty())
    throw Unavailable(Where(gpu) + ": the driver lists no MIG profiles (is MIG mode on?)");
  return geo;
}

std::vector<std::string> ApplyMigLayout(int gpu, const MigGeometry& geo, const MigLayout& layout) {
  const NvmlLibrary& nvml = MigNvml();
  nvmlDevice_t device = nvml.Gpu(gpu);
  std::vector<GpuInstance> existing = ListGpuInstances(nvml, device, gpu, geo);
  auto key = [](unsigned profile, unsigned start) { return std::make_pair(profile, start); };
  std::vector<std::pair<unsigned, unsigned>> want;
  for (const MigInstance& m : layout.instances)
    want.push_back(key(unsigned(m.profile->id), unsigned(m.start)));

  // Instance by instance: those the layout keeps stay, with their processes; those it lacks are
  // destroyed (the driver refuses a busy one); the new ones are made at their placements. A step
  // that fails undoes those before it, last first, and the GPU is left as it was.
  std::vector<GpuInstance> made(layout.instances.size());
  std::vector<bool> kept(layout.instances.size(), false);
  std::vector<GpuInstance> destroyed, created;
  try {
    for (const GpuInstance& g : existing) {
      auto k = key(g.info.profileId, g.info.placement.start);
      auto at = std::find(want.begin(), want.end(), k);
      if (at != want.end() && !kept[size_t(at - want.begin())]) {
        made[size_t(at - want.begin())] = g;
        kept[size_t(at - want.begin())] = true;
        continue;
      }
      DestroyOne(nvml, gpu, g);
      destroyed.push_back(g);
    }
    for (size_t k = 0; k < layout.instances.size(); ++k) {
      if (kept[k]) continue;
      const MigInstance& m = layout.instances[k];
      made[k] = CreateOne(nvml, device, gpu, unsigned(m.profile->id), unsigned(m.start),
                          unsigned(m.profile->memory_slices), m.profile->name);
      created.push_back(made[k]);
    }
  } catch (const Error&) {
    for (auto g = created.rbegin(); g != created.rend(); ++g) {
      try {
        DestroyOne(nvml, gpu, *g);
      } catch (const Error&) {  // the error that stopped the change is the one to report
      }
    }
    for (auto g = destroyed.rbegin(); g != destroyed.rend(); ++g) {
      for (const MigProfile& p : geo.profiles) {
        if (unsigned(p.id) != g->info.profileId) continue;
        try {
          SpanWithComputeInstance(
              nvml, gpu,
              CreateOne(nvml, device, gpu, g->info.profileId, g->info.placement.start,
                        g->info.placement.size, p.name),
              p.compute_slices);
        } catch (const Error&) {
        }
      }
    }
    throw;
  }
  for (size_t k = 0; k < made.size(); ++k)
    SpanWithComputeInstance(nvml, gpu, made[k], layout.instances[k].profile->compute_slices);
  std::map<unsigned, std::string> uuids = MigDeviceUuids(nvml, device, gpu);
  std::vector<std::string> result;
  for (const GpuInstance& g : made) {
    auto it = uuids.find(g.info.id);
    if (it == uuids.end())
      throw Unavailable(Where(gpu) + ": GPU instance " + std::to_string(g.info.id) +
                        " has no MIG device");
    result.push_back(it->second);
  }
  return result;
}

}  // namespace gpumux::node
