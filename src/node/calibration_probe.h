// The measurements of `gpumux calibrate`, made through the CUDA driver API of whatever
// libcuda.so.1 this process loads (the real driver, or the simulated one under
// `gpumux calibrate --sim`), on device 0 with kernels of its own: a streaming kernel (HBM
// bandwidth), a math kernel (FLOP/s), an empty one (launch and synchronisation gaps). Timings come
// from the driver's events, as CUDA programs time their kernels.
//
// Kernels: the simulated GPU's module format (simgpu/sim_kernel.h). Real GPUs need PTX kernels,
// which are not written yet: Open refuses a real driver, saying so.
//
// Not thread-safe: one probe per process, used from one thread.
#pragma once

#include <memory>
#include <string>

namespace gpumux::node {

class CalibrationProbe {
 public:
  // Loads the driver, initialises it and loads the kernels on device 0. Throws Error
  // (unavailable) naming what is missing or refused.
  static std::unique_ptr<CalibrationProbe> Open();
  virtual ~CalibrationProbe() = default;

  // The device's name and the driver's version, as the driver reports them.
  virtual std::string DeviceName() = 0;
  virtual std::string DriverVersion() = 0;
  // Achieved bytes/s and FLOP/s of back-to-back kernels over about `seconds`.
  virtual double Bandwidth(double seconds) = 0;
  virtual double Flops(double seconds) = 0;
  // Seconds per launch of `count` empty kernels back to back; seconds per launch-and-synchronise.
  virtual double LaunchSeconds(int count) = 0;
  virtual double SyncSeconds(int count) = 0;
};

}  // namespace gpumux::node
