// The demand model against published decode measurements (bench/fidelity/decode.csv): each row's
// prediction with gpumux's defaults, with the catalog's engine class, and with its class fitted on
// the other sources alone (leave one source out: the error a user of the next engine or the next
// source meets), each class refitted beside the catalog's constants, and the left-out error
// overall and per class, engine, format, GPU and source. Then the
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
  std::printf("  %-28s median %5.1f%%, p90 %5.1f%%, worst %5.1f%% (%zu rows)\n", what.c_str(),
              100 * s.median_abs, 100 * s.p90_abs, 100 * s.worst_abs, s.rows);
}

void PrintConstants(const char* what, const gpumux::EngineProfile& e) {
  std::printf(
      "  %-9s efficiency {16bit: %.3f, fp8: %.3f, int8: %.3f, int4: %.3f}, step_overhead_ms: "
      "%.3f, layer_overhead_us: %.1f, allreduce_us: %.1f, dequant_bytes_per_sm_cycle: {int8: "
      "%.1f, int4: %.1f}, attention_bytes_per_sm_cycle: %.1f\n",
      what, e.efficiency_16bit, e.efficiency_fp8, e.efficiency_int8, e.efficiency_int4,
      e.step_overhead_seconds * 1e3, e.layer_overhead_seconds * 1e6, e.allreduce_seconds * 1e6,
      e.dequant_bytes_per_sm_cycle_int8, e.dequant_bytes_per_sm_cycle_int4,
      e.attention_bytes_per_sm_cycle);
}

// Every row predicted three ways: gpumux's defaults, its engine class as the catalog has it (fitted
// on all the class's rows), and leaving its source out (the class fitted on the other sources).
// Then each class's constants refitted here beside the catalog's, and the left-out error overall,
// per class (the band a plan puts on its engine), engine, format, GPU and source.
void DecodeReport(const std::vector<gpumux::DecodeMeasurement>& rows,
                  const gpumux::Catalog& catalog, const std::string& csv_path) {
  std::vector<double> left_out = gpumux::LeaveOneSourceOut(rows, catalog);
  std::map<std::string, std::map<std::string, std::vector<double>>> by;  // dimension -> key -> |e|
  std::vector<double> defaults, with_class, all;
  std::printf("%-34s %-15s %-10s %-14s %-5s %3s %8s | %8s %7s | %8s %7s | %8s %7s\n", "id",
              "source", "engine", "gpu", "dtype", "b", "measured", "defaults", "error", "class",
              "error", "left out", "error");
  std::ofstream csv;
  if (!csv_path.empty()) {
    csv.open(csv_path);
    csv << "id,source_id,gpu,model,dtype,batch,engine,class,measured_tok_s,"
           "predicted_defaults_tok_s,predicted_class_tok_s,predicted_left_out_tok_s\n";
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    const gpumux::DecodeMeasurement& m = rows[i];
    const gpumux::EngineProfile& engine = catalog.FindEngine(m.engine);
    double plain = gpumux::PredictDecode(m, catalog, nullptr);
    double fitted = gpumux::PredictDecode(m, catalog, &engine);
    double e0 = gpumux::RelativeError(plain, m.measured_tokens_per_second);
    double e1 = gpumux::RelativeError(fitted, m.measured_tokens_per_second);
    double e2 = gpumux::RelativeError(left_out[i], m.measured_tokens_per_second);
    std::printf(
        "%-34s %-15s %-10s %-14s %-5s %3d %8.2f | %8.2f %+6.1f%% | %8.2f %+6.1f%% | %8.2f "
        "%+6.1f%%\n",
        m.id.c_str(), m.source_id.c_str(), m.engine.c_str(), m.gpu.c_str(), m.dtype.c_str(),
        m.batch, m.measured_tokens_per_second, plain, 100 * e0, fitted, 100 * e1, left_out[i],
        100 * e2);
    defaults.push_back(std::abs(e0));
    with_class.push_back(std::abs(e1));
    all.push_back(std::abs(e2));
    by["class"][engine.name].push_back(std::abs(e2));
    by["engine"][m.engine].push_back(std::abs(e2));
    by["format"][m.dtype].push_back(std::abs(e2));
    by["gpu"][m.gpu].push_back(std::abs(e2));
    by["source"][m.source_id].push_back(std::abs(e2));
    if (csv.is_open())
      csv << m.id << ',' << m.source_id << ',' << m.gpu << ',' << m.model << ',' << m.dtype << ','
          << m.batch << ',' << m.engine << ',' << engine.name << ',' << m.measured_tokens_per_second
          << ',' << plain << ',' << fitted << ',' << left_out[i] << '\n';
  }
  std::printf(
      "\nengine classes: the catalog's constants, and refitted here on all the class's rows\n");
  // Each class refitted once on all its rows, with the loops of the engines that run it.
  std::map<std::string, gpumux::EngineProfile> refitted;
  std::map<std::string, double> loops;  // by engine
  for (const auto& [name, errors] : by["class"]) {
    const gpumux::EngineProfile& catalog_class = catalog.FindEngine(name);
    if (catalog_class.runs.empty())
      refitted[name] = gpumux::FitEngine(gpumux::RowsOfClass(rows, catalog, name), catalog,
                                         catalog_class, &loops);
  }
  for (const auto& [name, errors] : by["class"]) {
    const gpumux::EngineProfile& catalog_class = catalog.FindEngine(name);
    std::printf("%s (%zu rows)\n", name.c_str(), errors.size());
    if (!catalog_class.runs.empty()) {
      std::printf(
          "  runs %s from a loop of its own: its constants, + %.2f ms a step on the host (refitted "
          "%.2f ms)\n",
          catalog_class.runs.c_str(), catalog_class.host_overhead_seconds * 1e3, loops[name] * 1e3);
    } else {
      PrintConstants("catalog", catalog_class);
      PrintConstants("refitted", refitted[name]);
    }
    gpumux::ErrorSummary band = gpumux::SummariseErrors(errors);
    std::printf(
        "  left-out error: {median: %.3f, worst: %.3f}; the catalog states {median: %.3f, "
        "worst: %.3f}\n",
        band.median_abs, band.worst_abs, catalog_class.error_median, catalog_class.error_worst);
  }
  std::printf("\n|error| over %zu rows from %zu sources\n", rows.size(), by["source"].size());
  PrintBand("gpumux's defaults", gpumux::SummariseErrors(defaults));
  PrintBand("catalog classes (fitted on all)", gpumux::SummariseErrors(with_class));
  PrintBand("leaving each source out", gpumux::SummariseErrors(all));
  for (const char* dimension : {"class", "engine", "format", "gpu", "source"}) {
    std::printf("leaving each source out, by %s:\n", dimension);
    for (const auto& [key, errors] : by[dimension]) PrintBand(key, gpumux::SummariseErrors(errors));
  }
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
    DecodeReport(rows, catalog, out);
    ColocationReport(colocation);
  } catch (const gpumux::Error& e) {
    std::fprintf(stderr, "gpumux_fidelity_report: %s\n", e.what());
    return 1;
  }
  return 0;
}
