// The demand model against published batch-1 decode measurements (bench/fidelity/decode.csv):
// each row's prediction with gpumux's defaults and with the catalog's engine class, the engine
// constants refitted on the fit half, and the median and worst |error| on each half.
//   ./build/release/bench/gpumux_fidelity_report [--csv OUT] [MEASUREMENTS.csv]
// Exit 0 when the rows read; the numbers are the report (docs/calibration.md shows them).
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

#include "base/error.h"
#include "core/catalog.h"
#include "core/decode_fidelity.h"

namespace {

void PrintSummary(const char* what, const gpumux::ErrorSummary& fit,
                  const gpumux::ErrorSummary& check) {
  std::printf(
      "%-34s fit half: median %5.1f%%, worst %5.1f%% (%zu rows) | check half: median "
      "%5.1f%%, worst %5.1f%% (%zu rows)\n",
      what, 100 * fit.median_abs, 100 * fit.worst_abs, fit.rows, 100 * check.median_abs,
      100 * check.worst_abs, check.rows);
}

}  // namespace

int main(int argc, char** argv) {
  std::string path = std::string(GPUMUX_SOURCE_DIR) + "/bench/fidelity/decode.csv", out;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--csv" && i + 1 < argc) {
      out = argv[++i];
    } else if (!a.empty() && a[0] != '-') {
      path = a;
    } else {
      std::fprintf(stderr, "usage: %s [--csv OUT] [MEASUREMENTS.csv]\n", argv[0]);
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
  } catch (const gpumux::Error& e) {
    std::fprintf(stderr, "gpumux_fidelity_report: %s\n", e.what());
    return 1;
  }
  return 0;
}
