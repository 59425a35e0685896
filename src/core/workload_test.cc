#include "core/workload.h"

#include <gtest/gtest.h>

#include "core/catalog_fixture.h"

#include "base/error.h"
#include "core/catalog.h"

namespace gpumux {
namespace {

class WorkloadTest : public CatalogFixture {};

// The README's opening numbers: "13B" at 2 bytes/param, batch 1, on an H100 SXM5 with η = 1.
TEST_F(WorkloadTest, GoldenThirteenBillionOnH100) {
  LlmSpec spec;
  spec.params = 13e9;
  spec.dtype = DType::kBf16;
  spec.bandwidth_efficiency = 1;
  Demand d = SoloDemand(LlmDecode(spec), h100_);
  EXPECT_NEAR(d.memory_bytes, 26e9, 1e6);
  EXPECT_NEAR(d.tokens_per_second, 128, 1.5);  // 3.35 TB/s / 26 GB = 128.8
  EXPECT_NEAR(d.ms_per_token, 7.8, 0.05);
  EXPECT_NEAR(d.flops, 3.3e12, 0.06e12);          // 2 FLOP/param/token
  EXPECT_NEAR(d.flops_fraction, 0.0034, 0.0002);  // ≈0.3% of 989 TFLOP/s
  EXPECT_NEAR(d.bandwidth, 3.35e12, 0.05e12);
  EXPECT_GE(d.bandwidth_fraction, 0.97);
  EXPECT_LE(d.bandwidth_fraction, 1.0 + 1e-12);
  // 26 GB of the H100's 80 GiB (85.9 GB): 30%. The README's "≈33%" divides by a decimal 80 GB.
  EXPECT_NEAR(d.memory_fraction, 26e9 / (80.0 * (1ull << 30)), 1e-9);
  EXPECT_TRUE(d.bandwidth_bound);
}

TEST_F(WorkloadTest, Llama2ThirteenWithKvCacheIsMoreExact) {
  LlmSpec spec;
  spec.shape = &catalog_.FindModel("Llama-2-13B");
  spec.context = 4096;
  spec.bandwidth_efficiency = 1;
  Workload w = LlmDecode(spec);
  EXPECT_NEAR(w.weight_bytes, 26.03e9, 0.02e9);
  EXPECT_NEAR(w.kv_cache_bytes, 4096.0 * 800 * 1024, 1);  // 3.36 GB
  // Streamed bytes exclude the input embedding table (reference §4.1: 25.70 GB + KV).
  EXPECT_NEAR(w.bytes_per_step, 25.70e9 + 4096.0 * 800 * 1024, 0.02e9);
  Demand d = SoloDemand(w, h100_);
  EXPECT_NEAR(d.tokens_per_second, 3.35e12 / w.bytes_per_step, 1e-6);
  EXPECT_LT(d.tokens_per_second, 128) << "KV reads slow it below the rule of thumb";
}

TEST_F(WorkloadTest, TensorParallelShardsHoldAndReadTheirPartAndKvHeadsLimitTheKvSplit) {
  LlmSpec spec;
  spec.shape = &catalog_.FindModel("Llama-3-70B");
  spec.context = 4096;
  Workload w = LlmDecode(spec);
  ASSERT_GT(w.memory_bytes(), h100_.memory_bytes);
  EXPECT_EQ(MinTensorParallel(w, h100_.memory_bytes, spec.shape), 2);
  Workload half = TensorParallelShard(w, 2, 2);
  EXPECT_DOUBLE_EQ(half.weight_bytes, w.weight_bytes / 2);
  EXPECT_DOUBLE_EQ(half.kv_cache_bytes, w.kv_cache_bytes / 2);
  EXPECT_DOUBLE_EQ(half.bytes_per_step, w.bytes_per_step / 2);
  EXPECT_DOUBLE_EQ(half.flops_per_step, w.flops_per_step / 2);
  EXPECT_NEAR(SoloDemand(half, h100_).tokens_per_second, 2 * SoloDemand(w, h100_).tokens_per_second,
              1e-9);
  // Eight GPUs of a model with two KV heads: each keeps a copy of half the cache.
  EXPECT_DOUBLE_EQ(TensorParallelShard(w, 8, 2).kv_cache_bytes, w.kv_cache_bytes / 2);
  EXPECT_DOUBLE_EQ(TensorParallelShard(w, 1).memory_bytes(), w.memory_bytes());
  EXPECT_THROW(TensorParallelShard(w, 0), Error);
  // A degree must divide the attention heads: 12 heads skip 8.
  ModelShape twelve = *spec.shape;
  twelve.heads = 12;
  EXPECT_EQ(MinTensorParallel(w, w.memory_bytes() / 5, &twelve), std::nullopt);
  EXPECT_EQ(MinTensorParallel(w, w.memory_bytes() / 5, nullptr), 8);
  EXPECT_EQ(MinTensorParallel(w, w.memory_bytes() / 3.5, &twelve), 4);
}

TEST_F(WorkloadTest, ACalibratedGpusMeasuredEfficienciesStandForUnstatedOnes) {
  GpuKind measured = h100_;
  GpuCalibration c;
  c.gpu = h100_.name;
  c.bandwidth = 0.5 * h100_.bandwidth;
  c.flops = 0.25 * h100_.PeakFlops(DType::kBf16);
  c.timeslice_usable = {{2, 0.9}, {4, 0.8}};
  measured.calibration = c;
  LlmSpec spec;
  spec.params = 13e9;
  Workload unstated = LlmDecode(spec);
  Workload on = OnGpu(unstated, measured);
  EXPECT_DOUBLE_EQ(on.bandwidth_efficiency, 0.5);
  EXPECT_DOUBLE_EQ(on.compute_efficiency, 0.25);
  EXPECT_NEAR(SoloDemand(unstated, measured).tokens_per_second,
              0.5 * h100_.bandwidth / unstated.bytes_per_step, 1e-9);
  spec.efficiency_stated = true;
  EXPECT_DOUBLE_EQ(OnGpu(LlmDecode(spec), measured).bandwidth_efficiency,
                   kDefaultBandwidthEfficiency)
      << "a stated efficiency wins";
  EXPECT_DOUBLE_EQ(OnGpu(unstated, h100_).bandwidth_efficiency, kDefaultBandwidthEfficiency)
      << "no calibration, no change";
  // Time-slicing: the measured share for n, or for the largest n measured below it.
  EXPECT_DOUBLE_EQ(measured.TimeSliceUsable(2, 0.97), 0.9);
  EXPECT_DOUBLE_EQ(measured.TimeSliceUsable(3, 0.97), 0.9);
  EXPECT_DOUBLE_EQ(measured.TimeSliceUsable(8, 0.97), 0.8);
  EXPECT_DOUBLE_EQ(h100_.TimeSliceUsable(2, 0.97), 0.97);
  // MPS: what its streaming kernel achieved, times what that many clients moved together where
  // measured (for n, or the largest n measured below it).
  EXPECT_DOUBLE_EQ(measured.MpsCapacity(3).bandwidth, 0.5) << "no MPS co-runs measured";
  measured.calibration->mps_usable = {{2, 0.9}, {4, 0.8}};
  EXPECT_DOUBLE_EQ(measured.MpsCapacity(1).bandwidth, 0.5);
  EXPECT_DOUBLE_EQ(measured.MpsCapacity(3).bandwidth, 0.45);
  EXPECT_DOUBLE_EQ(measured.MpsCapacity(6).bandwidth, 0.4);
  EXPECT_DOUBLE_EQ(measured.MpsCapacity(6).compute, 0.25);
  EXPECT_DOUBLE_EQ(h100_.MpsCapacity(4).bandwidth, 1.0);
}

TEST_F(WorkloadTest, ReferenceDecodeCeilingsAtContext2048) {
  // Reference §4.4, H100 SXM at η = 1.0 and 0.7 (tokens/s, batch 1, ctx 2048).
  struct Row {
    const char* model;
    double eta1, eta07;
  } rows[] = {{"Llama-2-7B", 234, 164},
              {"Llama-2-13B", 122, 86},
              {"Llama-3-8B", 219, 154},
              {"Qwen2.5-14B", 118, 83}};
  for (const Row& r : rows) {
    LlmSpec spec;
    spec.shape = &catalog_.FindModel(r.model);
    spec.context = 2048;
    spec.bandwidth_efficiency = 1;
    EXPECT_NEAR(SoloDemand(LlmDecode(spec), h100_).tokens_per_second, r.eta1, 1.0) << r.model;
    spec.bandwidth_efficiency = 0.7;
    EXPECT_NEAR(SoloDemand(LlmDecode(spec), h100_).tokens_per_second, r.eta07, 1.0) << r.model;
  }
}

TEST_F(WorkloadTest, SlidingWindowCapsMistralKvCache) {
  LlmSpec spec;
  spec.shape = &catalog_.FindModel("Mistral-7B");
  spec.context = 32768;
  EXPECT_DOUBLE_EQ(LlmDecode(spec).kv_cache_bytes, 4096.0 * 128 * 1024);
}

TEST_F(WorkloadTest, BatchAndDtypeScaleAsTheyShould) {
  LlmSpec spec;
  spec.shape = &catalog_.FindModel("Llama-3-8B");
  spec.context = 1024;
  Workload b1 = LlmDecode(spec);
  spec.batch = 8;
  Workload b8 = LlmDecode(spec);
  EXPECT_DOUBLE_EQ(b8.kv_cache_bytes, 8 * b1.kv_cache_bytes);
  EXPECT_DOUBLE_EQ(b8.weight_bytes, b1.weight_bytes)
      << "weights are read once per step for the batch";
  EXPECT_GT(SoloDemand(b8, h100_).tokens_per_second, 6 * SoloDemand(b1, h100_).tokens_per_second);
  spec.batch = 1;
  spec.dtype = DType::kInt4;
  // Half a byte per weight, plus an fp16 scale and a 4-bit zero point per group of 128.
  EXPECT_DOUBLE_EQ(LlmDecode(spec).weight_bytes, b1.weight_bytes / 2 * (0.5 + 2.5 / 128));
  EXPECT_EQ(LlmDecode(spec).kv_cache_bytes, b1.kv_cache_bytes)
      << "int4 weights keep a bf16 KV cache";
}

TEST_F(WorkloadTest, AStepOverheadAddsToEveryStepAndLeavesTheGpuIdleMeanwhile) {
  LlmSpec spec;
  spec.params = 13e9;
  spec.bandwidth_efficiency = 1;
  double alone = SoloDemand(LlmDecode(spec), h100_).ms_per_token;
  spec.step_overhead_seconds = 1.5e-3;
  Demand d = SoloDemand(LlmDecode(spec), h100_);
  EXPECT_NEAR(d.ms_per_token, alone + 1.5, 1e-9);
  EXPECT_NEAR(d.bandwidth_fraction, alone / (alone + 1.5), 1e-9) << "idle while off the GPU";
  spec.step_overhead_seconds = -1;
  EXPECT_THROW(LlmDecode(spec), Error);
}

TEST_F(WorkloadTest, QuantisedWeightsCarryTheirScales) {
  EXPECT_DOUBLE_EQ(WeightBytesPerParam(DType::kBf16), 2);
  EXPECT_DOUBLE_EQ(WeightBytesPerParam(DType::kFp8), 1) << "a per-tensor scale is nothing";
  EXPECT_DOUBLE_EQ(WeightBytesPerParam(DType::kInt8), 1 + 2.0 / 128);
  EXPECT_DOUBLE_EQ(WeightBytesPerParam(DType::kInt4), 0.5 + 2.0 / 128 + 0.5 / 128);
  EXPECT_DOUBLE_EQ(WeightBytesPerParam(DType::kInt4, 32), 0.5 + 2.5 / 32)
      << "llama.cpp-sized blocks: 4.625 bits a weight";
  LlmSpec spec;
  spec.params = 7e9;
  spec.dtype = DType::kInt4;
  spec.quant_group = 32;
  Workload w = LlmDecode(spec);
  EXPECT_DOUBLE_EQ(w.weight_bytes, 7e9 * (0.5 + 2.5 / 32));
  EXPECT_DOUBLE_EQ(w.bytes_per_step, w.weight_bytes) << "no KV cache without a shape";
  EXPECT_EQ(ParseDType("INT8"), DType::kInt8);
  EXPECT_EQ(h100_.PeakFlops(DType::kInt8), h100_.PeakFlops(DType::kBf16))
      << "weight-only int8 multiplies in bf16";
}

TEST_F(WorkloadTest, PrefillIsComputeBound) {
  LlmSpec spec;
  spec.shape = &catalog_.FindModel("Llama-3-8B");
  spec.context = 2048;
  Demand d = SoloDemand(LlmPrefill(spec), h100_);
  EXPECT_FALSE(d.bandwidth_bound);
  EXPECT_NEAR(d.flops_fraction, kDefaultComputeEfficiency, 1e-9);
  EXPECT_GT(d.tokens_per_second, 10000);
}

TEST_F(WorkloadTest, GenericJobRunsAtItsOwnPaceWhenTheGpuAllows) {
  Workload w = GenericJob(10e9, 500e9, 20e12, DType::kBf16);
  Demand d = SoloDemand(w, h100_);
  EXPECT_DOUBLE_EQ(d.steps_per_second, 1);
  EXPECT_DOUBLE_EQ(d.bandwidth, 500e9);
  EXPECT_DOUBLE_EQ(d.flops, 20e12);
  // On an L4 (300 GB/s) the same job cannot get 500 GB/s: it runs at 0.6 of its pace.
  Demand l4 = SoloDemand(w, catalog_.FindGpu("L4"));
  EXPECT_NEAR(l4.steps_per_second, 0.6, 1e-9);
}

TEST_F(WorkloadTest, RefusesImpossibleSpecs) {
  LlmSpec spec;
  EXPECT_THROW(LlmDecode(spec), Error);  // neither model nor params
  spec.params = 7e9;
  spec.batch = 0;
  EXPECT_THROW(LlmDecode(spec), Error);
  spec.batch = 1;
  spec.bandwidth_efficiency = 1.5;
  EXPECT_THROW(LlmDecode(spec), Error);
  EXPECT_THROW(GenericJob(1e9, 0, 0, DType::kBf16), Error);
}

}  // namespace
}  // namespace gpumux
