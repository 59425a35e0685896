#include "core/decode_fidelity.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "base/error.h"
#include "core/measurement_csv.h"
#include "core/workload.h"

namespace gpumux {

std::vector<DecodeMeasurement> ReadDecodeMeasurements(const std::string& path) {
  const std::vector<std::string> kColumns = {
      "id", "half",  "gpu",     "model",          "dtype",  "quant_group", "engine",
      "tp", "batch", "context", "measured_tok_s", "source", "notes",       "source_id"};
  std::vector<DecodeMeasurement> rows;
  ReadMeasurementRows(
      path, kColumns, [&](const std::string& where, const std::vector<std::string>& f) {
        auto number_of = [&](size_t i) { return MeasurementNumber(where, kColumns[i], f[i]); };
        DecodeMeasurement m;
        m.id = f[0];
        if (f[1] != "fit" && f[1] != "check")
          throw BadInput(fmt::format("{}: half: '{}' is not fit or check", where, f[1]));
        m.fit = f[1] == "fit";
        m.gpu = f[2], m.model = f[3], m.dtype = f[4], m.engine = f[6];
        m.quant_group = int(number_of(5));
        m.tp = int(number_of(7));
        m.batch = int(number_of(8));
        m.context = int(number_of(9));
        m.measured_tokens_per_second = number_of(10);
        m.source = f[11], m.notes = f[12], m.source_id = f[13];
        if (m.source_id.empty()) throw BadInput(where + ": source_id: empty");
        if (m.tp < 1 || m.batch < 1 || !(m.measured_tokens_per_second > 0))
          throw BadInput(where + ": tp and batch must be at least 1, the rate above 0");
        rows.push_back(m);
      });
  return rows;
}

double PredictDecode(const DecodeMeasurement& m, const Catalog& catalog,
                     const EngineProfile* engine) {
  const GpuKind& gpu = catalog.FindGpu(m.gpu);
  LlmSpec spec;
  spec.shape = &catalog.FindModel(m.model);
  std::optional<DType> dtype = ParseDType(m.dtype);
  if (!dtype) throw BadInput(fmt::format("{}: unknown dtype '{}'", m.id, m.dtype));
  spec.dtype = *dtype;
  if (m.quant_group > 0) spec.quant_group = m.quant_group;
  spec.batch = m.batch;
  spec.context = m.context;
  spec.engine = engine;
  Workload w = LlmTensorParallelShard(LlmDecode(spec), m.tp, spec.shape, engine);
  return SoloDemand(w, gpu).tokens_per_second;
}

double RelativeError(double predicted, double measured) { return predicted / measured - 1; }

ErrorSummary Summarise(const std::vector<DecodeMeasurement>& rows, bool fit, const Catalog& catalog,
                       const EngineProfile* engine) {
  std::vector<double> errors;
  for (const DecodeMeasurement& m : rows) {
    if (m.fit != fit) continue;
    errors.push_back(
        std::abs(RelativeError(PredictDecode(m, catalog, engine), m.measured_tokens_per_second)));
  }
  return SummariseErrors(std::move(errors));
}

ErrorSummary SummariseErrors(std::vector<double> errors) {
  ErrorSummary s;
  s.rows = errors.size();
  if (errors.empty()) return s;
  std::sort(errors.begin(), errors.end());
  size_t n = errors.size();
  s.median_abs = n % 2 ? errors[n / 2] : (errors[n / 2 - 1] + errors[n / 2]) / 2;
  s.p90_abs = errors[std::min(n - 1, size_t(std::ceil(0.9 * double(n))) - 1)];  // nearest rank
  s.worst_abs = errors.back();
  return s;
}

EngineProfile FitEngine(const std::vector<DecodeMeasurement>& rows, const Catalog& catalog,
                        EngineProfile start) {
  auto loss = [&](const EngineProfile& e) {
    double sum = 0;
    for (const DecodeMeasurement& m : rows) {
      if (!m.fit) continue;
      double r = std::log(PredictDecode(m, catalog, &e) / m.measured_tokens_per_second);
      sum += r * r;
    }
    return sum;
  };
  struct Knob {
    double EngineProfile::*field;
    double low, high;
  };
  const Knob knobs[] = {{&EngineProfile::efficiency_16bit, 0.3, 1.0},
                        {&EngineProfile::efficiency_int8, 0.3, 1.0},
                        {&EngineProfile::efficiency_int4, 0.2, 1.0},
                        {&EngineProfile::step_overhead_seconds, 0, 3e-3},
                        {&EngineProfile::allreduce_seconds, 0, 100e-6}};
  // Coordinate descent (each knob over its range on a grid, then finer around the best) from
  // several starting points, whatever `start` holds: the answer depends on the rows alone.
  auto descend = [&](EngineProfile e) {
    double e_loss = loss(e);
    for (int sweep = 0; sweep < 8; ++sweep) {
      for (const Knob& k : knobs) {
        double low = k.low, high = k.high;
        for (int refine = 0; refine < 3; ++refine) {
          double step = (high - low) / 40, centre = e.*k.field;
          for (int i = 0; i <= 40; ++i) {
            EngineProfile trial = e;
            trial.*k.field = low + i * step;
            double l = loss(trial);
            if (l < e_loss) e_loss = l, e = trial, centre = trial.*k.field;
          }
          low = std::max(k.low, centre - 2 * step);
          high = std::min(k.high, centre + 2 * step);
        }
      }
    }
    return std::make_pair(e_loss, e);
  };
  EngineProfile best = start;
  double best_loss = 1e300;
  for (double overhead : {0.0, 0.5e-3, 1e-3, 2e-3}) {
    EngineProfile e = start;
    e.efficiency_16bit = e.efficiency_int8 = e.efficiency_int4 = 0.7;
    e.step_overhead_seconds = overhead;
    e.allreduce_seconds = 20e-6;
    auto [l, found] = descend(e);
    if (l < best_loss) best_loss = l, best = found;
  }
  return best;
}

std::vector<double> LeaveOneSourceOut(const std::vector<DecodeMeasurement>& rows,
                                      const Catalog& catalog) {
  std::vector<double> predicted(rows.size(), 0);
  std::set<std::string> sources;
  for (const DecodeMeasurement& m : rows) sources.insert(m.source_id);
  for (const std::string& left_out : sources) {
    std::map<std::string, EngineProfile> fitted;  // by class, fitted without `left_out`
    for (size_t i = 0; i < rows.size(); ++i) {
      if (rows[i].source_id != left_out) continue;
      const EngineProfile& engine = catalog.FindEngine(rows[i].engine);
      auto known = fitted.find(engine.name);
      if (known == fitted.end()) {
        std::vector<DecodeMeasurement> others = rows;
        bool any = false;
        for (DecodeMeasurement& o : others) {
          o.fit = o.source_id != left_out && catalog.FindEngine(o.engine).name == engine.name;
          any = any || o.fit;
        }
        EngineProfile profile;  // gpumux's defaults when no other source measured the class
        profile.name = engine.name;
        if (any) profile = FitEngine(others, catalog, profile);
        known = fitted.emplace(engine.name, profile).first;
      }
      predicted[i] = PredictDecode(rows[i], catalog, &known->second);
    }
  }
  return predicted;
}

}  // namespace gpumux
