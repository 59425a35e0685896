// The demand model: what a tenant's job costs a GPU.
//
// A Workload says what one step of the job moves and computes (an LLM decode step produces one
// token per sequence; a prefill step a whole prompt; a generic job's "step" is one second of its
// work at solo speed) and what memory it holds. Its speed on any slice of a GPU then follows from
// the roofline: a step takes max(bytes / (η·bandwidth), FLOPs / (η_c·peak FLOP/s), pace), where the
// pace term is how fast the job asks to run on its own (zero for a server that runs flat out).
#pragma once

#include <optional>
#include <string>

#include "core/dtype.h"
#include "core/engine_profile.h"
#include "core/gpu_kind.h"
#include "core/model_shape.h"

namespace gpumux {

// Defaults documented in the README (demand model): η for batch-1 decode lies at 0.6-0.8 in
// well-engineered engines (CUDA graphs, fused kernels) and 0.27-0.5 in eager stacks
// (../shared/reference/interference-roofline.md §4.2); prefill reaches about 60% of peak math.
inline constexpr double kDefaultBandwidthEfficiency = 0.7;
inline constexpr double kDefaultComputeEfficiency = 0.6;

struct Workload {
  std::string kind;         // "llm-decode", "llm-prefill", "generic"
  std::string description;  // "Llama-2-13B bf16, batch 1, context 4096"
  DType compute_dtype = DType::kBf16;
  // Memory held for the job's lifetime.
  double weight_bytes = 0;
  double kv_cache_bytes = 0;
  double other_bytes = 0;  // activations, runtime, or a generic job's whole footprint
  // Cost of one step.
  double bytes_per_step = 0;
  double flops_per_step = 0;
  double sequences = 1;                 // sequences served together (the batch)
  double tokens_per_sequence_step = 1;  // tokens one sequence gains per step (decode 1, prefill c)
  double paced_steps_per_second = 0;    // the job's own pace; 0 = as fast as the hardware allows
  double bandwidth_efficiency = kDefaultBandwidthEfficiency;  // η
  double compute_efficiency = kDefaultComputeEfficiency;      // η_c
  // Whether the efficiencies were stated (a flag, a plan file); if not, a calibrated GPU's measured
  // ones stand for them (OnGpu).
  bool efficiency_stated = false;
  // GPUs of one node the job spans (tensor parallelism); the figures above are then one GPU's part
  // (TensorParallelShard).
  int tensor_parallel = 1;
  // Seconds each step spends off the GPU's critical path (launches, synchronisation, sampling, the
  // engine's own loop), in series with the GPU work: 0 unless stated (published batch-1 decode
  // steps show on the order of 1-2 ms; docs/calibration.md).
  double step_overhead_seconds = 0;
  // The engine class's fixed step costs (EngineProfile::StepOverheadSeconds): short kernels and
  // launch latencies, stated at kReferenceSmClockHz and scaled to each GPU's clock
  // (GpuKind::ClockedTimeScale) in series with the GPU work, beside step_overhead_seconds.
  double clocked_overhead_seconds = 0;
  // Quantised weight bytes the SMs unpack each step, and how many each SM unpacks a cycle at most
  // (the engine's EngineProfile::DequantBytesPerSmCycle; 0: no limit): that work is the SMs', so
  // it joins the step's compute time.
  double dequant_bytes_per_step = 0;
  double dequant_bytes_per_sm_cycle = 0;
  // KV cache bytes the step's attention reads from memory (counted in bytes_per_step too); with
  // an engine whose attention gives each sequence's query head one thread block, the blocks
  // (sequences x query heads), the bytes they read together (each its KV head's cache: a GQA
  // model's cache once per query head) and how many bytes a block's SM reads a cycle at most
  // (EngineProfile::attention_bytes_per_sm_cycle; 0: no limit, the memory sets the pace).
  double attention_bytes_per_step = 0;
  double attention_blocks = 0;
  double attention_block_bytes_per_step = 0;
  double attention_bytes_per_sm_cycle = 0;
  // The model's median |error| on published measurements of jobs like this one (its engine's
  // EngineProfile::error_median); 0 when not known.
  double expected_error = 0;

  double memory_bytes() const { return weight_bytes + kv_cache_bytes + other_bytes; }
  // Tokens (or steps) one sequence gains per second when steps take `step_seconds`.
  double SequenceRate(double step_seconds) const { return tokens_per_sequence_step / step_seconds; }
};

// Where a step's time goes on a given slice of a GPU (seconds).
struct StepTimes {
  // bytes / (η · bandwidth), the KV cache's part at the attention's own pace if slower
  double memory = 0;
  double compute = 0;  // FLOPs / (η_c · peak), or the SMs' unpacking of quantised weights if longer
  double pace = 0;     // 1 / paced rate, or 0
  // Workload::step_overhead_seconds plus its clocked overhead on the GPU, added to the GPU's part.
  double overhead = 0;
  // max(max(memory, compute) + overhead, pace).
  double step() const;
  bool bandwidth_bound() const { return memory >= compute; }
};
// `w`'s step on the whole of `gpu` (its efficiencies as given: see OnGpu).
StepTimes StepTimesOn(const Workload& w, const GpuKind& gpu);
// Seconds all of `gpu`'s SMs take to unpack a step's quantised weights (0 without a limit).
double DequantSecondsOn(const Workload& w, const GpuKind& gpu);
// Seconds `gpu` takes to read a step's KV cache in its attention: at the memory's pace, or at
// the pace of the SMs the attention's blocks occupy when the engine states a per-SM limit.
double AttentionSecondsOn(const Workload& w, const GpuKind& gpu);

// An LLM served from a model shape, or from a bare parameter count (then without KV cache).
struct LlmSpec {
  const ModelShape* shape = nullptr;  // null: use `params`
  double params = 0;
  DType dtype = DType::kBf16;  // weights
  // Weights per quantisation scale, for int8 and int4 (WeightBytesPerParam): every weight is
  // counted as quantised, embeddings and LM head too (formats that keep those in 16 bits hold
  // more).
  int quant_group = kDefaultQuantGroup;
  std::optional<DType> kv_dtype;  // default: fp16 for fp16 models, else bf16
  int batch = 1;
  int context = 0;  // tokens held per sequence (prompt + generated)
  double bandwidth_efficiency = kDefaultBandwidthEfficiency;
  double compute_efficiency = kDefaultComputeEfficiency;
  bool efficiency_stated = false;    // see Workload::efficiency_stated
  double step_overhead_seconds = 0;  // see Workload::step_overhead_seconds
  // The engine class it runs in (catalog/engines.yaml), or null: its efficiency for the weights'
  // format stands for a bandwidth efficiency not stated, its step overhead for one not given (0),
  // and the workload then counts as stating its efficiencies.
  const EngineProfile* engine = nullptr;
};
// Throws Error (bad input) for an impossible spec (no params, batch < 1, negative context, η
// outside (0,1]).
Workload LlmDecode(const LlmSpec& spec);
// Prefill of `context` prompt tokens for each of `batch` sequences in one step.
Workload LlmPrefill(const LlmSpec& spec);

// A job described by what it uses at solo speed: its memory, HBM bandwidth and FLOP/s. It runs at
// that pace when the GPU can give it; slower when it cannot.
Workload GenericJob(double memory_bytes, double bandwidth, double flops, DType dtype);

// Tensor parallelism: one GPU's part of `w` spread over `tp` GPUs of one node, each holding and
// reading 1/tp of the weights and doing 1/tp of the FLOPs; the KV cache splits by attention head,
// so it splits `kv_split` ways (min(tp, KV heads): a GQA model with fewer KV heads than GPUs keeps
// copies) — 0 means tp. Runtime and activation memory (other_bytes) stays whole on each.
// `allreduce_seconds_per_step` (EngineProfile::AllReduceSecondsPerStep) is added to each step's
// overhead; with 0 the rate is an upper bound. Throws Error (bad input) for tp < 1.
Workload TensorParallelShard(const Workload& w, int tp, int kv_split = 0,
                             double allreduce_seconds_per_step = 0);
// TensorParallelShard of an LLM workload of `shape` (null: a bare parameter count) run by `engine`:
// the KV cache split by the model's KV heads, and the engine's all-reduces added to each step when
// both are known (else none: the rate is an upper bound).
Workload LlmTensorParallelShard(const Workload& w, int tp, const ModelShape* shape,
                                const EngineProfile* engine);
// The tensor-parallel degrees gpumux considers: a node's GPUs split by powers of two.
inline constexpr int kTensorParallelDegrees[] = {1, 2, 4, 8};
// The smallest of kTensorParallelDegrees whose shard of `w` fits in `gpu_memory_bytes` and, when
// `shape` is given, divides its attention heads; nullopt if none does.
std::optional<int> MinTensorParallel(const Workload& w, double gpu_memory_bytes,
                                     const ModelShape* shape);

// `w` as it runs on `gpu`: with the GPU's measured efficiencies (its calibration) unless `w` states
// its own.
Workload OnGpu(const Workload& w, const GpuKind& gpu);

// The "demand vector": what a workload uses of one GPU when it runs there alone.
struct Demand {
  double memory_bytes = 0;
  double bandwidth = 0;    // bytes/s
  double flops = 0;        // FLOP/s
  double sm_fraction = 0;  // share of the SMs' time it keeps busy (math at η_c, or unpacking)
  double steps_per_second = 0;
  double tokens_per_second = 0;  // all sequences together
  double ms_per_token = 0;       // per sequence (one step for decode)
  bool bandwidth_bound = true;
  // Fractions of the GPU's capacity.
  double memory_fraction = 0, bandwidth_fraction = 0, flops_fraction = 0;
};
Demand SoloDemand(const Workload& w, const GpuKind& gpu);

}  // namespace gpumux
