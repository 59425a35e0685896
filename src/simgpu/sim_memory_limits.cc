#include "simgpu/sim_memory_limits.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace gpumux::sim {
namespace {

constexpr uint64_t kLimitsMagic = 0x31494d4c58555047ull;  // "GPUXLMI1"

struct LimitEntry {
  std::atomic<uint32_t> in_use;  // 1 while it holds a group's limits
  char group[kSimGroupPathSize];
  std::atomic<uint64_t> soft, hard;
};
struct LimitsFile {
  uint64_t magic;
  LimitEntry entries[kMaxSimMemoryLimits];
};

std::string LimitsPath(const std::string& state_path) { return state_path + ".limits"; }

// Maps the limits file of the device at `state_path`: for writing (root; made if missing), or
// read-only. Null where it is missing (reading) or is not one.
LimitsFile* MapLimits(const std::string& state_path, bool write) {
  std::string path = LimitsPath(state_path);
  int fd = write ? open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)
                 : open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  struct stat st;
  bool ok = fstat(fd, &st) == 0;
  if (ok && write && size_t(st.st_size) < sizeof(LimitsFile))
    ok = ftruncate(fd, sizeof(LimitsFile)) == 0;
  else
    ok = ok && size_t(st.st_size) >= sizeof(LimitsFile);
  void* p = ok ? mmap(nullptr, sizeof(LimitsFile), write ? PROT_READ | PROT_WRITE : PROT_READ,
                      MAP_SHARED, fd, 0)
               : MAP_FAILED;
  close(fd);
  if (p == MAP_FAILED) return nullptr;
  auto* limits = static_cast<LimitsFile*>(p);
  if (write && limits->magic == 0) limits->magic = kLimitsMagic;
  if (limits->magic != kLimitsMagic) {
    munmap(p, sizeof(LimitsFile));
    return nullptr;
  }
  return limits;
}

// Whether group `group` is `outer` or lies below it.
bool Within(const char* group, const std::string& outer) {
  size_t n = outer.size();
  return std::strncmp(group, outer.c_str(), n) == 0 && (group[n] == '\0' || group[n] == '/');
}

// What the live processes of `group` (and below) hold on the device.
uint64_t GroupUsed(const SimState& s, const std::string& group) {
  uint64_t used = 0;
  for (int i = 0; i < kMaxSimProcesses; ++i)
    if (s.processes[i].pid.load() > 0 && Within(s.groups[i], group))
      used += s.processes[i].used.load();
  return used;
}

bool IsV2Group(const std::string& dir) {
  struct stat st;
  return !dir.empty() && dir[0] == '/' && dir.size() < kSimGroupPathSize &&
         stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) &&
         access((dir + "/cgroup.procs").c_str(), F_OK) == 0 &&
         access((dir + "/cgroup.controllers").c_str(), F_OK) == 0;  // v2 has it, v1 does not
}

// The device's state, mapped read-only for a reader that is not one of its processes.
const SimState* ReadState(const std::string& state_path) {
  int fd = open(state_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  void* p = mmap(nullptr, sizeof(SimState), PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  return p == MAP_FAILED ? nullptr : static_cast<const SimState*>(p);
}

}  // namespace

bool SimDriverHasMemoryLimits() {
  const char* v = std::getenv("GPUMUX_SIM_DRIVER_VERSION");
  return v && std::atoi(v) >= 615;
}

nvmlReturn_t SetSimMemoryLimits(const std::string& state_path, const std::string& group_dir,
                                uint64_t soft, uint64_t hard) {
  if (!SimDriverHasMemoryLimits()) return nvml::kErrorNotSupported;
  if (geteuid() != 0) return nvml::kErrorNoPermission;
  bool clear = soft == 0 && hard == nvml::kMemoryLimitMax;
  if (!clear && !IsV2Group(group_dir)) return nvml::kErrorNotFound;
  LimitsFile* file = MapLimits(state_path, true);
  if (!file) return nvml::kErrorInsufficientResources;
  int lock = open(LimitsPath(state_path).c_str(), O_RDONLY | O_CLOEXEC);
  flock(lock, LOCK_EX);  // one writer at a time
  LimitEntry* entry = nullptr;
  for (LimitEntry& e : file->entries)
    if (e.in_use.load() && group_dir == e.group) entry = &e;
  nvmlReturn_t result = nvml::kSuccess;
  if (clear) {
    if (entry) entry->in_use.store(0);
  } else {
    for (LimitEntry& e : file->entries)
      if (!entry && !e.in_use.load()) entry = &e;
    if (!entry) {
      result = nvml::kErrorInsufficientResources;
    } else {
      if (!entry->in_use.load()) {
        std::memset(entry->group, 0, sizeof(entry->group));
        std::memcpy(entry->group, group_dir.data(), group_dir.size());
      }
      entry->soft.store(soft);
      entry->hard.store(hard);
      entry->in_use.store(1);
    }
  }
  flock(lock, LOCK_UN);
  close(lock);
  munmap(file, sizeof(LimitsFile));
  return result;
}

nvmlReturn_t GetSimMemoryLimits(const std::string& state_path, const std::string& group_dir,
                                SimGroupLimits* limits) {
  if (!SimDriverHasMemoryLimits()) return nvml::kErrorNotSupported;
  LimitsFile* file = MapLimits(state_path, false);
  if (!file) return nvml::kErrorNotFound;
  nvmlReturn_t result = nvml::kErrorNotFound;
  for (LimitEntry& e : file->entries) {
    if (!e.in_use.load() || group_dir != e.group) continue;
    limits->soft = e.soft.load(), limits->hard = e.hard.load();
    const SimState* s = ReadState(state_path);
    limits->used = s ? GroupUsed(*s, group_dir) : 0;
    if (s) munmap(const_cast<SimState*>(s), sizeof(SimState));
    result = nvml::kSuccess;
  }
  munmap(file, sizeof(LimitsFile));
  return result;
}

std::optional<SimGroupLimits> LimitOfThisProcess(const SimDevice& device) {
  // Each device's limits file, mapped once it exists (root makes it with the first limit).
  static std::mutex mu;
  static LimitsFile* files[kMaxSimDevices] = {};
  int slot = ProcessSlot(device);
  if (!device.state || slot < 0 || device.ordinal >= kMaxSimDevices) return std::nullopt;
  const char* mine = device.state->groups[slot];
  if (!*mine) return std::nullopt;  // cgroup v2 is not mounted here
  LimitsFile* file;
  {
    std::lock_guard lock(mu);
    if (!files[device.ordinal]) files[device.ordinal] = MapLimits(device.path, false);
    file = files[device.ordinal];
  }
  if (!file) return std::nullopt;
  std::optional<SimGroupLimits> tightest;
  uint64_t least_room = 0;  // tightest's
  for (LimitEntry& e : file->entries) {
    if (!e.in_use.load()) continue;
    std::string group(e.group, strnlen(e.group, sizeof(e.group)));
    if (!Within(mine, group)) continue;
    SimGroupLimits l{e.soft.load(), e.hard.load(), GroupUsed(*device.state, group)};
    uint64_t room = l.hard > l.used ? l.hard - l.used : 0;
    if (!tightest || room < least_room) tightest = l, least_room = room;
  }
  return tightest;
}

}  // namespace gpumux::sim
