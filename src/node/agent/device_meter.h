// gpumuxd's measure of the processes on one device, taken from the device, never from a tenant:
// the GPU time each uses (what caps, weights and priorities divide) and the memory each holds (what
// gpumuxd checks against each tenant's quota, and adopts for a process it has no grants of after
// its ledger was lost). On a real GPU,
// NVML's per-process utilisation samples (one per process per sampling period,
// node/gpu_time_samples.h) and running-process list; on the simulated one, what the simulated
// device charged each process, read from its state file with pread (never mapped, so nothing done
// to that file can fault gpumuxd).
//
// Not thread-safe: one meter per device, read by gpumuxd's compute thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gpumux::agent {

class DeviceMeter {
 public:
  virtual ~DeviceMeter() = default;
  struct Use {
    pid_t pid;
    uint64_t gpu_ns;
  };
  // GPU time each process used since the previous call, as far as it has been measured (a
  // process first seen counts from then on). Replaces `*out`.
  virtual void Read(std::vector<Use>* out) = 0;
  // How far the measurement lags now: time a process may have used that no sample shows yet.
  virtual uint64_t UnmeasuredNs() const = 0;
  // How often Read is worth calling (the device's figures change no faster).
  virtual uint64_t period_ns() const = 0;
  struct Held {
    pid_t pid;
    uint64_t bytes;
  };
  // The device memory each live process holds now, as the driver counts it (on a real GPU that
  // includes the process's CUDA context). Replaces `*out`; returns false, leaving it empty, where
  // the device cannot say (no driver, a MIG instance, a state file cut short).
  virtual bool ReadMemory(std::vector<Held>* out) = 0;
};

// The simulated device whose state file is `state_path` (simgpu/sim_state.h).
std::unique_ptr<DeviceMeter> MakeSimulatedMeter(std::string state_path);
// Real GPU `index` through NVML; a meter that reads nothing where NVML cannot measure (no
// driver, or MIG mode).
std::unique_ptr<DeviceMeter> MakeNvmlMeter(int index);

}  // namespace gpumux::agent
