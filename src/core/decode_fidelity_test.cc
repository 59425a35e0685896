#include "core/decode_fidelity.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "base/error.h"
#include "core/workload.h"

namespace gpumux {
namespace {

const std::string kMeasurements = std::string(GPUMUX_SOURCE_DIR) + "/bench/fidelity/decode.csv";

// The claim of docs/calibration.md: with the catalog's compiled-engine constants, which are the
// fit of the fit half, the check half's median |error| is within 10%.
TEST(DecodeFidelity, OnTheCheckHalfTheMedianErrorIsWithinTenPercent) {
  Catalog catalog = Catalog::LoadBundled();
  std::vector<DecodeMeasurement> rows = ReadDecodeMeasurements(kMeasurements);
  ASSERT_GE(rows.size(), 12u);
  const EngineProfile& compiled = catalog.FindEngine("compiled");
  ErrorSummary check = Summarise(rows, /*fit=*/false, catalog, &compiled);
  EXPECT_GE(check.rows, 6u);
  EXPECT_LE(check.median_abs, 0.10);
  // And the engine terms are what earn it: the defaults miss by far more.
  EXPECT_GT(Summarise(rows, false, catalog, nullptr).median_abs, 2 * check.median_abs);
}

TEST(DecodeFidelity, TheCatalogsCompiledEngineIsTheFitOfTheFitHalf) {
  Catalog catalog = Catalog::LoadBundled();
  std::vector<DecodeMeasurement> rows = ReadDecodeMeasurements(kMeasurements);
  const EngineProfile& compiled = catalog.FindEngine("vllm");  // an engine of the class
  EXPECT_EQ(compiled.name, "compiled");
  EngineProfile fitted = FitEngine(rows, catalog, EngineProfile{});
  EXPECT_NEAR(compiled.efficiency_16bit, fitted.efficiency_16bit, 0.002);
  EXPECT_NEAR(compiled.efficiency_int8, fitted.efficiency_int8, 0.002);
  EXPECT_NEAR(compiled.efficiency_int4, fitted.efficiency_int4, 0.002);
  EXPECT_NEAR(compiled.step_overhead_seconds, fitted.step_overhead_seconds, 5e-6);
  EXPECT_NEAR(compiled.allreduce_seconds, fitted.allreduce_seconds, 0.2e-6);
  // The error band it states is the one it has on the check half.
  ErrorSummary check = Summarise(rows, /*fit=*/false, catalog, &compiled);
  EXPECT_NEAR(compiled.error_median, check.median_abs, 0.001);
  EXPECT_NEAR(compiled.error_worst, check.worst_abs, 0.001);
}

TEST(DecodeFidelity, AnEngineSetsEfficiencyByFormatAndTensorParallelismPaysItsAllReduces) {
  Catalog catalog = Catalog::LoadBundled();
  EngineProfile e;
  e.efficiency_16bit = 0.8, e.efficiency_int4 = 0.4;
  e.step_overhead_seconds = 1e-3, e.allreduce_seconds = 20e-6;
  LlmSpec spec;
  spec.shape = &catalog.FindModel("Llama-2-7B");
  spec.engine = &e;
  Workload bf16 = LlmDecode(spec);
  EXPECT_DOUBLE_EQ(bf16.bandwidth_efficiency, 0.8);
  EXPECT_DOUBLE_EQ(bf16.step_overhead_seconds, 1e-3);
  spec.dtype = DType::kInt4;
  EXPECT_DOUBLE_EQ(LlmDecode(spec).bandwidth_efficiency, 0.4);
  spec.bandwidth_efficiency = 0.5, spec.efficiency_stated = true;  // stated wins
  EXPECT_DOUBLE_EQ(LlmDecode(spec).bandwidth_efficiency, 0.5);
  // TP 2 over 32 layers: 64 all-reduces of 20 us added to each step.
  Workload shard = TensorParallelShard(bf16, 2, 2, e.AllReduceSecondsPerStep(32, 2));
  EXPECT_NEAR(shard.step_overhead_seconds, 1e-3 + 64 * 20e-6, 1e-12);
  EXPECT_EQ(e.AllReduceSecondsPerStep(32, 1), 0);
}

// Leave one source out: a source's predictions come from the other sources alone. Scaling one
// source's measurements leaves its own predictions as they were and moves those of a source that
// shares its engine class (whose fit now sees them).
TEST(DecodeFidelity, LeavingASourceOutItsOwnMeasurementsDoNotReachItsPredictions) {
  Catalog catalog = Catalog::LoadBundled();
  std::vector<DecodeMeasurement> rows = ReadDecodeMeasurements(kMeasurements);
  std::set<std::string> sources;
  for (const DecodeMeasurement& m : rows) sources.insert(m.source_id);
  ASSERT_GE(sources.size(), 3u);
  std::vector<double> before = LeaveOneSourceOut(rows, catalog);
  const std::string scaled = rows.front().source_id;
  std::vector<DecodeMeasurement> changed = rows;
  for (DecodeMeasurement& m : changed)
    if (m.source_id == scaled) m.measured_tokens_per_second *= 1.5;
  std::vector<double> after = LeaveOneSourceOut(changed, catalog);
  bool others_moved = false;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].source_id == scaled)
      EXPECT_DOUBLE_EQ(after[i], before[i]) << rows[i].id;
    else
      others_moved = others_moved || after[i] != before[i];
  }
  EXPECT_TRUE(others_moved) << "the other sources' fits see the scaled rows";
  // Every row is predicted, and the report's summary reads them.
  for (double p : before) EXPECT_GT(p, 0);
  ErrorSummary s = SummariseErrors({0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08, 0.09, 0.5});
  EXPECT_DOUBLE_EQ(s.median_abs, 0.055);
  EXPECT_DOUBLE_EQ(s.p90_abs, 0.09) << "nearest rank: the 9th of 10";
  EXPECT_DOUBLE_EQ(s.worst_abs, 0.5);
}

TEST(DecodeFidelity, ARowThatDoesNotReadIsRefusedNamingItsLineAndField) {
  std::string path = (std::filesystem::temp_directory_path() / "gpumux_fidelity_bad.csv").string();
  std::ofstream(path) << "# comment\n"
                         "id,half,gpu,model,dtype,quant_group,engine,tp,batch,context,"
                         "measured_tok_s,source,notes,source_id\n"
                         "a,fit,H100,Llama-2-7B,bf16,0,vllm,1,1,100,fast,src,n,s\n";
  try {
    ReadDecodeMeasurements(path);
    ADD_FAILURE() << "accepted a rate that is not a number";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(":3: measured_tok_s: 'fast'"), std::string::npos)
        << e.what();
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace gpumux
