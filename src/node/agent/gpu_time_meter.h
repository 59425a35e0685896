// gpumuxd's measure of the GPU time each process uses on one device: what caps, weights and
// priorities divide, taken from the device, never from a tenant. On a real GPU, NVML's per-process
// utilisation samples (one per process per sampling period, node/gpu_time_samples.h); on the
// simulated one, the GPU time the simulated device charged each process, read from its state file
// with pread (never mapped, so nothing done to that file can fault gpumuxd).
//
// Not thread-safe: one meter per device, read by gpumuxd's compute thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gpumux::agent {

class GpuTimeMeter {
 public:
  virtual ~GpuTimeMeter() = default;
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
};

// The simulated device whose state file is `state_path` (simgpu/sim_state.h).
std::unique_ptr<GpuTimeMeter> MakeSimulatedMeter(std::string state_path);
// Real GPU `index` through NVML; a meter that reads nothing where NVML cannot measure (no
// driver, or MIG mode).
std::unique_ptr<GpuTimeMeter> MakeNvmlMeter(int index);

}  // namespace gpumux::agent
