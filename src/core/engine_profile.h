// What an inference engine class makes of a GPU at decode: the fraction of the GPU's memory
// bandwidth its kernels achieve for each weight format, the fixed time each step spends off the
// GPU's critical path (launches, synchronisation, sampling, the engine's loop), and, for tensor
// parallelism, the time of one all-reduce between the GPUs (two per layer per step).
//
// Profiles live in catalog/engines.yaml; their constants are fitted on the class's published
// measurements in bench/fidelity/decode.csv, and their error band is measured by leaving one
// source out at a time (bench/fidelity_report.cc, docs/calibration.md). A workload that names an
// engine takes these instead of the defaults (LlmSpec::engine). Plain data; thread-compatible.
#pragma once

#include <string>
#include <vector>

#include "core/dtype.h"

namespace gpumux {

struct EngineProfile {
  std::string name;                  // "compiled"
  std::vector<std::string> aliases;  // engines of the class: "vllm", "sglang", ...
  std::string description;
  // An engine that runs another class's kernels from a loop of its own (a binding, a CLI around
  // a library: llama-cpp-python over llama.cpp, torchchat over gpt-fast's compiled model) names
  // that class here: it has the class's constants, plus host_overhead_seconds in series with
  // every step (not clocked: it is the host's; fitted on its rows beside the class, 0 unless
  // stated), and an error band of its own. Empty for a class.
  std::string runs;
  double host_overhead_seconds = 0;
  // η: achieved fraction of the GPU's memory bandwidth at decode, by weight format.
  double efficiency_16bit = 0.7;  // bf16 and fp16
  double efficiency_fp8 = 0.7;
  double efficiency_int8 = 0.7;
  double efficiency_int4 = 0.7;
  double step_overhead_seconds = 0;   // in series with each step's GPU work
  double layer_overhead_seconds = 0;  // more of it per layer of the model (launches per layer)
  double allreduce_seconds = 0;       // one all-reduce of a decode step's activations (TP > 1)
  // Bytes of int8 and int4 weights the class's kernels unpack per SM per clock cycle: above
  // this the SMs, not the memory, set the pace of reading them. 0: no such limit.
  double dequant_bytes_per_sm_cycle_int8 = 0;
  double dequant_bytes_per_sm_cycle_int4 = 0;
  // Whether the class's decode attention gives each sequence's query head one thread block over
  // the whole context (FasterTransformer's masked multi-head attention, which AutoAWQ's fused
  // modules run), as the catalog states from the engine's kernels; false: the engine splits the
  // context across the GPU (flash-decoding, paged attention v2), and the memory sets its pace.
  bool attention_per_head = false;
  // With per-head attention, the KV cache bytes one block's SM reads and reduces per cycle
  // (fitted): each block reads its KV head's cache (a GQA model's KV heads once per query head that
  // shares them), so with fewer blocks than SMs, or more bytes than this rate covers, the SMs and
  // not the memory set the attention's pace. 0: no such limit.
  double attention_bytes_per_sm_cycle = 0;
  // The model's |error| on the class's published measurements when their source is left out of
  // the fit (leave one source out, bench/fidelity_report.cc): the error band a prediction carries.
  double error_median = 0, error_worst = 0;
  std::vector<std::string> uncertain;  // fields not fitted on measurements
  std::string source;                  // file:line

  // This engine (runs non-empty) over `fitted`, its class's constants: `fitted`'s efficiencies,
  // overheads and rates with this engine's name, host overhead, error band and source.
  EngineProfile Over(const EngineProfile& fitted) const;
  // The class whose constants this engine has: runs, or its own name.
  const std::string& ClassName() const { return runs.empty() ? name : runs; }

  double BandwidthEfficiency(DType weights) const;
  // dequant_bytes_per_sm_cycle_* for `weights`; 0 for formats read as they are.
  double DequantBytesPerSmCycle(DType weights) const;
  // The time off the GPU's work in each step of a model of `layers` layers.
  double StepOverheadSeconds(int layers) const {
    return step_overhead_seconds + layers * layer_overhead_seconds;
  }
  // The all-reduce time a step of a model of `layers` layers adds at tensor parallelism `tp`.
  double AllReduceSecondsPerStep(int layers, int tp) const {
    return tp > 1 ? 2.0 * layers * allreduce_seconds : 0;
  }
};

}  // namespace gpumux
