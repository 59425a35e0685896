#include "simgpu/sim_state.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/cgroup.h"
#include "base/clock.h"
#include "base/comma_list.h"
#include "base/process.h"
#include "simgpu/sim_memory_limits.h"
#include "simgpu/sim_mps.h"

namespace gpumux::sim {
namespace {

constexpr uint64_t kStateMagic = 0x374d495358555047ull;  // "GPUXSIM7": layout 7, MIG devices

double EnvDouble(const char* name, double fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtod(v, nullptr) : fallback;
}

// The device the environment describes (what `gpumux run --sim` and gpumuxd set).
SimSpec SpecFromEnvironment(uint64_t capacity) {
  const char* mode = std::getenv("GPUMUX_SIM_MODE");
  return WithSchedulingFromEnvironment(
      {capacity, EnvDouble("GPUMUX_SIM_BANDWIDTH", 2.0e12), EnvDouble("GPUMUX_SIM_FLOPS", 300e12),
       mode && std::string(mode) == "mps" ? ShareMode::kMps : ShareMode::kTimeSlice});
}

// Written once by the process that creates the state file; later processes use what it holds.
void Describe(SimState* s, const SimSpec& spec) {
  s->capacity = spec.capacity;
  s->bandwidth = spec.bandwidth;
  s->flops = spec.flops;
  s->below_normal_weight = spec.below_normal_weight;
  s->mode.store(spec.mode);
  s->next_address.store(0x7f0000000000ull);
  StartSchedule(&s->schedule, spec.timeslice_ns, spec.switch_ns);
}

// Holds the schedule's lock: one process at a time works the round robin out. A holder that died
// (its pid is gone) is taken over. Short critical sections: spins.
class ScheduleLock {
 public:
  explicit ScheduleLock(SimState* s) : s_(s) {
    const int32_t me = getpid();
    for (int spins = 0;; ++spins) {
      int32_t holder = 0;
      if (s_->schedule_lock.compare_exchange_weak(holder, me)) return;
      if (holder > 0 && spins % 1024 == 1023 && kill(holder, 0) != 0 && errno == ESRCH &&
          s_->schedule_lock.compare_exchange_strong(holder, me))
        return;
      if (spins % 64 == 63) sched_yield();
    }
  }
  ~ScheduleLock() { s_->schedule_lock.store(0); }

 private:
  SimState* s_;
};

// Adds the GPU time a process's work ran to what it is charged (a ChargeFn).
void ChargeProcess(int context, uint64_t ns, void* state) {
  static_cast<SimState*>(state)->processes[context].gpu_ns.fetch_add(ns);
}

// Plays the device's schedule forward to `now_ns` as its mode runs work: time-sliced (the round
// robin, sim_timeslice.h) or shared (MPS-like, sim_mps.h). With the schedule's lock held.
void AdvanceLocked(SimState* s, uint64_t now_ns) {
  if (s->mode.load() == ShareMode::kMps) {
    AdvanceShared(&s->schedule, now_ns, ChargeProcess, s);
  } else {
    Advance(&s->schedule, now_ns, ChargeProcess, s);
  }
}

// When `slot`'s work up to `ticket` will be done if no more work comes: time-sliced, the earliest
// (if the context had the GPU from now on); shared, at the present sharing as each context's work
// runs out. With the schedule's lock held, after AdvanceLocked.
uint64_t DoneForecastLocked(const SimState* s, int slot, uint64_t ticket) {
  return s->mode.load() == ShareMode::kMps ? SharedDoneForecast(s->schedule, slot, ticket)
                                           : EarliestDone(s->schedule, slot, ticket);
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

SimSpec WithSchedulingFromEnvironment(SimSpec spec) {
  spec.timeslice_ns = uint64_t(EnvDouble("GPUMUX_SIM_TIMESLICE_US", 1024) * 1000);
  spec.switch_ns = uint64_t(EnvDouble("GPUMUX_SIM_SWITCH_US", 25) * 1000);
  spec.below_normal_weight = std::clamp(EnvDouble("GPUMUX_SIM_BELOW_NORMAL_WEIGHT", 1.0), 0.0, 1.0);
  return spec;
}

namespace {

struct Devices {
  std::vector<SimDevice> list;
  SimDevice none;  // what an ordinal out of range gets
};

const Devices& AllDevices() {
  static const Devices* devices = [] {
    auto* d = new Devices();  // never destroyed: callable during exit
    const char* mem = std::getenv("GPUMUX_SIM_MEMORY");
    if (!mem || !*mem) return d;
    const char* name = std::getenv("GPUMUX_SIM_NAME");
    const char* sms = std::getenv("GPUMUX_SIM_SMS");
    const char* states = std::getenv("GPUMUX_SIM_STATE");
    std::string list =
        states && *states ? states : "/dev/shm/gpumux-sim-" + std::to_string(getuid());
    for (const std::string& path : SplitCommas(list)) {
      if (int(d->list.size()) == kMaxSimDevices) break;
      SimDevice device;
      device.ordinal = int(d->list.size());
      device.memory = std::strtoull(mem, nullptr, 10);
      device.name = name ? name : "gpumux simulated GPU";
      device.sms = sms ? std::atoi(sms) : 108;
      device.path = path;
      device.state = MapState(device.path, SpecFromEnvironment(device.memory));
      d->list.push_back(std::move(device));
    }
    return d;
  }();
  return *devices;
}

}  // namespace

int DeviceCount() { return int(AllDevices().list.size()); }

bool HasDevices() { return DeviceCount() > 0 && Device(0).state != nullptr; }

const SimDevice& Device(int ordinal) {
  const Devices& d = AllDevices();
  return ordinal >= 0 && ordinal < int(d.list.size()) ? d.list[ordinal] : d.none;
}

int ProcessSlot(const SimDevice& device) {
  static std::once_flag once[kMaxSimDevices];
  static int slots[kMaxSimDevices];
  if (device.ordinal < 0 || device.ordinal >= kMaxSimDevices) return -1;
  std::call_once(once[device.ordinal], [&device] {
    slots[device.ordinal] = [&device] {
      SimState* s = device.state;
      auto start = gpumux::ProcessStartTime(getpid());
      if (!s || !start) return -1;
      for (int i = 0; i < kMaxSimProcesses; ++i) {
        int32_t expected = 0;
        if (s->processes[i].pid.compare_exchange_strong(expected, -1)) {
          s->processes[i].start_time = *start;
          const char* priority = std::getenv("CUDA_MPS_CLIENT_PRIORITY");
          s->processes[i].below_normal = priority && std::string(priority) == "1";
          s->processes[i].used.store(0);
          s->processes[i].gpu_ns.store(0);
          std::memset(s->groups[i], 0, kSimGroupPathSize);
          std::memset(s->mig_devices[i], 0, kSimMigDeviceSize);
          if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
              visible && std::strncmp(visible, "MIG-", 4) == 0) {
            size_t length = std::strcspn(visible, ",");
            if (length < kSimMigDeviceSize) std::memcpy(s->mig_devices[i], visible, length);
          }
          if (std::optional<std::string> group = gpumux::V2GroupOf(getpid());
              group && group->size() < kSimGroupPathSize)
            std::memcpy(s->groups[i], group->data(), group->size());
          {
            ScheduleLock lock(s);
            AdvanceLocked(s, NowNs());
            SliceContext& c = s->schedule.contexts[i];
            c.submitted_ns = c.served_ns = 0;
            c.next_run = 0;
            c.weight = s->processes[i].below_normal ? s->below_normal_weight : 1.0;
          }
          s->processes[i].pid.store(getpid());
          return i;
        }
      }
      return -1;
    }();
  });
  return slots[device.ordinal];
}

void ReclaimDeadProcesses(SimState* s) {
  for (SimProcess& p : s->processes) {
    int32_t pid = p.pid.load();
    if (pid <= 0) continue;
    auto start = gpumux::ProcessStartTime(pid);
    if (start && *start == p.start_time) continue;
    if (!p.pid.compare_exchange_strong(pid, -1)) continue;
    s->used.fetch_sub(p.used.exchange(0));
    {
      ScheduleLock lock(s);
      AdvanceLocked(s, NowNs());
      Drop(&s->schedule, int(&p - s->processes));  // its queued work dies with it
    }
    p.pid.store(0);
  }
}

bool Take(const SimDevice& device, uint64_t bytes) {
  SimState* s = device.state;
  // A driver's memory limit on a cgroup this process is in (R615+).
  if (std::optional<SimGroupLimits> l = LimitOfThisProcess(device); l && l->used + bytes > l->hard)
    return false;
  uint64_t used = s->used.load();
  do {
    if (used + bytes > s->capacity) {
      ReclaimDeadProcesses(s);
      used = s->used.load();
      if (used + bytes > s->capacity) return false;
    }
  } while (!s->used.compare_exchange_weak(used, used + bytes));
  if (int slot = ProcessSlot(device); slot >= 0) s->processes[slot].used.fetch_add(bytes);
  return true;
}

void Give(const SimDevice& device, uint64_t bytes) {
  SimState* s = device.state;
  s->used.fetch_sub(bytes);
  if (int slot = ProcessSlot(device); slot >= 0) s->processes[slot].used.fetch_sub(bytes);
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

uint64_t NewAddress(const SimDevice& device, uint64_t bytes) {
  // Each device's range in its own top bits: unique within the process whatever each device's
  // file has handed out (simulated addresses are never dereferenced).
  return (uint64_t(device.ordinal) << 56) +
         device.state->next_address.fetch_add((bytes + 511) & ~uint64_t(511));
}

Completion Execute(const SimDevice& device, uint64_t ready_ns, uint64_t duration_ns,
                   uint64_t max_queued_ns) {
  SimState* s = device.state;
  int slot = ProcessSlot(device);
  if (slot < 0) {  // no slot left in the device's table: the work runs as if alone
    Completion c;
    c.end_ns = ready_ns + duration_ns;
    return c;
  }
  const SliceContext& mine = s->schedule.contexts[slot];
  for (;;) {  // a full command queue blocks the launch
    uint64_t wait_until;
    {
      ScheduleLock lock(s);
      AdvanceLocked(s, NowNs());
      uint64_t queued = mine.submitted_ns - mine.served_ns;
      if (queued <= max_queued_ns) {
        Completion c;
        c.ticket[device.ordinal] = Submit(&s->schedule, slot, duration_ns);
        return c;
      }
      wait_until = DoneForecastLocked(s, slot, mine.submitted_ns - max_queued_ns);
    }
    SleepUntilNsPrecisely(std::min(wait_until, NowNs() + 1'000'000));
  }
}

namespace {

// Calls `f(device, slot, ticket)` for each device `c` waits on in time-slice mode.
template <typename F>
void ForEachTicket(const Completion& c, F f) {
  for (int d = 0; d < kMaxSimDevices; ++d) {
    if (c.ticket[d] == 0) continue;
    const SimDevice& device = Device(d);
    int slot = ProcessSlot(device);
    if (device.state && slot >= 0) f(device.state, slot, c.ticket[d]);
  }
}

}  // namespace

bool IsDone(const Completion& c) {
  if (NowNs() < c.end_ns) return false;
  bool done = true;
  ForEachTicket(c, [&](SimState* s, int slot, uint64_t ticket) {
    ScheduleLock lock(s);
    AdvanceLocked(s, NowNs());
    done = done && Done(s->schedule, slot, ticket);
  });
  return done;
}

namespace {

// Waits until `deadline_ns` as a driver's synchronising call does while few contexts are active
// (CU_CTX_SCHED_AUTO spins then): sleeps until shortly before it, then polls the clock.
void SpinUntilNs(uint64_t deadline_ns) {
  constexpr uint64_t kSpinNs = 50'000;
  if (deadline_ns > NowNs() + kSpinNs) SleepUntilNsPrecisely(deadline_ns - kSpinNs);
  while (NowNs() < deadline_ns) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
}

}  // namespace

void WaitDone(const Completion& c) {
  SpinUntilNs(c.end_ns);
  ForEachTicket(c, [](SimState* s, int slot, uint64_t ticket) {
    for (;;) {
      uint64_t earliest;
      {
        ScheduleLock lock(s);
        AdvanceLocked(s, NowNs());
        if (Done(s->schedule, slot, ticket)) return;
        earliest = DoneForecastLocked(s, slot, ticket);
      }
      // At least once a millisecond, so that the GPU time of work running is charged as it runs.
      uint64_t charge_by = NowNs() + 1'000'000;
      if (earliest <= charge_by) {
        SpinUntilNs(earliest);
      } else {
        SleepUntilNsPrecisely(charge_by);
      }
    }
  });
}

uint64_t DoneAtNs(const Completion& c) {
  WaitDone(c);
  uint64_t at = c.end_ns;
  ForEachTicket(c, [&](SimState* s, int slot, uint64_t ticket) {
    ScheduleLock lock(s);
    at = std::max(at, DoneAt(s->schedule, slot, ticket));
  });
  return at;
}

Completion ProcessTail(const SimDevice& device) {
  SimState* s = device.state;
  int slot = ProcessSlot(device);
  Completion c;
  if (!s || slot < 0) return c;
  ScheduleLock lock(s);
  c.ticket[device.ordinal] = s->schedule.contexts[slot].submitted_ns;
  return c;
}

}  // namespace gpumux::sim
