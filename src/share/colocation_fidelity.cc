#include "share/colocation_fidelity.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "base/error.h"
#include "core/measurement_csv.h"
#include "share/strategy_registry.h"
#include "share/tenant.h"

namespace gpumux {

std::vector<ColocationMeasurement> ReadColocationMeasurements(const std::string& path) {
  const std::vector<std::string> kColumns = {
      "id",        "half",        "gpu",           "mode",             "copies",
      "solo_busy", "busy_metric", "measured_speedup", "source",        "notes"};
  std::vector<ColocationMeasurement> rows;
  ReadMeasurementRows(path, kColumns, [&](const std::string& where,
                                          const std::vector<std::string>& f) {
    auto number_of = [&](size_t i) {
      return MeasurementNumber(where, kColumns[i], f[i], /*positive=*/true);
    };
    ColocationMeasurement m;
    m.id = f[0];
    if (f[1] == "fit") {
      m.half = ColocationMeasurement::Half::kFit;
    } else if (f[1] == "check") {
      m.half = ColocationMeasurement::Half::kCheck;
    } else if (f[1] == "excluded") {
      m.half = ColocationMeasurement::Half::kExcluded;
    } else {
      throw BadInput(fmt::format("{}: half: '{}' is not fit, check or excluded", where, f[1]));
    }
    m.gpu = f[2];
    std::optional<ShareMode> mode = ParseShareMode(f[3]);
    if (!mode || (*mode != ShareMode::kMps && *mode != ShareMode::kTimeSlice))
      throw BadInput(fmt::format("{}: mode: '{}' is not mps or timeslice", where, f[3]));
    m.mode = *mode;
    double copies = number_of(4);
    if (copies < 2 || copies != std::floor(copies))
      throw BadInput(
          fmt::format("{}: copies: '{}' is not a whole number of at least 2", where, f[4]));
    m.copies = int(copies);
    m.solo_busy = number_of(5);
    if (m.solo_busy > 1)
      throw BadInput(fmt::format("{}: solo_busy: '{}' is not a share in (0, 1]", where, f[5]));
    if (f[6] != "sm_active" && f[6] != "kernel_time")
      throw BadInput(
          fmt::format("{}: busy_metric: '{}' is not sm_active or kernel_time", where, f[6]));
    m.sm_active = f[6] == "sm_active";
    m.measured_speedup = number_of(7);
    m.source = f[8], m.notes = f[9];
    rows.push_back(m);
  });
  return rows;
}

double PredictColocationSlowdown(const ColocationMeasurement& m, const ColocationConstants& c) {
  // Only shares of time matter: a GPU of 1 TB/s and steps of 10 ms stand for any.
  GpuKind gpu;
  gpu.name = m.gpu;
  gpu.memory_bytes = 1e15;
  gpu.bandwidth = 1e12;
  gpu.tflops_bf16 = 1000;
  gpu.timeslice_hold = c.timeslice_hold;
  constexpr double kStep = 10e-3;
  double busy = std::min(1.0, m.solo_busy * (m.sm_active ? c.sm_active_to_busy : 1.0));
  Tenant copy;
  copy.name = m.id;
  copy.work.kind = "generic";
  copy.work.other_bytes = 1e9;
  copy.work.bytes_per_step = busy * kStep * gpu.bandwidth;
  copy.work.bandwidth_efficiency = 1;
  copy.work.efficiency_stated = true;
  copy.work.step_overhead_seconds = (1 - busy) * kStep;
  std::vector<TenantLoad> loads(size_t(m.copies), MakeLoad(copy, gpu));  // identical copies
  std::vector<const TenantLoad*> view;
  for (const TenantLoad& l : loads) view.push_back(&l);
  return StrategyFor(m.mode).Evaluate(gpu, view).tenants[0].slowdown;
}

ErrorSummary SummariseColocation(const std::vector<ColocationMeasurement>& rows,
                                 ColocationMeasurement::Half half, const ColocationConstants& c) {
  std::vector<double> errors;
  for (const ColocationMeasurement& m : rows) {
    if (m.half != half) continue;
    errors.push_back(
        std::abs(RelativeError(PredictColocationSlowdown(m, c), m.measured_slowdown())));
  }
  return SummariseErrors(std::move(errors));
}

ColocationConstants FitColocation(const std::vector<ColocationMeasurement>& rows) {
  ColocationConstants best;
  double best_loss = INFINITY;
  for (int i = 0; i <= 150; ++i) {
    for (int j = 0; j <= 200; ++j) {
      ColocationConstants c{1 + 0.01 * i, 1 + 0.02 * j};
      double loss = 0;
      for (const ColocationMeasurement& m : rows) {
        if (m.half != ColocationMeasurement::Half::kFit) continue;
        loss += std::pow(std::log(PredictColocationSlowdown(m, c) / m.measured_slowdown()), 2);
      }
      if (loss < best_loss) best_loss = loss, best = c;
    }
  }
  return best;
}

}  // namespace gpumux
