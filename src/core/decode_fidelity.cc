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
// lean is weak, a 2x gap costing what one row missed by 7% costs (0.01 (ln 2)^2 = 0.069^2), so
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
                        EngineProfile start, std::map<std::string, double>* loop_seconds) {
  // The engines that run the class from a loop of their own, and each row's (-1: the class's own).
  std::vector<const EngineProfile*> loops;
  std::vector<int> loop_of;
  for (const DecodeMeasurement& m : rows) {
    const EngineProfile& engine = catalog.FindEngine(m.engine);
    if (engine.runs.empty()) {
      loop_of.push_back(-1);
      continue;
    }
    auto known = std::find(loops.begin(), loops.end(), &engine);
    loop_of.push_back(int(known - loops.begin()));
    if (known == loops.end()) loops.push_back(&engine);
  }
  struct Fit {
    EngineProfile e;
    std::vector<double> loop;  // each of `loops`' cost a step on the host
  };
  auto loss = [&](const Fit& f) {
    double sum = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      const DecodeMeasurement& m = rows[i];
      double predicted;
      if (loop_of[i] < 0) {
        predicted = PredictDecode(m, catalog, &f.e);
      } else {  // the class's constants and that engine's loop
        EngineProfile own = loops[loop_of[i]]->Over(f.e);
        own.host_overhead_seconds = f.loop[loop_of[i]];
        predicted = PredictDecode(m, catalog, &own);
      }
      double r = std::log(predicted / m.measured_tokens_per_second);
      sum += r * r;
    }
    for (auto [format, neighbour] : kFormatNeighbours) {
      double gap = std::log(f.e.*format / f.e.*neighbour);
      sum += kNeighbourWeight * gap * gap;
    }
    return sum;
  };
  // More bytes per SM-cycle than any GPU's bandwidth asks of its SMs (13 on an A100, 28 on a B200):
  // a dequantisation or attention rate fitted at the top of its range is no limit, and is stated
  // as none (0).
  constexpr double kNoSmLimit = 66;
  struct Knob {
    double EngineProfile::*field;  // or, when null, the cost of loop `loop`
    double low, high;
    size_t loop = 0;
    double& At(Fit& f) const { return field ? f.e.*field : f.loop[loop]; }
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
  // An engine's own loop costs what its rows say beyond the class's: fitted beside the class, so
  // that its rows teach the class's kernels and not its loop (torchchat's rows, ~1.8 ms a token
  // slower than torchao's on the same GPU, had pulled compiled's int4 down, and gpt-fast's 70B
  // int4 left out missed by -36%).
  for (size_t j = 0; j < loops.size(); ++j) knobs.push_back({nullptr, 0, 10e-3, j});
  // Coordinate descent (each knob over its range on a grid, then finer around the best) from
  // several starting points, whatever `start` holds: the answer depends on the rows alone.
  auto descend = [&](Fit f) {
    double f_loss = loss(f);
    for (int sweep = 0; sweep < 8; ++sweep) {
      for (const Knob& k : knobs) {
        double low = k.low, high = k.high;
        for (int refine = 0; refine < 3; ++refine) {
          double step = (high - low) / 40, centre = k.At(f);
          for (int i = 0; i <= 40; ++i) {
            Fit trial = f;
            k.At(trial) = low + i * step;
            trial.e.dequant_bytes_per_sm_cycle_int4 = trial.e.dequant_bytes_per_sm_cycle_int8;
            double l = loss(trial);
            if (l < f_loss) f_loss = l, f = trial, centre = k.At(trial);
          }
          low = std::max(k.low, centre - 2 * step);
          high = std::min(k.high, centre + 2 * step);
        }
      }
    }
    return std::make_pair(f_loss, f);
  };
  Fit best{start, {}};
  double best_loss = 1e300;
  for (double overhead : {0.0, 0.5e-3, 1e-3, 2e-3}) {
    Fit f{start, std::vector<double>(loops.size(), 0)};
    EngineProfile& e = f.e;
    e.efficiency_16bit = e.efficiency_fp8 = e.efficiency_int8 = e.efficiency_int4 = 0.7;
    e.step_overhead_seconds = overhead;
    e.layer_overhead_seconds = 0;
    e.allreduce_seconds = 20e-6;
    e.dequant_bytes_per_sm_cycle_int8 = e.dequant_bytes_per_sm_cycle_int4 = kNoSmLimit;
    e.attention_bytes_per_sm_cycle = kNoSmLimit;
    auto [l, found] = descend(f);
    if (l < best_loss) best_loss = l, best = found;
  }
  for (double EngineProfile::*rate : {&EngineProfile::dequant_bytes_per_sm_cycle_int8,
                                      &EngineProfile::dequant_bytes_per_sm_cycle_int4,
                                      &EngineProfile::attention_bytes_per_sm_cycle})
    if (best.e.*rate >= kNoSmLimit) best.e.*rate = 0;
  if (loop_seconds)
    for (size_t j = 0; j < loops.size(); ++j) (*loop_seconds)[loops[j]->name] = best.loop[j];
  return best.e;
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
    std::map<std::string, double> loops;          // by engine, fitted without `left_out`
    auto fit = [&](const std::string& engine_class) -> const EngineProfile& {
      auto known = fitted.find(engine_class);
      if (known != fitted.end()) return known->second;
      EngineProfile profile;
      profile.name = engine_class;
      profile.attention_per_head = catalog.FindEngine(engine_class).attention_per_head;
      std::vector<DecodeMeasurement> of = RowsOfClass(others, catalog, engine_class);
      if (!of.empty()) profile = FitEngine(of, catalog, profile, &loops);
      return fitted.emplace(engine_class, profile).first->second;
    };
    // The median cost of the own loops the other sources ran (every class that has one fitted).
    auto typical_loop = [&] {
      for (const DecodeMeasurement& m : others)
        if (!catalog.FindEngine(m.engine).runs.empty()) fit(catalog.FindEngine(m.engine).runs);
      std::vector<double> costs;
      for (const auto& [engine, cost] : loops) costs.push_back(cost);
      return SummariseErrors(costs).median_abs;  // 0 for none
    };
    for (size_t i = 0; i < rows.size(); ++i) {
      if (rows[i].source_id != left_out) continue;
      const EngineProfile& engine = catalog.FindEngine(rows[i].engine);
      std::string engine_class = engine.ClassName();
      if (!measured.count(engine_class)) engine_class = "compiled";
      EngineProfile used = fit(engine_class);
      if (!engine.runs.empty()) {
        // An engine with a loop of its own: the class as fitted on the other sources, and its
        // loop's cost as they measured it, or, when no other source ran it, what the other
        // engines' own loops cost (the median; not the catalog's, which its own rows set).
        used = engine.Over(used);
        auto loop = loops.find(engine.name);
        used.host_overhead_seconds = loop != loops.end() ? loop->second : typical_loop();
      }
      predicted[i] = PredictDecode(rows[i], catalog, &used);
    }
  }
  return predicted;
}

}  // namespace gpumux
