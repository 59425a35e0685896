// A kind of GPU as the catalog describes it: capacity, bandwidth, peak math rates and, for
// MIG-capable parts, the geometry the driver enforces. Plain data; Catalog builds and validates it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/calibration.h"
#include "core/dtype.h"

namespace gpumux {

// One GPU-instance profile, as `nvidia-smi mig -lgip/-lgipp` lists it.
struct MigProfile {
  std::string name;        // "3g.40gb"
  int id = 0;              // the profile ID nvidia-smi prints (unique per device, not global)
  int compute_slices = 0;  // g
  int memory_slices = 0;   // placement size on the slot axis
  double memory_bytes = 0;
  int sms = 0;
  int max_instances = 0;
  std::vector<int>
      placement_starts;  // allowed starts; each placement is [start, start+memory_slices)
  // "+me" and "+me.all" profiles hold the media engines: at most one may exist per GPU.
  bool holds_media_engines = false;
};

struct MigGeometry {
  int slots = 0;           // length of the placement axis (8 on A100/H100/H200/B200, 4 on A30)
  int compute_slices = 0;  // sum of g over instances may not exceed this
  int sms = 0;             // SMs usable in MIG mode (98 of 108 on A100)
  std::vector<MigProfile> profiles;
};

// Under time-slicing, how long a context keeps the GPU each step, as a multiple of the time its
// kernels run (at most its whole step): the scheduler does not hand the GPU on at every short host
// gap between a context's launches. Fitted, with the co-location model, on the fit half of
// published measurements (bench/fidelity/colocation.csv; docs/calibration.md).
inline constexpr double kTimeSliceHold = 2.08;

// The SM clock at which engine classes state their fixed step costs (EngineProfile): the A100's
// boost clock, the GPU most published decode measurements were made on.
inline constexpr double kReferenceSmClockHz = 1.41e9;

// Fractions of a GPU's peak bandwidth and math throughput.
struct Capacity {
  double bandwidth = 1, compute = 1;
};

struct GpuKind {
  std::string name;
  std::vector<std::string> aliases;
  double memory_bytes = 0;
  double bandwidth = 0;                                                      // peak HBM bytes/s
  double tflops_bf16 = 0, tflops_fp16 = 0, tflops_fp8 = 0, tflops_tf32 = 0;  // dense; 0 = none
  int sms = 0;
  double boost_clock_hz = 0;  // the SMs' boost clock; 0 = not stated
  double tdp_watts = 0;
  std::optional<double> price_per_hour;
  std::optional<MigGeometry> mig;
  std::vector<std::string> uncertain;  // catalog fields whose figure is not verified
  std::string source;                  // "file:line" where the entry was defined
  // What `gpumux calibrate` measured on one of these, when given (Catalog::Calibrate).
  std::optional<GpuCalibration> calibration;
  double timeslice_hold = kTimeSliceHold;  // see kTimeSliceHold

  // The SMs' clock the models use: the stated boost clock, or kReferenceSmClockHz where the
  // catalog states none.
  double SmClockHz() const { return boost_clock_hz > 0 ? boost_clock_hz : kReferenceSmClockHz; }
  // How long a fixed step cost stated at kReferenceSmClockHz takes on this GPU: the short kernels
  // and launch latencies that make up an engine's step overhead run at the SMs' clock
  // (docs/calibration.md shows it on published decode rates). 1 when the clock is not stated.
  double ClockedTimeScale() const { return kReferenceSmClockHz / SmClockHz(); }
  // Dense FLOP/s of tensor-core math in `dtype`. int8 and int4 weights are dequantised and
  // multiplied in bf16; a part without FP8 runs FP8 models' math at its FP16 rate.
  double PeakFlops(DType dtype) const;
  // The calibration's achieved fraction of peak bandwidth and of peak bf16 math (at most 1), or
  // nullopt without one.
  std::optional<double> MeasuredBandwidthEfficiency() const;
  std::optional<double> MeasuredComputeEfficiency() const;
  // The share of its time `n` time-sliced tenants get together: the calibration's for n (or its
  // largest n below), else `modelled`.
  double TimeSliceUsable(int n, double modelled) const;
  // What `tenants` MPS clients can use together of the peak bandwidth and bf16 math: the
  // calibration's achieved fractions (the bandwidth times what that many streaming clients got
  // together under MPS, where measured), else all of it.
  Capacity MpsCapacity(int tenants = 1) const;
};

}  // namespace gpumux
