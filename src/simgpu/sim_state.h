// The simulated GPU's device state, shared by every process that uses it (and by the simulated
// driver and NVML libraries): capacity, memory in use, which process holds how much, and the
// device's execution timeline. Lives in a memory-mapped file named by GPUMUX_SIM_STATE; described
// by GPUMUX_SIM_NAME, GPUMUX_SIM_MEMORY, GPUMUX_SIM_SMS, GPUMUX_SIM_BANDWIDTH (bytes/s),
// GPUMUX_SIM_FLOPS (FLOP/s) and GPUMUX_SIM_MODE (timeslice or mps); `gpumux run --sim KIND` sets
// them from the catalog.
//
// Execution model. Work (a kernel, a copy, a graph) has a duration known when it is submitted (the
// roofline of its bytes and FLOPs, sim_kernel.h). In time-slice mode the device runs one context's
// work at a time: work starts when both its stream and the device are free, first come first served
// across processes (a fair model of the real round robin when kernels are shorter than the slice).
// In MPS mode processes' work runs concurrently and each piece is stretched by the number of
// processes with work in flight when it starts (they share the SMs and bandwidth). A process is
// charged the GPU time its work occupies, when the work is submitted.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "base/share_mode.h"

namespace gpumux::sim {

inline constexpr int kMaxSimProcesses = 1024;

struct SimProcess {
  std::atomic<int32_t> pid;
  uint64_t start_time;
  std::atomic<uint64_t> used;
  std::atomic<uint64_t> gpu_ns;   // GPU time charged to its work
  std::atomic<uint64_t> tail_ns;  // when its last submitted work ends
};

struct SimState {
  uint64_t magic;
  uint64_t capacity;
  double bandwidth;  // bytes/s
  double flops;      // FLOP/s
  std::atomic<ShareMode> mode;
  std::atomic<uint64_t> used;
  std::atomic<uint64_t> next_address;
  std::atomic<uint64_t> free_at_ns;  // time-slice mode: when the device finishes what it was given
  SimProcess processes[kMaxSimProcesses];
};

struct SimDevice {
  std::string name;
  uint64_t memory = 0;
  int sms = 0;
  SimState* state = nullptr;  // null if the environment describes no device
};

// The device this process sees, mapped on first call. Thread-safe.
const SimDevice& Device();

// This process's slot in the state (registered on first call), or -1.
int ProcessSlot();

// Returns the memory of processes that died without freeing it, as the driver does at exit.
void ReclaimDeadProcesses(SimState* state);

// Reserves `bytes` of device memory for this process; false when the device is full.
bool Take(uint64_t bytes);
void Give(uint64_t bytes);

// What describes a simulated device when its state file is created.
struct SimSpec {
  uint64_t capacity;
  double bandwidth, flops;
  ShareMode mode;
};

// Creates the state file at `path` (mode 0666: processes of every user share the device) if it
// does not exist; false if it cannot, or if a file there is not a simulated device's state.
bool CreateSimState(const std::string& path, const SimSpec& spec);

// Switches the device whose state file is at `path` to `mode` (later work follows it); false if
// the file does not exist or is not a simulated device's state. For gpumuxd's simulated backend.
bool SetSimMode(const std::string& path, ShareMode mode);

// A fresh device address range of `bytes` (512-byte aligned); never reused.
uint64_t NewAddress(uint64_t bytes);

// Submits `duration_ns` of work that may start at `ready_ns` (its stream's previous work is done);
// returns when it ends on the device and charges it to this process. Lock-free.
uint64_t Execute(uint64_t ready_ns, uint64_t duration_ns);

}  // namespace gpumux::sim
