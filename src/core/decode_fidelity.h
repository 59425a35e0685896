// How well the demand model predicts published decode rates: the measurements
// (bench/fidelity/decode.csv, each with its source), the model's prediction for each, each engine
// class's constants fitted on its rows, and the error of the next source: each source predicted by
// the classes fitted on the other sources alone. bench/fidelity_report.cc prints the report;
// decode_fidelity_test.cc holds the catalog (catalog/engines.yaml) to both.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/catalog.h"
#include "core/engine_profile.h"

namespace gpumux {

struct DecodeMeasurement {
  std::string id;
  std::string gpu, model, dtype, engine;
  int quant_group = 0;  // 0: the format's default
  int tp = 1, batch = 1, context = 0;
  double measured_tokens_per_second = 0;
  std::string source, notes;
  std::string source_id;  // one per independent source: what leave-one-source-out leaves out
};

// Reads the CSV (lines starting with '#' are comments; the first other line is the header).
// Throws Error (bad input) naming the line and field for a row that does not read.
std::vector<DecodeMeasurement> ReadDecodeMeasurements(const std::string& path);

// The model's tokens/s for `m` (all sequences together) on its GPU, with `engine`'s constants,
// or gpumux's defaults (η 0.7, no overhead, no all-reduce) when null. Throws Error for a GPU,
// model or dtype the catalog does not know.
double PredictDecode(const DecodeMeasurement& m, const Catalog& catalog,
                     const EngineProfile* engine);

// prediction / measured - 1.
double RelativeError(double predicted, double measured);

struct ErrorSummary {
  size_t rows = 0;
  double median_abs = 0, p90_abs = 0, worst_abs = 0;  // of RelativeError
};
// The median, p90 (nearest rank) and worst of `errors` (|relative errors|).
ErrorSummary SummariseErrors(std::vector<double> errors);

// The rows whose engine is of class `engine_class` (the catalog's class of each row's engine, or
// the class it runs: EngineProfile::ClassName).
std::vector<DecodeMeasurement> RowsOfClass(const std::vector<DecodeMeasurement>& rows,
                                           const Catalog& catalog, const std::string& engine_class);

// `start` with its efficiencies, step overhead, all-reduce time, dequantisation and attention rates
// chosen to minimise the squared log error over `rows` (coordinate descent over bounded ranges from
// fixed starting points: deterministic, and independent of the values `start` holds but its
// attention_per_head, which says whether the attention rate is fitted at all). A row whose engine
// runs the class from a loop of its own (EngineProfile::runs) is predicted with that loop's host
// overhead added, fitted beside the class's constants (whatever the catalog states) and, when
// `loop_seconds` is not null, stored there under the engine's name. int8 and int4 weights unpack
// at one rate; each format's efficiency leans weakly on a neighbour's (int8 on 16-bit, fp8 and int4
// on int8), so a format no row holds takes its neighbour's.
EngineProfile FitEngine(const std::vector<DecodeMeasurement>& rows, const Catalog& catalog,
                        EngineProfile start, std::map<std::string, double>* loop_seconds = nullptr);

// Leave one source out: for each source in turn, each engine class is fitted (FitEngine) on the
// rows of that class from every other source, and the source's rows are predicted with it; a
// class no other source measured is predicted as the "compiled" class fitted on the other sources
// (an optimised engine nobody measured); an engine that runs a class (EngineProfile::runs) is
// predicted as that class so fitted, with its loop's cost as the other sources measured it, or,
// when none ran it, the median of the other engines' loops they measured (0 if none). The
// prediction for each row, in `rows`' order: none of it depends on its own source's measurements.
// Deterministic; one fit per (source, class).
std::vector<double> LeaveOneSourceOut(const std::vector<DecodeMeasurement>& rows,
                                      const Catalog& catalog);

}  // namespace gpumux
