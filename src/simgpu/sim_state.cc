#include "simgpu/sim_state.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <string>

#include "base/process.h"

namespace gpumux::sim {
namespace {

constexpr uint64_t kStateMagic = 0x324d495358555047ull;  // "GPUXSIM2": layout 2, with the timeline

double EnvDouble(const char* name, double fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtod(v, nullptr) : fallback;
}

// The device the environment describes (what `gpumux run --sim` and gpumuxd set).
SimSpec SpecFromEnvironment(uint64_t capacity) {
  const char* mode = std::getenv("GPUMUX_SIM_MODE");
  return {capacity, EnvDouble("GPUMUX_SIM_BANDWIDTH", 2.0e12),
          EnvDouble("GPUMUX_SIM_FLOPS", 300e12),
          mode && std::string(mode) == "mps" ? ShareMode::kMps : ShareMode::kTimeSlice};
}

// Written once by the process that creates the state file; later processes use what it holds.
void Describe(SimState* s, const SimSpec& spec) {
  s->capacity = spec.capacity;
  s->bandwidth = spec.bandwidth;
  s->flops = spec.flops;
  s->mode.store(spec.mode);
  s->next_address.store(0x7f0000000000ull);
}

SimState* MapState(const std::string& path, const SimSpec& spec) {
  int fd = open(path.c_str(), O_RDWR | O_CREAT, 0666);
  if (fd < 0) return nullptr;
  fchmod(fd, 0666);  // one device for the processes of every user, as a real GPU is
  flock(fd, LOCK_EX);
  struct stat st;
  fstat(fd, &st);
  bool fresh = st.st_size == 0;
  if (fresh && ftruncate(fd, sizeof(SimState)) != 0) {
    close(fd);
    return nullptr;
  }
  void* p = mmap(nullptr, sizeof(SimState), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  SimState* s = p == MAP_FAILED ? nullptr : static_cast<SimState*>(p);
  if (s && fresh) {
    Describe(s, spec);
    s->magic = kStateMagic;
  }
  if (s && s->magic != kStateMagic) s = nullptr;
  flock(fd, LOCK_UN);
  close(fd);
  return s;
}

}  // namespace

const SimDevice& Device() {
  static const SimDevice* device = [] {
    auto* d = new SimDevice();
    const char* mem = std::getenv("GPUMUX_SIM_MEMORY");
    if (!mem || !*mem) return d;
    d->memory = std::strtoull(mem, nullptr, 10);
    const char* name = std::getenv("GPUMUX_SIM_NAME");
    d->name = name ? name : "gpumux simulated GPU";
    const char* sms = std::getenv("GPUMUX_SIM_SMS");
    d->sms = sms ? std::atoi(sms) : 108;
    const char* state = std::getenv("GPUMUX_SIM_STATE");
    d->state = MapState(state && *state ? state : "/dev/shm/gpumux-sim-" + std::to_string(getuid()),
                        SpecFromEnvironment(d->memory));
    return d;
  }();
  return *device;
}

int ProcessSlot() {
  static int slot = [] {
    SimState* s = Device().state;
    auto start = gpumux::ProcessStartTime(getpid());
    if (!s || !start) return -1;
    for (int i = 0; i < kMaxSimProcesses; ++i) {
      int32_t expected = 0;
      if (s->processes[i].pid.compare_exchange_strong(expected, -1)) {
        s->processes[i].start_time = *start;
        s->processes[i].used.store(0);
        s->processes[i].gpu_ns.store(0);
        s->processes[i].tail_ns.store(0);
        s->processes[i].pid.store(getpid());
        return i;
      }
    }
    return -1;
  }();
  return slot;
}

void ReclaimDeadProcesses(SimState* s) {
  for (SimProcess& p : s->processes) {
    int32_t pid = p.pid.load();
    if (pid <= 0) continue;
    auto start = gpumux::ProcessStartTime(pid);
    if (start && *start == p.start_time) continue;
    if (!p.pid.compare_exchange_strong(pid, -1)) continue;
    s->used.fetch_sub(p.used.exchange(0));
    p.pid.store(0);
  }
}

bool Take(uint64_t bytes) {
  SimState* s = Device().state;
  uint64_t used = s->used.load();
  do {
    if (used + bytes > s->capacity) {
      ReclaimDeadProcesses(s);
      used = s->used.load();
      if (used + bytes > s->capacity) return false;
    }
  } while (!s->used.compare_exchange_weak(used, used + bytes));
  if (int slot = ProcessSlot(); slot >= 0) s->processes[slot].used.fetch_add(bytes);
  return true;
}

void Give(uint64_t bytes) {
  SimState* s = Device().state;
  s->used.fetch_sub(bytes);
  if (int slot = ProcessSlot(); slot >= 0) s->processes[slot].used.fetch_sub(bytes);
}

}  // namespace gpumux::sim

namespace gpumux::sim {

bool CreateSimState(const std::string& path, const SimSpec& spec) {
  SimState* s = MapState(path, spec);
  if (s) munmap(s, sizeof(SimState));
  return s != nullptr;
}

bool SetSimMode(const std::string& path, ShareMode mode) {
  int fd = open(path.c_str(), O_RDWR);
  if (fd < 0) return false;
  struct stat st;
  bool ok = fstat(fd, &st) == 0 && size_t(st.st_size) >= sizeof(SimState);
  void* p =
      ok ? mmap(nullptr, sizeof(SimState), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  close(fd);
  if (p == MAP_FAILED) return false;
  auto* s = static_cast<SimState*>(p);
  ok = s->magic == kStateMagic;
  if (ok) s->mode.store(mode);
  munmap(p, sizeof(SimState));
  return ok;
}

uint64_t NewAddress(uint64_t bytes) {
  return Device().state->next_address.fetch_add((bytes + 511) & ~uint64_t(511));
}

uint64_t Execute(uint64_t ready_ns, uint64_t duration_ns) {
  SimState* s = Device().state;
  uint64_t end;
  if (s->mode == ShareMode::kTimeSlice) {
    uint64_t free_at = s->free_at_ns.load();
    do {
      end = std::max(ready_ns, free_at) + duration_ns;
    } while (!s->free_at_ns.compare_exchange_weak(free_at, end));
  } else {
    uint64_t busy = 1;  // this process, plus every other process whose work has not ended
    for (const SimProcess& p : s->processes) {
      if (p.pid.load(std::memory_order_relaxed) > 0 && p.pid.load() != getpid() &&
          p.tail_ns.load() > ready_ns)
        ++busy;
    }
    end = ready_ns + duration_ns * busy;
  }
  if (int slot = ProcessSlot(); slot >= 0) {
    SimProcess& me = s->processes[slot];
    me.gpu_ns.fetch_add(duration_ns);
    uint64_t tail = me.tail_ns.load();
    while (tail < end && !me.tail_ns.compare_exchange_weak(tail, end)) {
    }
  }
  return end;
}

}  // namespace gpumux::sim
