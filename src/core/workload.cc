#include "core/workload.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/error.h"

namespace gpumux {
namespace {

void Validate(const LlmSpec& s) {
  if (!s.shape && s.params <= 0)
    throw BadInput("an LLM workload needs a model or a parameter count");
  if (s.batch < 1) throw BadInput(fmt::format("batch {} must be at least 1", s.batch));
  if (s.context < 0) throw BadInput(fmt::format("context {} must not be negative", s.context));
  if (!(s.step_overhead_seconds >= 0 && s.step_overhead_seconds <= 1))
    throw BadInput(fmt::format("step overhead {} s must lie in [0, 1]", s.step_overhead_seconds));
  for (double e : {s.bandwidth_efficiency, s.compute_efficiency}) {
    if (!(e > 0 && e <= 1)) {
      throw BadInput(fmt::format("efficiency {} must lie in (0, 1]", e));
    }
  }
}

DType KvDType(const LlmSpec& s) {
  if (s.kv_dtype) return *s.kv_dtype;
  return s.dtype == DType::kFp16 ? DType::kFp16 : DType::kBf16;
}

// Tokens of context the KV cache actually holds per sequence.
double KvTokens(const LlmSpec& s) {
  double tokens = s.context;
  if (s.shape && s.shape->sliding_window)
    tokens = std::min(tokens, double(*s.shape->sliding_window));
  return tokens;
}

// Fills the parts decode and prefill share: memory held and the description.
Workload Base(const LlmSpec& s, const char* kind) {
  Validate(s);
  Workload w;
  w.kind = kind;
  w.compute_dtype = s.dtype;
  w.sequences = s.batch;
  w.bandwidth_efficiency = s.bandwidth_efficiency;
  w.compute_efficiency = s.compute_efficiency;
  w.efficiency_stated = s.efficiency_stated;
  w.step_overhead_seconds = s.step_overhead_seconds;
  if (s.engine) {  // what the engine class achieves, where the spec does not say
    if (!s.efficiency_stated) w.bandwidth_efficiency = s.engine->BandwidthEfficiency(s.dtype);
    if (s.step_overhead_seconds == 0) {  // a model given by its parameters alone has no layers
      w.clocked_overhead_seconds = s.engine->StepOverheadSeconds(s.shape ? s.shape->layers : 0);
      w.step_overhead_seconds = s.engine->host_overhead_seconds;
    }
    w.efficiency_stated = true;
    w.expected_error = s.engine->error_median;
  }
  double params = s.shape ? s.shape->Params() : s.params;
  w.weight_bytes = params * WeightBytesPerParam(s.dtype, s.quant_group);
  if (s.shape) {
    w.kv_cache_bytes =
        s.batch * KvTokens(s) * s.shape->KvElementsPerToken() * BytesPerElement(KvDType(s));
  }
  std::string model = s.shape ? s.shape->name : fmt::format("{:.3g} params", s.params);
  w.description =
      fmt::format("{} {}, batch {}, context {}", model, DTypeName(s.dtype), s.batch, s.context);
  return w;
}

// Attention FLOPs for one query token attending to `keys` cached tokens (QK^T and AV).
double AttentionFlopsPerToken(const ModelShape& m, double keys) {
  return 4.0 * m.layers * m.heads * m.head_dim * keys;
}

}  // namespace

double StepTimes::step() const { return std::max(std::max(memory, compute) + overhead, pace); }

double DequantSecondsOn(const Workload& w, const GpuKind& gpu) {
  if (w.dequant_bytes_per_sm_cycle <= 0) return 0;
  return w.dequant_bytes_per_step / (w.dequant_bytes_per_sm_cycle * gpu.sms * gpu.SmClockHz());
}

double AttentionSecondsOn(const Workload& w, const GpuKind& gpu) {
  double paced = w.attention_bytes_per_step / (w.bandwidth_efficiency * gpu.bandwidth);
  if (w.attention_bytes_per_sm_cycle <= 0 || w.attention_blocks <= 0) return paced;
  double sms = std::min(double(gpu.sms), w.attention_blocks);
  return std::max(paced, w.attention_block_bytes_per_step /
                             (w.attention_bytes_per_sm_cycle * sms * gpu.SmClockHz()));
}

StepTimes StepTimesOn(const Workload& w, const GpuKind& gpu) {
  StepTimes t;
  t.memory =
      (w.bytes_per_step - w.attention_bytes_per_step) / (w.bandwidth_efficiency * gpu.bandwidth) +
      AttentionSecondsOn(w, gpu);
  t.compute = std::max(w.flops_per_step / (w.compute_efficiency * gpu.PeakFlops(w.compute_dtype)),
                       DequantSecondsOn(w, gpu));
  t.pace = w.paced_steps_per_second > 0 ? 1.0 / w.paced_steps_per_second : 0;
  t.overhead = w.step_overhead_seconds + w.clocked_overhead_seconds * gpu.ClockedTimeScale();
  return t;
}

Workload LlmDecode(const LlmSpec& s) {
  Workload w = Base(s, "llm-decode");
  // Every step streams the weights once for the whole batch, and reads each sequence's KV cache.
  double streamed = s.shape ? s.shape->StreamedParams() : s.params;
  w.bytes_per_step = streamed * WeightBytesPerParam(s.dtype, s.quant_group) + w.kv_cache_bytes;
  if (s.engine && s.engine->DequantBytesPerSmCycle(s.dtype) > 0) {
    w.dequant_bytes_per_step = streamed * WeightBytesPerParam(s.dtype, s.quant_group);
    w.dequant_bytes_per_sm_cycle = s.engine->DequantBytesPerSmCycle(s.dtype);
  }
  w.attention_bytes_per_step = w.kv_cache_bytes;
  if (s.shape && s.engine && s.engine->attention_per_head &&
      s.engine->attention_bytes_per_sm_cycle > 0) {
    w.attention_blocks = double(s.batch) * s.shape->heads;
    w.attention_block_bytes_per_step = w.kv_cache_bytes * s.shape->heads / s.shape->kv_heads;
    w.attention_bytes_per_sm_cycle = s.engine->attention_bytes_per_sm_cycle;
  }
  double matmul = s.shape ? s.shape->MatmulParams() : s.params;
  double attention = s.shape ? AttentionFlopsPerToken(*s.shape, KvTokens(s)) : 0;
  w.flops_per_step = s.batch * (2.0 * matmul + attention);
  w.tokens_per_sequence_step = 1;
  return w;
}

Workload LlmPrefill(const LlmSpec& s) {
  Workload w = Base(s, "llm-prefill");
  if (s.context < 1) throw BadInput("prefill needs a context (prompt length) of at least 1 token");
  double streamed = s.shape ? s.shape->StreamedParams() : s.params;
  // One pass reads the weights and writes the prompt's KV cache.
  w.bytes_per_step = streamed * WeightBytesPerParam(s.dtype, s.quant_group) + w.kv_cache_bytes;
  double matmul = s.shape ? s.shape->MatmulParams() : s.params;
  // Causal attention: token i attends to i keys, so on average (c+1)/2.
  double attention = s.shape ? AttentionFlopsPerToken(*s.shape, (KvTokens(s) + 1) / 2) : 0;
  w.flops_per_step = double(s.batch) * s.context * (2.0 * matmul + attention);
  w.tokens_per_sequence_step = s.context;
  w.description = "prefill " + w.description;
  return w;
}

Workload GenericJob(double memory_bytes, double bandwidth, double flops, DType dtype) {
  if (memory_bytes < 0 || bandwidth < 0 || flops < 0) {
    throw BadInput("a generic job's memory, bandwidth and compute must not be negative");
  }
  if (bandwidth == 0 && flops == 0) {
    throw BadInput("a generic job needs a bandwidth or a compute rate above zero");
  }
  Workload w;
  w.kind = "generic";
  w.compute_dtype = dtype;
  w.other_bytes = memory_bytes;
  // One step = one second of work at solo speed.
  w.bytes_per_step = bandwidth;
  w.flops_per_step = flops;
  w.paced_steps_per_second = 1;
  w.bandwidth_efficiency = 1;
  w.compute_efficiency = 1;
  w.efficiency_stated = true;  // its rates are what it was measured to use alone
  w.description = fmt::format("generic job: {:.3g} GB, {:.3g} GB/s, {:.3g} TFLOP/s",
                              memory_bytes / 1e9, bandwidth / 1e9, flops / 1e12);
  return w;
}

Workload TensorParallelShard(const Workload& w, int tp, int kv_split,
                             double allreduce_seconds_per_step) {
  if (tp < 1) throw BadInput(fmt::format("tensor parallelism {} is not 1 or more", tp));
  if (tp == 1) return w;
  if (kv_split <= 0 || kv_split > tp) kv_split = tp;
  Workload s = w;
  s.weight_bytes = w.weight_bytes / tp;
  s.kv_cache_bytes = w.kv_cache_bytes / kv_split;
  s.bytes_per_step = w.bytes_per_step / tp;
  s.flops_per_step = w.flops_per_step / tp;
  s.dequant_bytes_per_step = w.dequant_bytes_per_step / tp;
  s.attention_bytes_per_step = w.attention_bytes_per_step / kv_split;
  s.attention_blocks = w.attention_blocks / tp;  // the query heads split tp ways
  s.attention_block_bytes_per_step = w.attention_block_bytes_per_step / tp;
  s.tensor_parallel = w.tensor_parallel * tp;
  s.step_overhead_seconds = w.step_overhead_seconds + allreduce_seconds_per_step;
  s.description = fmt::format("{}, TP = {} (per GPU)", w.description, tp);
  return s;
}

Workload LlmTensorParallelShard(const Workload& w, int tp, const ModelShape* shape,
                                const EngineProfile* engine) {
  return TensorParallelShard(
      w, tp, shape ? std::min(tp, shape->kv_heads) : 0,
      engine && shape ? engine->AllReduceSecondsPerStep(shape->layers, tp) : 0);
}

std::optional<int> MinTensorParallel(const Workload& w, double gpu_memory_bytes,
                                     const ModelShape* shape) {
  for (int tp : kTensorParallelDegrees) {
    if (shape && shape->heads % tp != 0) continue;
    if (LlmTensorParallelShard(w, tp, shape, nullptr).memory_bytes() <= gpu_memory_bytes) return tp;
  }
  return std::nullopt;
}

Workload OnGpu(const Workload& w, const GpuKind& gpu) {
  if (w.efficiency_stated || !gpu.calibration) return w;
  Workload calibrated = w;
  calibrated.bandwidth_efficiency = *gpu.MeasuredBandwidthEfficiency();
  calibrated.compute_efficiency = *gpu.MeasuredComputeEfficiency();
  return calibrated;
}

Demand SoloDemand(const Workload& given, const GpuKind& gpu) {
  Workload w = OnGpu(given, gpu);
  double peak = gpu.PeakFlops(w.compute_dtype);
  StepTimes t = StepTimesOn(w, gpu);
  Demand d;
  d.memory_bytes = w.memory_bytes();
  d.steps_per_second = 1.0 / t.step();
  d.bandwidth = w.bytes_per_step * d.steps_per_second;
  d.flops = w.flops_per_step * d.steps_per_second;
  d.sm_fraction = t.compute * d.steps_per_second;  // its math at η_c, or unpacking its weights
  d.tokens_per_second = d.steps_per_second * w.sequences * w.tokens_per_sequence_step;
  d.ms_per_token = 1000.0 * t.step() / w.tokens_per_sequence_step;
  d.bandwidth_bound = t.bandwidth_bound();
  d.memory_fraction = d.memory_bytes / gpu.memory_bytes;
  d.bandwidth_fraction = d.bandwidth / gpu.bandwidth;
  d.flops_fraction = d.flops / peak;
  return d;
}

}  // namespace gpumux
