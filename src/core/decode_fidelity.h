// How well the demand model predicts published batch-1 decode rates: the measurements
// (bench/fidelity/decode.csv, each with its source), the model's prediction for each, and the
// engine constants fitted on one half of them. bench/fidelity_report.cc prints the report;
// decode_fidelity_test.cc holds the catalog to its claim on the other half.
#pragma once

#include <string>
#include <vector>

#include "core/catalog.h"
#include "core/engine_profile.h"

namespace gpumux {

struct DecodeMeasurement {
  std::string id;
  bool fit = false;  // in the fit half; else in the check half
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
// The median and worst of `errors` (|relative errors|).
ErrorSummary SummariseErrors(std::vector<double> errors);
// Over the rows of one half (`fit` true: the fit half).
ErrorSummary Summarise(const std::vector<DecodeMeasurement>& rows, bool fit, const Catalog& catalog,
                       const EngineProfile* engine);

// `start` with its efficiencies, step overhead and all-reduce time chosen to minimise the squared
// log error over the fit half's rows (coordinate descent over bounded ranges from fixed starting
// points: deterministic, and independent of the values `start` holds).
EngineProfile FitEngine(const std::vector<DecodeMeasurement>& rows, const Catalog& catalog,
                        EngineProfile start);

// Leave one source out: for each source in turn, each engine class (the catalog's class of a
// row's engine) is fitted (FitEngine) on the rows of that class from every other source, and the
// source's rows are predicted with it; a class no other source measured is predicted with
// gpumux's defaults (what a user of an engine nobody measured gets). The prediction for each row,
// in `rows`' order: none of it depends on its own source's measurements. Deterministic; cost one
// fit per (source, class).
std::vector<double> LeaveOneSourceOut(const std::vector<DecodeMeasurement>& rows,
                                      const Catalog& catalog);

}  // namespace gpumux
