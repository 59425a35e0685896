#include "core/decode_fidelity.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "base/error.h"
#include "core/workload.h"

namespace gpumux {
namespace {

const std::string kMeasurements = std::string(GPUMUX_SOURCE_DIR) + "/bench/fidelity/decode.csv";

// What issue 43 asks of the set: at least 60 rows from at least 6 independent sources, 4 engines,
// 3 GPU kinds and every weight format.
TEST(DecodeFidelity, TheMeasurementsSpanSourcesEnginesGpusAndFormats) {
  std::vector<DecodeMeasurement> rows = ReadDecodeMeasurements(kMeasurements);
  std::set<std::string> sources, engines, gpus, formats, ids;
  for (const DecodeMeasurement& m : rows) {
    EXPECT_TRUE(ids.insert(m.id).second) << "id " << m.id << " twice";
    sources.insert(m.source_id), engines.insert(m.engine), gpus.insert(m.gpu);
    formats.insert(m.dtype == "fp16" ? "bf16" : m.dtype);
  }
  EXPECT_GE(rows.size(), 60u);
  EXPECT_GE(sources.size(), 6u);
  EXPECT_GE(engines.size(), 4u);
  EXPECT_GE(gpus.size(), 3u);
  EXPECT_EQ(formats, (std::set<std::string>{"bf16", "fp8", "int8", "int4"}));
}

// Each class the measurements cover is the fit of its rows, and states as its error band the
// median and worst |error| its rows have when each source is left out of the fit.
TEST(DecodeFidelity, EachClassIsTheFitOfItsRowsAndStatesItsLeftOutError) {
  Catalog catalog = Catalog::LoadBundled();
  std::vector<DecodeMeasurement> rows = ReadDecodeMeasurements(kMeasurements);
  std::vector<double> left_out = LeaveOneSourceOut(rows, catalog);
  std::map<std::string, std::vector<double>> errors;
  for (size_t i = 0; i < rows.size(); ++i)
    errors[catalog.FindEngine(rows[i].engine).name].push_back(
        std::abs(RelativeError(left_out[i], rows[i].measured_tokens_per_second)));
  EXPECT_GE(errors.size(), 3u);
  for (const auto& [name, class_errors] : errors) {
    SCOPED_TRACE(name);
    const EngineProfile& stated = catalog.FindEngine(name);
    ErrorSummary band = SummariseErrors(class_errors);
    EXPECT_NEAR(stated.error_median, band.median_abs, 0.001);
    EXPECT_NEAR(stated.error_worst, band.worst_abs, 0.001);
    if (!stated.runs.empty()) {  // a loop over a class: that class's constants, its own band
      const EngineProfile& runs = catalog.FindEngine(stated.runs);
      EXPECT_EQ(stated.efficiency_int4, runs.efficiency_int4);
      EXPECT_EQ(stated.step_overhead_seconds, runs.step_overhead_seconds);
      std::map<std::string, double> loops;  // and its loop's cost, fitted beside the class
      FitEngine(RowsOfClass(rows, catalog, stated.runs), catalog, runs, &loops);
      ASSERT_TRUE(loops.count(name));
      EXPECT_NEAR(stated.host_overhead_seconds, loops[name], 10e-6);
      continue;
    }
    EngineProfile fitted = FitEngine(RowsOfClass(rows, catalog, name), catalog, stated);
    EXPECT_NEAR(stated.efficiency_16bit, fitted.efficiency_16bit, 0.002);
    EXPECT_NEAR(stated.efficiency_fp8, fitted.efficiency_fp8, 0.002);
    EXPECT_NEAR(stated.efficiency_int8, fitted.efficiency_int8, 0.002);
    EXPECT_NEAR(stated.efficiency_int4, fitted.efficiency_int4, 0.002);
    EXPECT_NEAR(stated.step_overhead_seconds, fitted.step_overhead_seconds, 5e-6);
    EXPECT_NEAR(stated.layer_overhead_seconds, fitted.layer_overhead_seconds, 0.2e-6);
    EXPECT_NEAR(stated.allreduce_seconds, fitted.allreduce_seconds, 0.2e-6);
    EXPECT_NEAR(stated.dequant_bytes_per_sm_cycle_int8, fitted.dequant_bytes_per_sm_cycle_int8,
                0.05);
    EXPECT_NEAR(stated.dequant_bytes_per_sm_cycle_int4, fitted.dequant_bytes_per_sm_cycle_int4,
                0.05);
    EXPECT_NEAR(stated.attention_bytes_per_sm_cycle, fitted.attention_bytes_per_sm_cycle, 0.05);
  }
  // The engine terms are what earn it: gpumux's defaults miss by far more.
  std::vector<double> defaults, classes;
  for (const DecodeMeasurement& m : rows) {
    defaults.push_back(
        std::abs(RelativeError(PredictDecode(m, catalog, nullptr), m.measured_tokens_per_second)));
    classes.push_back(std::abs(RelativeError(
        PredictDecode(m, catalog, &catalog.FindEngine(m.engine)), m.measured_tokens_per_second)));
  }
  EXPECT_GT(SummariseErrors(defaults).median_abs, 1.5 * SummariseErrors(classes).median_abs);
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
  EXPECT_DOUBLE_EQ(bf16.clocked_overhead_seconds, 1e-3);
  EXPECT_DOUBLE_EQ(bf16.step_overhead_seconds, 0);
  spec.dtype = DType::kInt4;
  EXPECT_DOUBLE_EQ(LlmDecode(spec).bandwidth_efficiency, 0.4);
  spec.bandwidth_efficiency = 0.5, spec.efficiency_stated = true;  // stated wins
  EXPECT_DOUBLE_EQ(LlmDecode(spec).bandwidth_efficiency, 0.5);
  // TP 2 over 32 layers: 64 all-reduces of 20 us added to each step.
  Workload shard = TensorParallelShard(bf16, 2, 2, e.AllReduceSecondsPerStep(32, 2));
  EXPECT_NEAR(shard.step_overhead_seconds, 64 * 20e-6, 1e-12);  // over NVLink: not clocked
  EXPECT_DOUBLE_EQ(shard.clocked_overhead_seconds, 1e-3);
  EXPECT_EQ(e.AllReduceSecondsPerStep(32, 1), 0);
}

// An engine's fixed step costs are stated at the reference SM clock and take reference/clock of
// that on another GPU; a GPU whose clock is not stated takes them as stated, and an overhead the
// user states (a flag, a plan file) is the user's, on every GPU.
TEST(DecodeFidelity, AnEnginesStepOverheadRunsAtTheGpusClock) {
  Catalog catalog = Catalog::LoadBundled();
  EngineProfile e;
  e.step_overhead_seconds = 1e-3, e.layer_overhead_seconds = 25e-6;  // 1.8 ms for 32 layers
  LlmSpec spec;
  spec.shape = &catalog.FindModel("Llama-2-7B");
  spec.engine = &e;
  Workload w = LlmDecode(spec);
  GpuKind reference = catalog.FindGpu("A100-80GB");
  ASSERT_DOUBLE_EQ(reference.boost_clock_hz, kReferenceSmClockHz);
  GpuKind twice = reference, unstated = reference;
  twice.boost_clock_hz = 2 * kReferenceSmClockHz;
  unstated.boost_clock_hz = 0;
  EXPECT_NEAR(StepTimesOn(w, reference).overhead, 1.8e-3, 1e-12);
  EXPECT_NEAR(StepTimesOn(w, twice).overhead, 0.9e-3, 1e-12);
  EXPECT_NEAR(StepTimesOn(w, unstated).overhead, 1.8e-3, 1e-12);
  // The memory-bound part is the same on both: the step is 0.9 ms shorter at twice the clock.
  EXPECT_NEAR(1 / SoloDemand(w, twice).steps_per_second,
              1 / SoloDemand(w, reference).steps_per_second - 0.9e-3, 1e-9);
  // An engine's own loop (EngineProfile::runs) is the host's: in series, and not clocked.
  EngineProfile binding = e;
  binding.host_overhead_seconds = 3e-3;
  spec.engine = &binding;
  EXPECT_NEAR(StepTimesOn(LlmDecode(spec), twice).overhead, 0.9e-3 + 3e-3, 1e-12);
  spec.engine = &e;
  spec.step_overhead_seconds = 2e-3;  // stated: the engine's overhead is not used
  Workload stated = LlmDecode(spec);
  EXPECT_NEAR(StepTimesOn(stated, twice).overhead, 2e-3, 1e-12);
  EXPECT_NEAR(StepTimesOn(stated, reference).overhead, 2e-3, 1e-12);
}

// Quantised weights are unpacked by the SMs: an engine whose kernels unpack 8 bytes per SM-cycle
// reads int4 weights no faster than SMs x clock x 8 bytes/s, however fast the memory; 16-bit
// weights are read as they are. The limit joins the step's compute time (SM work: what MIG and MPS
// scale by the SMs a tenant has).
TEST(DecodeFidelity, QuantisedWeightsAreReadNoFasterThanTheSmsUnpackThem) {
  Catalog catalog = Catalog::LoadBundled();
  EngineProfile e;
  e.efficiency_16bit = e.efficiency_int4 = 1;
  e.dequant_bytes_per_sm_cycle_int4 = 8;
  LlmSpec spec;
  spec.shape = &catalog.FindModel("Llama-2-70B");
  spec.engine = &e;
  spec.dtype = DType::kInt4;
  Workload int4 = LlmDecode(spec);
  const GpuKind& a100 = catalog.FindGpu("A100-80GB");  // 108 SMs at 1410 MHz: 1.22 TB/s unpacked
  StepTimes t = StepTimesOn(int4, a100);
  EXPECT_NEAR(t.compute, int4.dequant_bytes_per_step / (8 * 108 * 1.41e9), 1e-12);
  EXPECT_GT(t.compute, 1.5 * t.memory) << "2.04 TB/s of memory, 1.22 TB/s of unpacking";
  EXPECT_NEAR(int4.dequant_bytes_per_step, int4.bytes_per_step - int4.kv_cache_bytes, 1);
  Demand d = SoloDemand(int4, a100);
  EXPECT_NEAR(d.sm_fraction, t.compute * d.steps_per_second, 1e-12) << "its SMs, unpacking";
  EXPECT_GT(d.sm_fraction, 0.5);
  const GpuKind& rtx = catalog.FindGpu("RTX-4090");  // 128 SMs at 2520 MHz: 2.58 TB/s unpacked
  StepTimes on_rtx = StepTimesOn(int4, rtx);
  EXPECT_LT(on_rtx.compute, on_rtx.memory) << "the 4090's 1.01 TB/s of memory is the limit";
  spec.dtype = DType::kBf16;
  EXPECT_EQ(LlmDecode(spec).dequant_bytes_per_step, 0);
  e.dequant_bytes_per_sm_cycle_int4 = 0;  // no limit
  spec.dtype = DType::kInt4;
  EXPECT_EQ(StepTimesOn(LlmDecode(spec), a100).compute,
            int4.flops_per_step / (int4.compute_efficiency * a100.PeakFlops(DType::kInt4)));
}

// An engine whose attention gives each sequence's query head one block over the whole context
// (AutoAWQ's) reads the KV cache at the pace of the SMs those blocks occupy, each block its KV
// head's cache: on an RTX 4090 (128 SMs), Mistral-7B (32 query heads sharing 8 KV heads) at
// batch 1 has 32 blocks reading 4x the cache's bytes; at batch 8, 256 blocks fill every SM. An
// engine that splits the context (flash-decoding) reads the cache at the memory's pace.
TEST(DecodeFidelity, PerHeadAttentionReadsTheCacheAtThePaceOfTheSmsItsBlocksOccupy) {
  Catalog catalog = Catalog::LoadBundled();
  const GpuKind& rtx = catalog.FindGpu("RTX-4090");
  EngineProfile e;
  e.efficiency_int4 = 0.72;
  e.attention_per_head = true;
  e.attention_bytes_per_sm_cycle = 9;
  LlmSpec spec;
  spec.shape = &catalog.FindModel("Mistral-7B");
  spec.engine = &e;
  spec.dtype = DType::kInt4;
  spec.context = 3072;
  Workload one = LlmDecode(spec);
  EXPECT_DOUBLE_EQ(one.attention_bytes_per_step, one.kv_cache_bytes);
  EXPECT_DOUBLE_EQ(one.attention_blocks, 32);
  EXPECT_DOUBLE_EQ(one.attention_block_bytes_per_step, 4 * one.kv_cache_bytes);
  double per_sm = 9 * rtx.SmClockHz();
  EXPECT_NEAR(AttentionSecondsOn(one, rtx), 4 * one.kv_cache_bytes / (32 * per_sm), 1e-12);
  double at_memory_pace = one.kv_cache_bytes / (0.72 * rtx.bandwidth);
  EXPECT_GT(AttentionSecondsOn(one, rtx), 3 * at_memory_pace) << "32 of 128 SMs, 4x the bytes";
  double weights = (one.bytes_per_step - one.kv_cache_bytes) / (0.72 * rtx.bandwidth);
  EXPECT_NEAR(StepTimesOn(one, rtx).memory, weights + AttentionSecondsOn(one, rtx), 1e-12);
  spec.batch = 8;  // 256 blocks: every SM reads
  Workload eight = LlmDecode(spec);
  EXPECT_NEAR(AttentionSecondsOn(eight, rtx),
              std::max(eight.kv_cache_bytes / (0.72 * rtx.bandwidth),
                       eight.attention_block_bytes_per_step / (128 * per_sm)),
              1e-12);
  e.attention_per_head = false;  // split: the memory's pace, whatever the rate says
  EXPECT_NEAR(AttentionSecondsOn(LlmDecode(spec), rtx),
              eight.kv_cache_bytes / (0.72 * rtx.bandwidth), 1e-12);
  // Tensor parallelism splits the query heads, and with them the blocks and their bytes.
  e.attention_per_head = true;
  spec.batch = 1;
  Workload shard = LlmTensorParallelShard(one, 2, spec.shape, &e);
  EXPECT_DOUBLE_EQ(shard.attention_blocks, 16);
  EXPECT_NEAR(AttentionSecondsOn(shard, rtx), AttentionSecondsOn(one, rtx), 1e-12)
      << "half the blocks, half the bytes each GPU reads";
}

// The attention rate is fitted only for a class whose kernels have the limit: rows whose long
// contexts run slower than the memory allows do not give a split-attention class one.
TEST(DecodeFidelity, OnlyAPerHeadClassIsFittedAnAttentionRate) {
  Catalog catalog = Catalog::LoadBundled();
  std::vector<DecodeMeasurement> rows =
      RowsOfClass(ReadDecodeMeasurements(kMeasurements), catalog, "autoawq");
  ASSERT_GE(rows.size(), 8u);
  EngineProfile per_head;
  per_head.attention_per_head = true;
  EngineProfile fitted = FitEngine(rows, catalog, per_head);
  EXPECT_GT(fitted.attention_bytes_per_sm_cycle, 0);
  EXPECT_EQ(FitEngine(rows, catalog, EngineProfile{}).attention_bytes_per_sm_cycle, 0);
  // With the rate, the rows at 3072 tokens of context are predicted within 15%; without, the
  // batch-1 ones are over-predicted by more.
  double worst_with = 0, worst_without = 0;
  EngineProfile split = FitEngine(rows, catalog, EngineProfile{});
  for (const DecodeMeasurement& m : rows) {
    if (m.context < 3000 || m.batch != 1) continue;
    worst_with = std::max(worst_with, std::abs(RelativeError(PredictDecode(m, catalog, &fitted),
                                                             m.measured_tokens_per_second)));
    worst_without = std::max(
        worst_without,
        std::abs(RelativeError(PredictDecode(m, catalog, &split), m.measured_tokens_per_second)));
  }
  EXPECT_LT(worst_with, 0.15);
  EXPECT_GT(worst_without, 0.2);
}

// A format that one source measures once cannot move far from its neighbour: without PR 4766's
// RTX 4090 rows, llama.cpp's only Q8_0 row is premAI's A100 one, which is slow for its unpacking
// and its binding, not for its bandwidth. int8 stays near 16-bit (a free fit put it at 0.43
// against 0.89 and missed the 4090's Q8_0 row by 46%), and both quantised formats unpack at one
// rate, which the Q4 rows set.
TEST(DecodeFidelity, AFormatOneRowMeasuresLeansOnItsNeighbourAndUnpacksAtTheClasssRate) {
  Catalog catalog = Catalog::LoadBundled();
  std::vector<DecodeMeasurement> rows =
      RowsOfClass(ReadDecodeMeasurements(kMeasurements), catalog, "llama.cpp");
  std::vector<DecodeMeasurement> others, left_out;
  for (const DecodeMeasurement& m : rows)
    (m.source_id == "llamacpp-pr-4766" ? left_out : others).push_back(m);
  ASSERT_EQ(left_out.size(), 4u);
  ASSERT_EQ(std::count_if(others.begin(), others.end(),
                          [](const DecodeMeasurement& m) { return m.dtype == "int8"; }),
            1);
  EngineProfile fitted = FitEngine(others, catalog, EngineProfile{});
  EXPECT_NEAR(fitted.efficiency_int8 / fitted.efficiency_16bit, 1, 0.15);
  EXPECT_GT(fitted.dequant_bytes_per_sm_cycle_int4, 0);
  EXPECT_EQ(fitted.dequant_bytes_per_sm_cycle_int8, fitted.dequant_bytes_per_sm_cycle_int4);
  for (const DecodeMeasurement& m : left_out)
    EXPECT_LT(
        std::abs(RelativeError(PredictDecode(m, catalog, &fitted), m.measured_tokens_per_second)),
        0.15)
        << m.id;
  // A class measured in one format only (MLC's q4f16) gives the others that format's efficiency,
  // not the descent's starting 0.7.
  EngineProfile mlc =
      FitEngine(RowsOfClass(ReadDecodeMeasurements(kMeasurements), catalog, "mlc-llm"), catalog,
                EngineProfile{});
  EXPECT_GT(mlc.efficiency_int4, 0.8);
  for (double format : {mlc.efficiency_16bit, mlc.efficiency_fp8, mlc.efficiency_int8})
    EXPECT_NEAR(format, mlc.efficiency_int4, 0.05);
}

// An engine that runs a class from a loop of its own has that loop's cost fitted beside the
// class's constants, so its rows do not bend the class's: with gpt-fast's rows left out,
// torchchat's three A100 rows (~1.8 ms a token slower than torchao's on the same model and GPU) had
// pulled compiled's int4 efficiency from 0.37 to 0.32; given a loop of their own (~1.4 ms), they
// leave it where the other sources put it. With its source left out, its loop is unknown: its rows
// are predicted with what the own loops other sources ran cost.
TEST(DecodeFidelity, AnEnginesOwnLoopIsFittedBesideTheClassAndLeftOutCostsWhatOtherLoopsCost) {
  Catalog catalog = Catalog::LoadBundled();
  std::vector<DecodeMeasurement> rows = ReadDecodeMeasurements(kMeasurements);
  // gpt-fast's rows left out, as when its source is predicted: torchao's and torchchat's int4 rows
  // are then the class's only int4 rows on an A100.
  std::vector<DecodeMeasurement> compiled, without;
  for (const DecodeMeasurement& m : RowsOfClass(rows, catalog, "compiled")) {
    if (m.source_id == "gpt-fast-readme") continue;
    compiled.push_back(m);
    if (m.engine != "torchchat") without.push_back(m);
  }
  ASSERT_EQ(compiled.size(), without.size() + 3);
  std::map<std::string, double> loops;
  EngineProfile with_loop = FitEngine(compiled, catalog, EngineProfile{}, &loops);
  EngineProfile alone = FitEngine(without, catalog, EngineProfile{});
  EXPECT_GT(loops["torchchat"], 1.0e-3);
  EXPECT_LT(loops["torchchat"], 2.5e-3);
  EXPECT_NEAR(with_loop.efficiency_int4, alone.efficiency_int4, 0.02);
  // Left out, torchchat's loop is what the other own loop the sources ran costs
  // (llama-cpp-python's, fitted beside llama.cpp), not what the catalog states from torchchat's own
  // rows.
  const EngineProfile& torchchat = catalog.FindEngine("torchchat");
  ASSERT_GT(torchchat.host_overhead_seconds, 0);
  std::vector<DecodeMeasurement> other_sources;
  for (const DecodeMeasurement& m : RowsOfClass(rows, catalog, "compiled"))
    if (m.engine != "torchchat") other_sources.push_back(m);
  EngineProfile used = torchchat.Over(FitEngine(other_sources, catalog, EngineProfile{}));
  std::map<std::string, double> binding;
  FitEngine(RowsOfClass(rows, catalog, "llama.cpp"), catalog, EngineProfile{}, &binding);
  ASSERT_EQ(binding.size(), 1u);
  used.host_overhead_seconds = binding["llama-cpp-python"];
  EXPECT_NE(used.host_overhead_seconds, torchchat.host_overhead_seconds);
  std::vector<double> left_out = LeaveOneSourceOut(rows, catalog);
  for (size_t i = 0; i < rows.size(); ++i)
    if (rows[i].engine == "torchchat")
      EXPECT_NEAR(left_out[i], PredictDecode(rows[i], catalog, &used), 1e-9) << rows[i].id;
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
                         "id,gpu,model,dtype,quant_group,engine,tp,batch,context,"
                         "measured_tok_s,source,notes,source_id\n"
                         "a,H100,Llama-2-7B,bf16,0,vllm,1,1,100,fast,src,n,s\n";
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
