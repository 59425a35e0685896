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
      "id",    "gpu",     "model",          "dtype",  "quant_group", "engine",   "tp",
      "batch", "context", "measured_tok_s", "source", "notes",       "source_id"};
  std::vector<DecodeMeasurement> rows;
  ReadMeasurementRows(
      path, kColumns, [&](const std::string& where, const std::vector<std::string>& f) {
        auto number_of = [&](size_t i) { return MeasurementNumber(where, kColumns[i], f[i]); };
        DecodeMeasurement m;
        m.id = f[0];
        m.gpu = f[1], m.model = f[2], m.dtype = f[3], m.engine = f[5];
        m.quant_group = int(number_of(4));
        m.tp = int(number_of(6));
        m.batch = int(number_of(7));
        m.context = int(number_of(8));
        m.measured_tokens_per_second = number_of(9);
        m.source = f[10], m.notes = f[11], m.source_id = f[12];
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

std::vector<DecodeMeasurement> RowsOfClass(const std::vector<DecodeMeasurement>& rows,
                                           const Catalog& catalog,
                                           const std::string& engine_class) {
  std::vector<DecodeMeasurement> of;
  for (const DecodeMeasurement& m : rows)
    if (catalog.FindEngine(m.engine).ClassName() == engine_class) of.push_back(m);
  return of;
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

namespace {

// Each weight format's bandwidth efficiency leans on a neighbour's: int8 on 16-bit, and fp8 and
// int4 on int8 (the same weight-only kernels, unpacking 8 or 4 bits to multiply them at 16). The
// lean is weak, a 2x gap costing what one row missed by 7% costs ((0.01 ln 2)^2 = 0.069^2), so
// rows that measure a format set it; where none do, or one row of a source cannot tell a slow
// format from a slow unpacking, the format takes its neighbour's efficiency and not whatever the
// descent left it at (one premAI Q8_0 row alone put llama.cpp's int8 at 0.43 against 0.91).
constexpr double kNeighbourWeight = 0.01;
constexpr std::pair<double EngineProfile::*, double EngineProfile::*> kFormatNeighbours[] = {
    {&EngineProfile::efficiency_int8, &EngineProfile::efficiency_16bit},
    {&EngineProfile::efficiency_fp8, &EngineProfile::efficiency_int8},
    {&EngineProfile::efficiency_int4, &EngineProfile::efficiency_int8}};

}  // namespace

EngineProfile FitEngine(const std::vector<DecodeMeasurement>& rows, const Catalog& catalog,
                        EngineProfile start) {
  std::vector<const EngineProfile*> own_loop;  // each row's engine when it runs the class, or null
  for (const DecodeMeasurement& m : rows) {
    const EngineProfile& engine = catalog.FindEngine(m.engine);
    own_loop.push_back(engine.runs.empty() ? nullptr : &engine);
  }
  auto loss = [&](const EngineProfile& e) {
    double sum = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      const DecodeMeasurement& m = rows[i];
      auto predict = [&](const EngineProfile& p) { return PredictDecode(m, catalog, &p); };
      // A row of an engine with a loop of its own: the class's constants and that loop.
      double predicted = own_loop[i] ? predict(own_loop[i]->Over(e)) : predict(e);
      double r = std::log(predicted / m.measured_tokens_per_second);
      sum += r * r;
    }
    for (auto [format, neighbour] : kFormatNeighbours) {
      double gap = std::log(e.*format / e.*neighbour);
      sum += kNeighbourWeight * gap * gap;
    }
    return sum;
  };
  // More bytes per SM-cycle than any GPU's bandwidth asks of its SMs (13 on an A100, 28 on a B200):
  // a dequantisation or attention rate fitted at the top of its range is no limit, and is stated
  // as none (0).
  constexpr double kNoSmLimit = 66;
  struct Knob {
    double EngineProfile::*field;
    double low, high;
  };
  std::vector<Knob> knobs = {{&EngineProfile::efficiency_16bit, 0.3, 1.0},
                             {&EngineProfile::efficiency_fp8, 0.3, 1.0},
                             {&EngineProfile::efficiency_int8, 0.3, 1.0},
                             {&EngineProfile::efficiency_int4, 0.2, 1.0},
                             {&EngineProfile::step_overhead_seconds, 0, 10e-3},
                             {&EngineProfile::layer_overhead_seconds, 0, 300e-6},
                             {&EngineProfile::allreduce_seconds, 0, 100e-6},
                             // One unpacking rate, in bytes, for int8 and int4 alike (the trial
                             // below copies it): fitted apart, llama.cpp's Q8_0 and Q4 rows gave
                             // 5.6 and 6.3, and a format one source measures cannot set it alone.
                             {&EngineProfile::dequant_bytes_per_sm_cycle_int8, 2, kNoSmLimit}};
  if (start.attention_per_head)  // a limit the class's kernels have, not one the rows may invent
    knobs.push_back({&EngineProfile::attention_bytes_per_sm_cycle, 0.5, kNoSmLimit});
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
            trial.dequant_bytes_per_sm_cycle_int4 = trial.dequant_bytes_per_sm_cycle_int8;
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
    e.efficiency_16bit = e.efficiency_fp8 = e.efficiency_int8 = e.efficiency_int4 = 0.7;
    e.step_overhead_seconds = overhead;
    e.layer_overhead_seconds = 0;
    e.allreduce_seconds = 20e-6;
    e.dequant_bytes_per_sm_cycle_int8 = e.dequant_bytes_per_sm_cycle_int4 = kNoSmLimit;
    e.attention_bytes_per_sm_cycle = kNoSmLimit;
    auto [l, found] = descend(e);
    if (l < best_loss) best_loss = l, best = found;
  }
  for (double EngineProfile::*rate : {&EngineProfile::dequant_bytes_per_sm_cycle_int8,
                                      &EngineProfile::dequant_bytes_per_sm_cycle_int4,
                                      &EngineProfile::attention_bytes_per_sm_cycle})
    if (best.*rate >= kNoSmLimit) best.*rate = 0;
  return best;
}

std::vector<double> LeaveOneSourceOut(const std::vector<DecodeMeasurement>& rows,
                                      const Catalog& catalog) {
  std::vector<double> predicted(rows.size(), 0);
  std::set<std::string> sources;
  for (const DecodeMeasurement& m : rows) sources.insert(m.source_id);
  for (const std::string& left_out : sources) {
    std::vector<DecodeMeasurement> others;
    std::set<std::string> measured;  // the classes the other sources measured
    for (const DecodeMeasurement& m : rows) {
      if (m.source_id == left_out) continue;
      others.push_back(m);
      measured.insert(catalog.FindEngine(m.engine).ClassName());
    }
    std::map<std::string, EngineProfile> fitted;  // by class, fitted without `left_out`
    auto fit = [&](const std::string& engine_class) -> const EngineProfile& {
      auto known = fitted.find(engine_class);
      if (known != fitted.end()) return known->second;
      EngineProfile profile;
      profile.name = engine_class;
      profile.attention_per_head = catalog.FindEngine(engine_class).attention_per_head;
      std::vector<DecodeMeasurement> of = RowsOfClass(others, catalog, engine_class);
      if (!of.empty()) profile = FitEngine(of, catalog, profile);
      return fitted.emplace(engine_class, profile).first->second;
    };
    for (size_t i = 0; i < rows.size(); ++i) {
      if (rows[i].source_id != left_out) continue;
      const EngineProfile& engine = catalog.FindEngine(rows[i].engine);
      std::string engine_class = engine.ClassName();
      if (!measured.count(engine_class)) engine_class = "compiled";
      // An engine with a loop of its own: the class as fitted on the other sources, and its loop.
      EngineProfile used = engine.runs.empty() ? fit(engine_class) : engine.Over(fit(engine_class));
      predicted[i] = PredictDecode(rows[i], catalog, &used);
    }
  }
  return predicted;
}

}  // namespace gpumux
