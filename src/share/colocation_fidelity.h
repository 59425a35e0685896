// How well the co-location model predicts published slowdowns: the measurements
// (bench/fidelity/colocation.csv, each with its source), the slowdown MPS and time-slicing predict
// for each, and the two constants fitted on one half of them. bench/fidelity_report.cc prints the
// report; colocation_fidelity_test.cc holds the model to its claim on the other half.
#pragma once

#include <string>
#include <vector>

#include "base/share_mode.h"
#include "core/decode_fidelity.h"
#include "core/gpu_kind.h"

namespace gpumux {

// Published SM Active understates the time a server's kernels are in flight by this factor (a
// kernel that leaves SMs idle counts only its busy ones): fitted with kTimeSliceHold on the fit
// half of bench/fidelity/colocation.csv. A property of how the measurements were read, not of the
// model: gpumux's own tenants state their kernels' time directly.
inline constexpr double kSmActiveToBusy = 1.20;

struct ColocationMeasurement {
  enum class Half { kFit, kCheck, kExcluded };
  std::string id;
  Half half = Half::kFit;
  std::string gpu;
  ShareMode mode = ShareMode::kMps;  // kMps or kTimeSlice
  int copies = 2;
  double solo_busy = 0;    // how busy one copy alone keeps the GPU, in (0, 1]
  bool sm_active = true;   // solo_busy is SM Active (else the share of time a kernel runs)
  double measured_speedup = 0;  // all copies' throughput over one copy's alone
  std::string source, notes;

  double measured_slowdown() const { return copies / measured_speedup; }
};

// Reads the CSV (lines starting with '#' are comments; the first other line is the header).
// Throws Error (bad input) naming the line and field for a row that does not read.
std::vector<ColocationMeasurement> ReadColocationMeasurements(const std::string& path);

// The model's two fitted constants.
struct ColocationConstants {
  double sm_active_to_busy = kSmActiveToBusy;
  double timeslice_hold = kTimeSliceHold;  // GpuKind::timeslice_hold
};

// Each copy's slowdown as gpumux's MPS or time-slicing strategy predicts it for `m`: `copies`
// tenants whose kernels run solo_busy (× sm_active_to_busy for SM Active) of each step and who
// spend the rest off the GPU, on a GPU whose time-slice hold is `c.timeslice_hold`.
double PredictColocationSlowdown(const ColocationMeasurement& m, const ColocationConstants& c);

// Over the rows of one half: |predicted / measured slowdown - 1|.
ErrorSummary SummariseColocation(const std::vector<ColocationMeasurement>& rows,
                                 ColocationMeasurement::Half half, const ColocationConstants& c);

// The constants that minimise the squared log error over the fit half (a grid of 0.01 in the SM
// Active factor over [1, 2.5] and 0.02 in the hold over [1, 5]: deterministic).
ColocationConstants FitColocation(const std::vector<ColocationMeasurement>& rows);

}  // namespace gpumux
