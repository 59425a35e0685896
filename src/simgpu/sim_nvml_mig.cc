// The simulated GPU's Multi-Instance GPU, through NVML: MIG mode, GPU instance profiles and their
// placements, creating and destroying GPU and compute instances, MIG device handles and UUIDs. It
// lets gpumuxd's NVIDIA backend (node/mig_control.h) run end to end without a GPU.
//
// The GPU's MIG geometry comes from GPUMUX_SIM_MIG (node::SimMigDescription writes it from the
// catalog); what exists is kept in a small text file beside the first device's state (its path +
// ".mig"), so it outlives the process that made it, as a real GPU's instances do. The driver's
// rules are enforced: allowed starts, no overlap on the slot axis, compute slices, instance counts,
// one media-engine profile, MIG mode on, no destroying a GPU instance that holds compute instances
// or a compute instance a live process runs on (the simulated driver's processes, sim_state.h).
// GPUMUX_SIM_MIG_RESET_REQUIRED=1 makes a MIG mode change wait for a GPU reset (pending only), as
// on GPUs that need one. Not thread-safe beyond one caller at a time (gpumuxd holds its lock).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "abi/nvml_api.h"
#include "simgpu/sim_nvml_device.h"

using namespace gpumux::nvml;
using gpumux::sim::IsNvmlHandle;
using gpumux::sim::NvmlHandle;

namespace {

struct Profile {
  std::string name;  // "1g.10gb"
  unsigned id = 0, slices = 0, size = 0, sms = 0, max = 0;
  unsigned long long mib = 0;
  std::vector<unsigned> starts;
};

struct Geometry {
  unsigned slots = 0, compute = 0, sms = 0;
  std::vector<Profile> profiles;
};

// "slots=8 compute=7 sms=132|1g.10gb id=19 g=1 size=1 mib=9984 sms=16 max=7 starts=0,1,2|..."
const Geometry* TheGeometry() {
  static const Geometry* geometry = []() -> Geometry* {
    const char* text = std::getenv("GPUMUX_SIM_MIG");
    if (!text || !*text) return nullptr;
    auto* g = new Geometry();
    std::stringstream all(text);
    std::string part;
    bool first = true;
    while (std::getline(all, part, '|')) {
      std::istringstream fields(part);
      std::string field;
      Profile p;
      if (!first) fields >> p.name;
      while (fields >> field) {
        size_t eq = field.find('=');
        std::string key = field.substr(0, eq), value = field.substr(eq + 1);
        unsigned n = unsigned(std::strtoul(value.c_str(), nullptr, 10));
        if (first) {
          if (key == "slots") g->slots = n;
          if (key == "compute") g->compute = n;
          if (key == "sms") g->sms = n;
          continue;
        }
        if (key == "id") p.id = n;
        if (key == "g") p.slices = n;
        if (key == "size") p.size = n;
        if (key == "mib") p.mib = std::strtoull(value.c_str(), nullptr, 10);
        if (key == "sms") p.sms = n;
        if (key == "max") p.max = n;
        if (key == "starts") {
          std::stringstream starts(value);
          std::string s;
          while (std::getline(starts, s, ',')) p.starts.push_back(unsigned(std::atoi(s.c_str())));
        }
      }
      if (!first) g->profiles.push_back(p);
      first = false;
    }
    return g;
  }();
  return geometry;
}

const Profile* ProfileById(unsigned id) {
  for (const Profile& p : TheGeometry()->profiles) {
    if (p.id == id) return &p;
  }
  return nullptr;
}

struct Instance {
  unsigned id = 0, profile = 0, start = 0, size = 0, computes = 0, serial = 0;
};

struct MigState {
  unsigned current = kMigDisable, pending = kMigDisable, next_serial = 1, next_id = 1;
  std::vector<Instance> instances;
};

std::string StatePath() { return gpumux::sim::Device(0).path + ".mig"; }

MigState Load() {
  MigState s;
  std::ifstream in(StatePath());
  std::string word;
  while (in >> word) {
    if (word == "mode") in >> s.current >> s.pending >> s.next_serial >> s.next_id;
    if (word == "gi") {
      Instance i;
      in >> i.id >> i.profile >> i.start >> i.size >> i.computes >> i.serial;
      s.instances.push_back(i);
    }
  }
  return s;
}

void Save(const MigState& s) {
  std::string path = StatePath(), tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << "mode " << s.current << " " << s.pending << " " << s.next_serial << " " << s.next_id
        << "\n";
    for (const Instance& i : s.instances) {
      out << "gi " << i.id << " " << i.profile << " " << i.start << " " << i.size << " "
          << i.computes << " " << i.serial << "\n";
    }
  }
  std::rename(tmp.c_str(), path.c_str());
}

// Handles: the GPU is the simulated device; a GPU instance, its compute instance and its MIG
// device are small tagged numbers carrying the GPU instance's id.
constexpr uintptr_t kGpuInstanceTag = 0x10000, kComputeTag = 0x20000, kMigDeviceTag = 0x30000;
template <typename Handle>
Handle Tagged(uintptr_t tag, unsigned id) {
  return reinterpret_cast<Handle>(tag + id);
}
template <typename Handle>
bool Untag(Handle h, uintptr_t tag, unsigned* id) {
  uintptr_t v = reinterpret_cast<uintptr_t>(h);
  if (v <= tag || v >= tag + 0x10000) return false;
  *id = unsigned(v - tag);
  return true;
}

Instance* Find(MigState& s, unsigned id) {
  for (Instance& i : s.instances) {
    if (i.id == id) return &i;
  }
  return nullptr;
}

// Whether `p` may be placed at `start` next to what exists (the driver's rules).
bool Fits(const MigState& s, const Profile& p, unsigned start) {
  bool allowed = false;
  for (unsigned st : p.starts) allowed |= st == start;
  if (!allowed) return false;
  unsigned compute = p.slices, same = 1;
  bool media = p.name.find("+me") != std::string::npos;
  for (const Instance& i : s.instances) {
    const Profile* other = ProfileById(i.profile);
    if (start < i.start + i.size && i.start < start + p.size) return false;
    compute += other->slices;
    same += i.profile == p.id;
    if (media && other->name.find("+me") != std::string::npos) return false;
  }
  return compute <= TheGeometry()->compute && same <= p.max;
}

std::string MigUuid(unsigned serial) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "MIG-5a1e0000-0000-4000-8000-%012x", serial);
  return buf;
}

// Whether a live process runs on instance `i`'s MIG device (the simulated driver records each
// process's, sim_state.h).
bool RunsProcesses(const Instance& i) {
  gpumux::sim::SimState* state = gpumux::sim::Device(0).state;
  if (!state) return false;
  gpumux::sim::ReclaimDeadProcesses(state);
  const std::string uuid = MigUuid(i.serial);
  for (int k = 0; k < gpumux::sim::kMaxSimProcesses; ++k) {
    if (state->processes[k].pid.load() > 0 && uuid == state->mig_devices[k]) return true;
  }
  return false;
}

}  // namespace

extern "C" {

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned int* current, unsigned int* pending) {
  if (!IsNvmlHandle(d) || !current || !pending) return kErrorInvalidArgument;
  if (!TheGeometry()) return kErrorNotSupported;
  MigState s = Load();
  *current = s.current;
  *pending = s.pending;
  return kSuccess;
}

nvmlReturn_t nvmlDeviceSetMigMode(nvmlDevice_t d, unsigned int mode, nvmlReturn_t* activation) {
  if (!IsNvmlHandle(d) || !activation || mode > kMigEnable) return kErrorInvalidArgument;
  if (!TheGeometry()) return kErrorNotSupported;
  MigState s = Load();
  if (mode == kMigDisable && !s.instances.empty()) return kErrorInUse;
  s.pending = mode;
  const char* reset = std::getenv("GPUMUX_SIM_MIG_RESET_REQUIRED");
  bool waits = reset && std::string(reset) == "1" && s.current != mode;
  if (!waits) s.current = mode;
  *activation = waits ? kErrorInUse : kSuccess;
  Save(s);
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(nvmlDevice_t d, unsigned int profile,
                                                  nvmlGpuInstanceProfileInfo_v2_t* info) {
  if (!IsNvmlHandle(d) || !info || info->version != kGpuInstanceProfileInfoV2)
    return kErrorInvalidArgument;
  if (!TheGeometry() || Load().current != kMigEnable) return kErrorNotSupported;
  // The simulated GPU numbers its profile constants in catalog order.
  if (profile >= TheGeometry()->profiles.size()) return kErrorInvalidArgument;
  const Profile& p = TheGeometry()->profiles[profile];
  unsigned version = info->version;
  *info = {};
  info->version = version;
  info->id = p.id;
  info->sliceCount = p.slices;
  info->instanceCount = p.max;
  info->multiprocessorCount = p.sms;
  info->memorySizeMB = p.mib;
  std::snprintf(info->name, sizeof(info->name), "MIG %s", p.name.c_str());
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements_v2(nvmlDevice_t d, unsigned int profile_id,
                                                           nvmlGpuInstancePlacement_t* placements,
                                                           unsigned int* count) {
  if (!IsNvmlHandle(d) || !count) return kErrorInvalidArgument;
  if (!TheGeometry() || Load().current != kMigEnable) return kErrorNotSupported;
  const Profile* p = ProfileById(profile_id);
  if (!p) return kErrorInvalidArgument;
  if (!placements) {
    *count = unsigned(p->starts.size());
    return kSuccess;
  }
  if (*count < p->starts.size()) return kErrorInsufficientSize;
  for (size_t i = 0; i < p->starts.size(); ++i) placements[i] = {p->starts[i], p->size};
  *count = unsigned(p->starts.size());
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t d, unsigned int profile_id,
                                       nvmlGpuInstance_t* instances, unsigned int* count) {
  if (!IsNvmlHandle(d) || !instances || !count) return kErrorInvalidArgument;
  if (!TheGeometry()) return kErrorNotSupported;
  MigState s = Load();
  if (s.current != kMigEnable) return kErrorNotSupported;
  unsigned n = 0;
  for (const Instance& i : s.instances) {
    if (i.profile != profile_id) continue;
    if (n == *count) return kErrorInsufficientSize;
    instances[n++] = Tagged<nvmlGpuInstance_t>(kGpuInstanceTag, i.id);
  }
  *count = n;
  return kSuccess;
}

nvmlReturn_t nvmlDeviceCreateGpuInstanceWithPlacement(nvmlDevice_t d, unsigned int profile_id,
                                                      const nvmlGpuInstancePlacement_t* placement,
                                                      nvmlGpuInstance_t* instance) {
  if (!IsNvmlHandle(d) || !placement || !instance) return kErrorInvalidArgument;
  if (!TheGeometry()) return kErrorNotSupported;
  MigState s = Load();
  if (s.current != kMigEnable) return kErrorNotSupported;
  const Profile* p = ProfileById(profile_id);
  if (!p || placement->size != p->size) return kErrorInvalidArgument;
  if (!Fits(s, *p, placement->start)) return kErrorInsufficientResources;
  Instance i{s.next_id++, p->id, placement->start, p->size, 0, 0};
  s.instances.push_back(i);
  Save(s);
  *instance = Tagged<nvmlGpuInstance_t>(kGpuInstanceTag, i.id);
  return kSuccess;
}

nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gi, nvmlGpuInstanceInfo_t* info) {
  unsigned id;
  MigState s = Load();
  if (!info || !Untag(gi, kGpuInstanceTag, &id) || !Find(s, id)) return kErrorInvalidArgument;
  const Instance& i = *Find(s, id);
  info->device = NvmlHandle(0);
  info->id = i.id;
  info->profileId = i.profile;
  info->placement = {i.start, i.size};
  return kSuccess;
}

nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t gi) {
  unsigned id;
  MigState s = Load();
  if (!Untag(gi, kGpuInstanceTag, &id) || !Find(s, id)) return kErrorInvalidArgument;
  if (Find(s, id)->computes) return kErrorInUse;
  std::erase_if(s.instances, [id](const Instance& i) { return i.id == id; });
  Save(s);
  return kSuccess;
}

// One compute instance profile per GPU instance size: constant 0 takes the whole GPU instance.
nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t gi,
                                                          unsigned int profile,
                                                          unsigned int engine_profile,
                                                          nvmlComputeInstanceProfileInfo_t* info) {
  unsigned id;
  MigState s = Load();
  if (!info || !Untag(gi, kGpuInstanceTag, &id) || !Find(s, id) ||
      engine_profile != kComputeInstanceEngineShared) {
    return kErrorInvalidArgument;
  }
  if (profile != 0) return kErrorNotSupported;
  const Profile* p = ProfileById(Find(s, id)->profile);
  *info = {};
  info->id = 100 + p->slices;
  info->sliceCount = p->slices;
  info->instanceCount = 1;
  info->multiprocessorCount = p->sms;
  return kSuccess;
}

nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t gi, unsigned int profile_id,
                                                  nvmlComputeInstance_t* compute) {
  unsigned id;
  MigState s = Load();
  if (!compute || !Untag(gi, kGpuInstanceTag, &id) || !Find(s, id)) return kErrorInvalidArgument;
  Instance& i = *Find(s, id);
  if (profile_id != 100 + ProfileById(i.profile)->slices) return kErrorInvalidArgument;
  if (i.computes) return kErrorInsufficientResources;
  i.computes = 1;
  i.serial = s.next_serial++;
  Save(s);
  *compute = Tagged<nvmlComputeInstance_t>(kComputeTag, id);
  return kSuccess;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t gi, unsigned int profile_id,
                                                nvmlComputeInstance_t* computes,
                                                unsigned int* count) {
  unsigned id;
  MigState s = Load();
  if (!computes || !count || !Untag(gi, kGpuInstanceTag, &id) || !Find(s, id))
    return kErrorInvalidArgument;
  const Instance& i = *Find(s, id);
  unsigned n = i.computes && profile_id == 100 + ProfileById(i.profile)->slices ? 1 : 0;
  if (n > *count) return kErrorInsufficientSize;
  if (n) computes[0] = Tagged<nvmlComputeInstance_t>(kComputeTag, id);
  *count = n;
  return kSuccess;
}

nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t ci) {
  unsigned id;
  MigState s = Load();
  if (!Untag(ci, kComputeTag, &id) || !Find(s, id) || !Find(s, id)->computes)
    return kErrorInvalidArgument;
  if (RunsProcesses(*Find(s, id))) return kErrorInUse;  // the driver's answer
  Find(s, id)->computes = 0;
  Save(s);
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t d, unsigned int* count) {
  if (!IsNvmlHandle(d) || !count) return kErrorInvalidArgument;
  *count = TheGeometry() ? TheGeometry()->compute : 0;
  return kSuccess;
}

// MIG devices are the GPU instances that hold a compute instance, in creation order.
nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t d, unsigned int index,
                                                 nvmlDevice_t* mig) {
  if (!IsNvmlHandle(d) || !mig) return kErrorInvalidArgument;
  MigState s = Load();
  unsigned n = 0;
  for (const Instance& i : s.instances) {
    if (!i.computes) continue;
    if (n++ == index) {
      *mig = Tagged<nvmlDevice_t>(kMigDeviceTag, i.id);
      return kSuccess;
    }
  }
  return kErrorNotFound;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t mig, unsigned int* id) {
  MigState s = Load();
  if (!id || !Untag(mig, kMigDeviceTag, id) || !Find(s, *id)) return kErrorInvalidArgument;
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char* uuid, unsigned int length) {
  if (!uuid || length < kUuidBufferSize / 2) return kErrorInvalidArgument;
  unsigned id;
  if (const gpumux::sim::SimDevice* device = gpumux::sim::DeviceOfHandle(d)) {
    std::snprintf(uuid, length, "GPU-5a1e0000-0000-4000-8000-%012d", device->ordinal);
    return kSuccess;
  }
  MigState s = Load();
  if (!Untag(d, kMigDeviceTag, &id) || !Find(s, id)) return kErrorInvalidArgument;
  std::snprintf(uuid, length, "%s", MigUuid(Find(s, id)->serial).c_str());
  return kSuccess;
}

}  // extern "C"
