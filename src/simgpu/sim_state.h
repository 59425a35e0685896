// The simulated GPU's device state, shared by every process that uses it (and by the simulated
// driver and NVML libraries): capacity, memory in use, and which process holds how much. Lives in a
// memory-mapped file named by GPUMUX_SIM_STATE; described by GPUMUX_SIM_NAME, GPUMUX_SIM_MEMORY and
// GPUMUX_SIM_SMS (`gpumux run --sim KIND` sets them from the catalog).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <string>

namespace gpumux::sim {

inline constexpr int kMaxSimProcesses = 1024;

struct SimProcess {
  std::atomic<int32_t> pid;
  uint64_t start_time;
  std::atomic<uint64_t> used;
};

struct SimState {
  uint64_t magic;
  uint64_t capacity;
  std::atomic<uint64_t> used;
  std::atomic<uint64_t> next_address;
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

}  // namespace gpumux::sim
