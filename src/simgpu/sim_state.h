// The simulated GPUs' device state, shared by every process that uses them (and by the simulated
// driver and NVML libraries): per device, capacity, memory in use, which process holds how much,
// and the device's execution timeline. Each device lives in a memory-mapped file; GPUMUX_SIM_STATE
// names them, comma-separated, in the order of their ordinals (a process sees as many devices as it
// names, as CUDA_VISIBLE_DEVICES orders real ones); they are of one kind, described by
// GPUMUX_SIM_NAME, GPUMUX_SIM_MEMORY, GPUMUX_SIM_SMS, GPUMUX_SIM_BANDWIDTH (bytes/s),
// GPUMUX_SIM_FLOPS (FLOP/s) and GPUMUX_SIM_MODE (timeslice or mps); `gpumux run --sim KIND` sets
// them from the catalog.
//
// Execution model. Work (a kernel, a copy, a graph) has a duration known when it is submitted (the
// roofline of its bytes and FLOPs, sim_kernel.h). In time-slice mode the device runs one context's
// work at a time, round robin between the processes that have work, one timeslice each, a running
// kernel preempted at the slice's end (sim_timeslice.h; GPUMUX_SIM_TIMESLICE_US and
// GPUMUX_SIM_SWITCH_US set the slice and the switch cost); a process is charged GPU time as its
// work runs. In MPS mode processes' work runs concurrently, never preempted, and each piece is
// stretched while other processes' work runs beside it (they share the SMs and bandwidth;
// sim_mps.h); a process is charged its work's duration when it submits it.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "base/share_mode.h"
#include "simgpu/sim_timeslice.h"

namespace gpumux::sim {

inline constexpr int kMaxSimProcesses = 1024;
inline constexpr int kMaxSimDevices = 8;
inline constexpr size_t kSimGroupPathSize = 256;
inline constexpr size_t kSimMigDeviceSize = 64;

struct SimProcess {
  std::atomic<int32_t> pid;
  // 1: an MPS client of below-normal priority (CUDA_MPS_CLIENT_PRIORITY=1): in MPS-like mode it
  // shares the GPU with SimState::below_normal_weight of a normal client's weight.
  int32_t below_normal;
  uint64_t start_time;
  std::atomic<uint64_t> used;
  std::atomic<uint64_t> gpu_ns;  // GPU time charged to its work
};

struct SimState {
  uint64_t magic;
  uint64_t capacity;
  double bandwidth;  // bytes/s
  double flops;      // FLOP/s
  // MPS-like mode: a below-normal client's share beside a normal client's 1 (SimSpec).
  double below_normal_weight;
  std::atomic<ShareMode> mode;
  std::atomic<uint64_t> used;
  std::atomic<uint64_t> next_address;
  SimProcess processes[kMaxSimProcesses];
  std::atomic<int32_t> schedule_lock;  // pid of the process working the schedule out, or 0
  SliceSchedule schedule;              // time-slice mode; context i is processes[i]
  // The cgroup v2 directory of processes[i] (a full path; empty where v2 is not mounted or the
  // path is longer), for the driver's memory limits per cgroup (sim_memory_limits.h). Apart from
  // the processes, which gpumuxd's meter reads every few milliseconds.
  char groups[kMaxSimProcesses][kSimGroupPathSize];
  // The MIG device processes[i] runs on: the first entry of its CUDA_VISIBLE_DEVICES where that
  // names one ("MIG-..."), else empty (the whole GPU). The simulated NVML refuses to destroy a
  // compute instance a live process runs on, as the driver does (sim_nvml_mig.cc).
  char mig_devices[kMaxSimProcesses][kSimMigDeviceSize];
};
static_assert(kSliceContexts == kMaxSimProcesses);

struct SimDevice {
  int ordinal = 0;
  std::string name;
  uint64_t memory = 0;
  int sms = 0;
  std::string path;           // its state file
  SimState* state = nullptr;  // null if the environment describes no such device
};

// How many devices this process sees (0 if the environment describes none). Thread-safe.
int DeviceCount();
// Whether the environment describes a device this process could map (the driver's and NVML's
// "initialised"). Thread-safe.
bool HasDevices();
// Device `ordinal`, mapped on first call; one with no state for an ordinal out of range.
// Thread-safe.
const SimDevice& Device(int ordinal);

// This process's slot in `device`'s state (registered on first call), or -1.
int ProcessSlot(const SimDevice& device);

// Returns the memory of processes that died without freeing it, as the driver does at exit.
void ReclaimDeadProcesses(SimState* state);

// Reserves `bytes` of `device`'s memory for this process; false when the device is full.
bool Take(const SimDevice& device, uint64_t bytes);
void Give(const SimDevice& device, uint64_t bytes);

// What describes a simulated device when its state file is created.
struct SimSpec {
  uint64_t capacity;
  double bandwidth, flops;
  ShareMode mode;
  uint64_t timeslice_ns = 1'024'000;  // sim_timeslice.h
  uint64_t switch_ns = 25'000;
  // MPS-like mode: a below-normal client's weight in the sharing, a normal client's being 1
  // (GPUMUX_SIM_BELOW_NORMAL_WEIGHT; sim_mps.h): beside one below-normal client a normal one runs
  // at 1 / (1 + weight) of its speed alone, the below-normal one at weight / (1 + weight). 1 (the
  // default): client priority not modelled; 0: a normal client unslowed, the below-normal one
  // nearly stopped while it runs (kLeastWeight), the ideal of a priority the hardware applies to
  // block dispatch only ("a hint", NVIDIA), which a below-normal kernel's resident blocks and its
  // share of HBM bandwidth would erode. No published figure lies between.
  double below_normal_weight = 1.0;
};

// `spec` with the scheduling the environment asks for: GPUMUX_SIM_TIMESLICE_US,
// GPUMUX_SIM_SWITCH_US and GPUMUX_SIM_BELOW_NORMAL_WEIGHT (the defaults above where unset). For
// whoever creates a device's state: the first process of `gpumux run --sim`, or gpumuxd.
SimSpec WithSchedulingFromEnvironment(SimSpec spec);

// Creates the state file at `path` (mode 0666: processes of every user share the device) if it
// does not exist; false if it cannot, or if a file there is not a simulated device's state.
bool CreateSimState(const std::string& path, const SimSpec& spec);

// Switches the device whose state file is at `path` to `mode` (later work follows it); false if
// the file does not exist or is not a simulated device's state. For gpumuxd's simulated backend.
bool SetSimMode(const std::string& path, ShareMode mode);

// A fresh address range of `bytes` (512-byte aligned) on `device`; never reused, and never one of
// another device's in this process (one unified address space).
uint64_t NewAddress(const SimDevice& device, uint64_t bytes);

// What waiting on submitted work waits for: this process's schedule ticket on each device
// (sim_timeslice.h), or for a process without a slot the time the work ends. Work is done when all
// are reached; the later of two is the field-wise max (a process's work on a device is done in
// order), so a stream that waits on another device's event waits on both devices.
struct Completion {
  uint64_t ticket[kMaxSimDevices] = {};
  uint64_t end_ns = 0;
};
inline Completion Later(const Completion& a, const Completion& b) {
  Completion c;
  for (int d = 0; d < kMaxSimDevices; ++d)
    c.ticket[d] = a.ticket[d] > b.ticket[d] ? a.ticket[d] : b.ticket[d];
  c.end_ns = a.end_ns > b.end_ns ? a.end_ns : b.end_ns;
  return c;
}

// Submits `duration_ns` of this process's work on `device`, to run after the process's earlier
// work there (in both modes a process's work runs in order; `ready_ns` counts only for a process
// that got no slot in the device's table). It first waits while this process has more than
// `max_queued_ns` of work not done there, as a real launch blocks when the command queue is full.
Completion Execute(const SimDevice& device, uint64_t ready_ns, uint64_t duration_ns,
                   uint64_t max_queued_ns);
bool IsDone(const Completion& c);
// Waits until `c` is done and returns within a microsecond or two of it, as a real driver's
// synchronising call does while few contexts are active (CU_CTX_SCHED_AUTO then spins): sleeps
// until 50 µs before the work's earliest end, then spins on the clock (a launch-and-synchronise
// round trip: 112 µs sleeping with Linux's default timer slack, 27 µs with a slack of 1 ns, ~2 µs
// spinning).
void WaitDone(const Completion& c);
// When done work completed (waits until it is done).
uint64_t DoneAtNs(const Completion& c);
// All the work this process submitted so far on `device`.
Completion ProcessTail(const SimDevice& device);

}  // namespace gpumux::sim
