// The demand model against published batch-1 decode measurements (bench/fidelity/decode.csv):
// each row's prediction with gpumux's defaults and with the catalog's engine class, the engine
// constants refitted on the fit half, and the median and worst |error| on each half. Then the
// co-location model against published slowdowns of copies sharing a GPU
// (bench/fidelity/colocation.csv): the model before its queueing terms, with them unfitted, and
// with the constants fitted on the fit half.
//   ./build/release/bench/gpumux_fidelity_report [--csv OUT] [--colocation FILE] [DECODE.csv]
// Exit 0 when the rows read; the numbers are the report (docs/calibration.md shows them).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>

#include "base/error.h"
#include "core/catalog.h"
#include "core/decode_fidelity.h"
#include "share/colocation_fidelity.h"
#include "share/strategy.h"

namespace {

void PrintSummary(const char* what, const gpumux::ErrorSummary& fit,
                  const gpumux::ErrorSummary& check) {
  std::printf(
      "%-34s fit half: median %5.1f%%, worst %5.1f%% (%zu rows) | check half: median "
      "%5.1f%%, worst %5.1f%% (%zu rows)\n",
      what, 100 * fit.median_abs, 100 * fit.worst_abs, fit.rows, 100 * check.median_abs,
      100 * check.worst_abs, check.rows);
}

// What gpumux predicted for `m` before its co-location terms (closed forms for identical copies):
// under MPS no slowdown until the copies' summed demand passes the GPU (the fluid model alone);
// time-sliced, max-min fair shares of the time the switches leave.
double SlowdownBefore(const gpumux::ColocationMeasurement& m) {
  double demand = m.copies * m.solo_busy;
  if (m.mode == gpumux::ShareMode::kMps) return std::max(1.0, demand);
  double usable = gpumux::kTimeSliceUsableModelled;
  return std::max(1.0, demand / usable);
}

const char* HalfName(gpumux::ColocationMeasurement::Half h) {
  switch (h) {
    case gpumux::ColocationMeasurement::Half::kFit: return "fit";
    case gpumux::ColocationMeasurement::Half::kCheck: return "check";
    case gpumux::ColocationMeasurement::Half::kExcluded: return "excl";
  }
  return "?";
}

void ColocationReport(const std::string& path) {
  using gpumux::ColocationMeasurement;
  using Half = ColocationMeasurement::Half;
  std::vector<ColocationMeasurement> rows = gpumux::ReadColocationMeasurements(path);
  gpumux::ColocationConstants model, plain{1.0, 1.0};
  gpumux::ColocationConstants fitted = gpumux::FitColocation(rows);
  std::printf("\nco-location: each copy's slowdown (copies / aggregate speedup)\n");
  std::printf("%-24s %-5s %-5s %-9s %2s %5s %8s | %7s %7s | %7s %7s | %7s %7s\n", "id", "half",
              "gpu", "mode", "n", "busy", "measured", "before", "error", "plain", "error", "model",
              "error");
  std::vector<double> before[3];
  for (const ColocationMeasurement& m : rows) {
    double b = SlowdownBefore(m);
    double p = gpumux::PredictColocationSlowdown(m, plain);
    double w = gpumux::PredictColocationSlowdown(m, model);
    double meas = m.measured_slowdown();
    before[int(m.half)].push_back(std::abs(gpumux::RelativeError(b, meas)));
    std::printf(
        "%-24s %-5s %-5s %-9s %2d %5.2f %8.2f | %7.2f %+6.1f%% | %7.2f %+6.1f%% | %7.2f "
        "%+6.1f%%\n",
        m.id.c_str(), HalfName(m.half), m.gpu.c_str(),
        std::string(gpumux::ShareModeName(m.mode)).c_str(), m.copies, m.solo_busy, meas, b,
        100 * gpumux::RelativeError(b, meas), p, 100 * gpumux::RelativeError(p, meas), w,
        100 * gpumux::RelativeError(w, meas));
  }
  std::printf("\n");
  PrintSummary("before (fluid MPS, fair time shares)",
               gpumux::SummariseErrors(before[int(Half::kFit)]),
               gpumux::SummariseErrors(before[int(Half::kCheck)]));
  PrintSummary("queueing, constants 1 (unfitted)",
               gpumux::SummariseColocation(rows, Half::kFit, plain),
               gpumux::SummariseColocation(rows, Half::kCheck, plain));
  PrintSummary("queueing, the model's constants",
               gpumux::SummariseColocation(rows, Half::kFit, model),
               gpumux::SummariseColocation(rows, Half::kCheck, model));
  gpumux::ErrorSummary excluded = gpumux::SummariseColocation(rows, Half::kExcluded, model);
  std::printf("excluded rows with the model: median %.1f%%, worst %.1f%% (%zu rows)\n",
              100 * excluded.median_abs, 100 * excluded.worst_abs, excluded.rows);
  std::printf("\nrefitted constants: sm_active_to_busy %.2f, timeslice_hold %.2f\n",
              fitted.sm_active_to_busy, fitted.timeslice_hold);
  std::printf("model constants:    sm_active_to_busy %.2f, timeslice_hold %.2f\n",
              model.sm_active_to_busy, model.timeslice_hold);
}

void PrintBand(const std::string& what, const gpumux::ErrorSummary& s) {
  std::printf("  %-26s median %5.1f%%, p90 %5.1f%%, worst %5.1f%% (%zu rows)\n", what.c_str(),
              100 * s.median_abs, 100 * s.p90_abs, 100 * s.worst_abs, s.rows);
}

// Leave one source out: each source predicted by engine classes fitted on the other sources.
// The error of the next engine and the next source, as a user meets it.
void LeaveOneSourceOutReport(const std::vector<gpumux::DecodeMeasurement>& rows,
                             const gpumux::Catalog& catalog) {
  std::vector<double> predicted = gpumux::LeaveOneSourceOut(rows, catalog);
  std::map<std::string, std::vector<double>> by_source, by_engine, by_dtype;
  std::vector<double> all;
  std::printf(
      "\nleave one source out: each source predicted by engine classes fitted on the others\n");
  std::printf("%-24s %-16s %-12s %-5s %9s %9s %7s\n", "id", "source", "engine", "dtype", "measured",
              "predicted", "error");
  for (size_t i = 0; i < rows.size(); ++i) {
    const gpumux::DecodeMeasurement& m = rows[i];
    double error = gpumux::RelativeError(predicted[i], m.measured_tokens_per_second);
    std::printf("%-24s %-16s %-12s %-5s %9.2f %9.2f %+6.1f%%\n", m.id.c_str(), m.source_id.c_str(),
                m.engine.c_str(), m.dtype.c_str(), m.measured_tokens_per_second, predicted[i],
                100 * error);
    all.push_back(std::abs(error));
    by_source[m.source_id].push_back(std::abs(error));
    by_engine[m.engine].push_back(std::abs(error));
    by_dtype[m.dtype].push_back(std::abs(error));
  }
  std::printf("\n");
  PrintBand("all rows", gpumux::SummariseErrors(all));
  for (const auto& [name, errors] : by_engine)
    PrintBand("engine " + name, gpumux::SummariseErrors(errors));
  for (const auto& [name, errors] : by_dtype)
    PrintBand("format " + name, gpumux::SummariseErrors(errors));
  for (const auto& [name, errors] : by_source)
    PrintBand("source " + name, gpumux::SummariseErrors(errors));
}

}  // namespace

int main(int argc, char** argv) {
  std::string path = std::string(GPUMUX_SOURCE_DIR) + "/bench/fidelity/decode.csv", out;
  std::string colocation = std::string(GPUMUX_SOURCE_DIR) + "/bench/fidelity/colocation.csv";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--csv" && i + 1 < argc) {
      out = argv[++i];
    } else if (a == "--colocation" && i + 1 < argc) {
      colocation = argv[++i];
    } else if (!a.empty() && a[0] != '-') {
      path = a;
    } else {
      std::fprintf(stderr, "usage: %s [--csv OUT] [--colocation FILE] [DECODE.csv]\n", argv[0]);
      return 2;
    }
  }
  try {
    gpumux::Catalog catalog = gpumux::Catalog::LoadBundled();
    std::vector<gpumux::DecodeMeasurement> rows = gpumux::ReadDecodeMeasurements(path);
    const gpumux::EngineProfile& compiled = catalog.FindEngine("compiled");
    gpumux::EngineProfile fitted = gpumux::FitEngine(rows, catalog, compiled);

    std::printf("%-18s %-5s %-10s %-12s %-5s %2s %9s | %9s %7s | %9s %7s\n", "id", "half", "gpu",
                "model", "dtype", "tp", "measured", "defaults", "error", "engine", "error");
    std::ofstream csv;
    if (!out.empty()) {
      csv.open(out);
      csv << "id,half,gpu,model,dtype,tp,engine,measured_tok_s,predicted_defaults_tok_s,"
             "predicted_engine_tok_s,error_defaults,error_engine,source\n";
    }
    for (const gpumux::DecodeMeasurement& m : rows) {
      const gpumux::EngineProfile& engine = catalog.FindEngine(m.engine);
      double plain = gpumux::PredictDecode(m, catalog, nullptr);
      double with_engine = gpumux::PredictDecode(m, catalog, &engine);
      double e1 = gpumux::RelativeError(plain, m.measured_tokens_per_second);
      double e2 = gpumux::RelativeError(with_engine, m.measured_tokens_per_second);
      std::printf("%-18s %-5s %-10s %-12s %-5s %2d %9.2f | %9.2f %+6.1f%% | %9.2f %+6.1f%%\n",
                  m.id.c_str(), m.fit ? "fit" : "check", m.gpu.c_str(), m.model.c_str(),
                  m.dtype.c_str(), m.tp, m.measured_tokens_per_second, plain, 100 * e1, with_engine,
                  100 * e2);
      if (csv.is_open())
        csv << m.id << ',' << (m.fit ? "fit" : "check") << ',' << m.gpu << ',' << m.model << ','
            << m.dtype << ',' << m.tp << ',' << engine.name << ',' << m.measured_tokens_per_second
            << ',' << plain << ',' << with_engine << ',' << e1 << ',' << e2 << ',' << m.source
            << '\n';
    }
    std::printf("\n");
    PrintSummary("defaults (eta 0.7, no overheads)",
                 gpumux::Summarise(rows, true, catalog, nullptr),
                 gpumux::Summarise(rows, false, catalog, nullptr));
    PrintSummary("catalog engine 'compiled'", gpumux::Summarise(rows, true, catalog, &compiled),
                 gpumux::Summarise(rows, false, catalog, &compiled));
    PrintSummary("refitted on the fit half", gpumux::Summarise(rows, true, catalog, &fitted),
                 gpumux::Summarise(rows, false, catalog, &fitted));
    std::printf(
        "\nrefitted constants: efficiency {16bit: %.3f, int8: %.3f, int4: %.3f}, "
        "step_overhead_ms: %.3f, allreduce_us: %.1f\n",
        fitted.efficiency_16bit, fitted.efficiency_int8, fitted.efficiency_int4,
        fitted.step_overhead_seconds * 1e3, fitted.allreduce_seconds * 1e6);
    std::printf(
        "catalog constants:  efficiency {16bit: %.3f, int8: %.3f, int4: %.3f}, "
        "step_overhead_ms: %.3f, allreduce_us: %.1f\n",
        compiled.efficiency_16bit, compiled.efficiency_int8, compiled.efficiency_int4,
        compiled.step_overhead_seconds * 1e3, compiled.allreduce_seconds * 1e6);
    LeaveOneSourceOutReport(rows, catalog);
    ColocationReport(colocation);
  } catch (const gpumux::Error& e) {
    std::fprintf(stderr, "gpumux_fidelity_report: %s\n", e.what());
    return 1;
  }
  return 0;
}
