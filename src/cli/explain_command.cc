// `gpumux explain`: what one job uses of one GPU, term by term, and (with --tenants or an SLO) how
// many copies of it can share that GPU and by which strategy.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/error.h"
#include "cli/commands.h"
#include "cli/report.h"
#include "core/catalog.h"
#include "core/units.h"
#include "share/gpu_choice.h"

namespace gpumux {
namespace {

struct ExplainOptions {
  std::string gpu;
  std::string model;
  std::string params;
  std::string dtype = "bf16";
  std::string kv_dtype;
  int quant_group = kDefaultQuantGroup;
  double step_overhead_ms = 0;
  int batch = 1;
  int context = 0;
  double efficiency = kDefaultBandwidthEfficiency;
  double compute_efficiency = kDefaultComputeEfficiency;
  std::string phase = "decode";
  std::vector<std::string> catalogs;
  std::vector<std::string> calibrations;
  std::string engine;                // an engine class or engine (catalog/engines.yaml)
  std::optional<double> slo_margin;  // nullopt: the engine's error band
  bool efficiency_stated = false;    // --efficiency or --compute-efficiency given
  int tenants = 0;
  std::optional<double> min_tokens_per_second, max_ms_per_token, max_slowdown;
  bool json = false;
};

DType DTypeFlag(const std::string& text, const char* flag) {
  std::optional<DType> d = ParseDType(text);
  if (!d)
    throw BadInput(fmt::format("{} '{}' is not one of bf16, fp16, fp8, int8, int4", flag, text));
  return *d;
}

Workload MakeWorkload(const ExplainOptions& o, const ModelShape* shape, double params,
                      const EngineProfile* engine) {
  LlmSpec spec;
  spec.engine = engine;
  spec.shape = shape;
  spec.params = params;
  spec.dtype = DTypeFlag(o.dtype, "--dtype");
  if (!o.kv_dtype.empty()) spec.kv_dtype = DTypeFlag(o.kv_dtype, "--kv-dtype");
  spec.quant_group = o.quant_group;
  spec.step_overhead_seconds = o.step_overhead_ms / 1e3;
  spec.batch = o.batch;
  spec.context = o.context;
  spec.bandwidth_efficiency = o.efficiency;
  spec.compute_efficiency = o.compute_efficiency;
  spec.efficiency_stated = o.efficiency_stated;
  return o.phase == "prefill" ? LlmPrefill(spec) : LlmDecode(spec);
}

nlohmann::json Breakdown(const Workload& w, const Demand& d) {
  return {{"workload", w.description},
          {"weight_bytes", w.weight_bytes},
          {"kv_cache_bytes", w.kv_cache_bytes},
          {"memory_bytes", d.memory_bytes},
          {"bytes_per_step", w.bytes_per_step},
          {"flops_per_step", w.flops_per_step},
          {"tokens_per_second", d.tokens_per_second},
          {"ms_per_token", d.ms_per_token},
          {"bandwidth_bytes_per_second", d.bandwidth},
          {"flops_per_second", d.flops},
          {"memory_fraction", d.memory_fraction},
          {"bandwidth_fraction", d.bandwidth_fraction},
          {"flops_fraction", d.flops_fraction},
          {"sm_fraction", d.sm_fraction},
          {"bound", d.bandwidth_bound ? "bandwidth" : "compute"}};
}

std::vector<std::string> Column(const Workload& w, const Demand& d) {
  return {FormatBytes(w.weight_bytes),
          w.kv_cache_bytes > 0 ? FormatBytes(w.kv_cache_bytes) : "-",
          fmt::format("{} ({})", FormatBytes(d.memory_bytes), FormatPercent(d.memory_fraction)),
          FormatBytes(w.bytes_per_step),
          FormatScaled(w.flops_per_step, "FLOP"),
          fmt::format("{:.1f}", d.tokens_per_second),
          fmt::format("{:.2f}", d.ms_per_token),
          fmt::format("{} ({})", FormatBandwidth(d.bandwidth), FormatPercent(d.bandwidth_fraction)),
          fmt::format("{} ({})", FormatFlops(d.flops), FormatPercent(d.flops_fraction)),
          d.bandwidth_bound ? "bandwidth" : "compute"};
}

struct Sharing {
  int tenants = 0;
  GpuChoice choice;
  int max_copies = 0;
  std::string max_copies_strategy;
};

// Evaluates `n` copies of the workload on the GPU, and the largest number of copies that fits.
Sharing EvaluateSharing(const GpuKind& gpu, const Workload& w, const Slo& slo, int n) {
  Sharing s;
  s.tenants = n;
  std::vector<Tenant> tenants;
  for (int i = 0; i < std::max(n, kMpsMaxClients); ++i) {
    tenants.push_back({fmt::format("copy{}", i + 1), w, slo});
  }
  std::vector<TenantLoad> loads;
  for (const Tenant& t : tenants) loads.push_back(MakeLoad(t, gpu));
  std::vector<const TenantLoad*> ptrs;
  for (const TenantLoad& l : loads) ptrs.push_back(&l);
  s.choice = ChooseStrategy(gpu, std::span(ptrs.data(), size_t(n)));
  for (int k = 1; k <= kMpsMaxClients; ++k) {
    if (!FitsAny(gpu, std::span(ptrs.data(), size_t(k)))) break;
    s.max_copies = k;
  }
  if (s.max_copies > 0) {
    GpuChoice best = ChooseStrategy(gpu, std::span(ptrs.data(), size_t(s.max_copies)));
    s.max_copies_strategy = std::string(ShareModeName(best.chosen->kind));
  }
  return s;
}

int RunExplain(const ExplainOptions& o) {
  Catalog catalog = Catalog::LoadBundled();
  for (const std::string& path : o.catalogs) catalog.AddFile(path);
  std::vector<std::string> calibrations = ApplyCalibrationFiles(catalog, o.calibrations);
  const GpuKind& gpu = catalog.FindGpu(o.gpu);
  if (o.model.empty() == o.params.empty())
    throw BadInput("give exactly one of --model and --params");
  if (o.phase != "decode" && o.phase != "prefill") {
    throw BadInput(fmt::format("--phase '{}' is not decode or prefill", o.phase));
  }
  const ModelShape* shape = o.model.empty() ? nullptr : &catalog.FindModel(o.model);
  const EngineProfile* engine = o.engine.empty() ? nullptr : &catalog.FindEngine(o.engine);
  double params = 0;
  if (!o.params.empty()) {
    try {
      params = ParseNumber(o.params);
    } catch (const Error& e) {
      throw BadInput(fmt::format("--params: {}", e.what()));
    }
  }
  // The main column: the shape with its KV cache if a model was named, else params x bytes.
  Workload main = MakeWorkload(o, shape, params, engine);
  Demand demand = SoloDemand(main, gpu);
  std::optional<Workload> rough;
  std::optional<Demand> rough_demand;
  if (shape) {
    rough = MakeWorkload(o, nullptr, shape->Params(), engine);
    rough_demand = SoloDemand(*rough, gpu);
  }

  // A model too big for one GPU: the fewest GPUs of this kind that hold it (tensor parallelism),
  // and what each of them holds and does.
  std::optional<int> gpus_needed = 1;
  std::optional<Workload> shard;
  std::optional<Demand> shard_demand;
  if (main.memory_bytes() > gpu.memory_bytes) {
    gpus_needed = MinTensorParallel(main, gpu.memory_bytes, shape);
    if (gpus_needed) {
      shard = LlmTensorParallelShard(main, *gpus_needed, shape, engine);
      shard_demand = SoloDemand(*shard, gpu);
    }
  }

  Slo slo;
  slo.min_rate = o.min_tokens_per_second;
  slo.margin = o.slo_margin;
  slo.max_ms_per_token = o.max_ms_per_token;
  slo.max_slowdown = o.max_slowdown;
  std::optional<Sharing> sharing;
  if (o.tenants > 0 || !slo.empty()) {
    sharing = EvaluateSharing(gpu, main, slo, std::max(o.tenants, 2));
  }

  // What the engine's kernels do on this GPU, for the JSON and the text alike (bytes/s, seconds).
  const double memory_rate = main.bandwidth_efficiency * gpu.bandwidth;
  const double unpacked = main.dequant_bytes_per_sm_cycle * gpu.sms * gpu.SmClockHz();
  const bool per_head_attention =
      main.attention_bytes_per_sm_cycle > 0 && main.attention_bytes_per_step > 0;
  const double attention_at_memory_pace = main.attention_bytes_per_step / memory_rate;

  if (o.json) {
    nlohmann::json j = Breakdown(main, demand);
    j["gpu"] = gpu.name;
    Workload used = OnGpu(main, gpu);
    j["efficiency"] = used.bandwidth_efficiency;
    j["compute_efficiency"] = used.compute_efficiency;
    j["calibrations"] = calibrations;
    if (engine) {
      j["engine"] = engine->name;
      j["expected_error"] = {{"median", engine->error_median}, {"worst", engine->error_worst}};
      if (!engine->runs.empty()) {
        j["runs"] = engine->runs;
        j["host_overhead_seconds"] = engine->host_overhead_seconds;
      }
    }
    // The engine's, its loop's and tensor parallelism's fixed time a step, on this GPU.
    j["step_overhead_seconds"] = StepTimesOn(main, gpu).overhead;
    if (main.dequant_bytes_per_sm_cycle > 0)
      j["unpacking"] = {{"bytes_per_sm_cycle", main.dequant_bytes_per_sm_cycle},
                        {"bytes_per_second", unpacked},
                        {"sets_the_pace", unpacked < memory_rate}};
    if (per_head_attention)
      j["attention"] = {{"per_head", true},
                        {"bytes_per_sm_cycle", main.attention_bytes_per_sm_cycle},
                        {"blocks", main.attention_blocks},
                        {"seconds_per_step", AttentionSecondsOn(main, gpu)},
                        {"seconds_at_memory_pace", attention_at_memory_pace}};
    j["catalog_uncertain_fields"] = gpu.uncertain;
    if (rough) j["rule_of_thumb"] = Breakdown(*rough, *rough_demand);
    j["gpus_needed"] = gpus_needed ? nlohmann::json(*gpus_needed) : nlohmann::json(nullptr);
    if (shard) {
      j["tensor_parallel"] = Breakdown(*shard, *shard_demand);
      j["tensor_parallel"]["degree"] = *gpus_needed;
      j["tensor_parallel"]["note"] =
          engine && shape ? "per GPU; with the engine's all-reduces, two per layer and step"
                          : "per GPU; the all-reduces between the GPUs are not modelled (name an "
                            "--engine): tokens/s is an upper bound";
    }
    if (sharing) {
      nlohmann::json s = {{"tenants", sharing->tenants},
                          {"slo", slo.Describe("tok/s")},
                          {"max_copies", sharing->max_copies},
                          {"max_copies_strategy", sharing->max_copies_strategy},
                          {"considered", nlohmann::json::array()}};
      if (sharing->choice.chosen) s["chosen"] = ToJson(*sharing->choice.chosen);
      for (const StrategyResult& r : sharing->choice.considered)
        s["considered"].push_back(ToJson(r));
      j["sharing"] = s;
    }
    fmt::print("{}\n", j.dump(2));
    return kExitOk;
  }

  fmt::print("{} ({}) on {}\n", main.description, o.phase, gpu.name);
  fmt::print("  GPU: {} memory, {}, {} dense {}, {} SMs\n", FormatBytes(gpu.memory_bytes),
             FormatBandwidth(gpu.bandwidth), FormatFlops(gpu.PeakFlops(main.compute_dtype)),
             DTypeName(main.compute_dtype), gpu.sms);
  Workload used = OnGpu(main, gpu);
  fmt::print(
      "  efficiency: bandwidth {:.2f}, compute {:.2f}{}\n", used.bandwidth_efficiency,
      used.compute_efficiency,
      used.efficiency_stated || !gpu.calibration ? "" : " (measured: the GPU's calibration)");
  for (const std::string& c : calibrations) fmt::print("  {}\n", c);
  if (engine) {
    std::string here =
        main.clocked_overhead_seconds == 0 && o.step_overhead_ms > 0
            ? std::string("not used: --step-overhead-ms given")
            : fmt::format("{:.2f} ms a step on this GPU{}",
                          main.clocked_overhead_seconds * gpu.ClockedTimeScale() * 1e3,
                          gpu.boost_clock_hz > 0
                              ? fmt::format(" at {:.0f} MHz", gpu.boost_clock_hz / 1e6)
                              : std::string(", whose clock the catalog does not state"));
    std::string own_loop =
        engine->runs.empty() ? std::string()
                             : fmt::format("; runs {}'s constants{}", engine->runs,
                                           engine->host_overhead_seconds > 0
                                               ? fmt::format(", + {:.2f} ms a step in its own loop",
                                                             engine->host_overhead_seconds * 1e3)
                                               : std::string());
    fmt::print(
        "  engine: {} ({}): step overhead {:.2f} ms + {:.1f} us a layer at {:.0f} MHz ({}), "
        "all-reduce {:.1f} us{}; tokens/s within ±{:.0f}% (median; worst "
        "{:.0f}%) of published measurements from sources its constants were not fitted on "
        "(bench/fidelity)\n",
        engine->name, engine->description, engine->step_overhead_seconds * 1e3,
        engine->layer_overhead_seconds * 1e6, kReferenceSmClockHz / 1e6, here,
        engine->allreduce_seconds * 1e6, own_loop, 100 * engine->error_median,
        100 * engine->error_worst);
  }
  if (main.dequant_bytes_per_sm_cycle > 0) {
    fmt::print(
        "  unpacking: the engine's kernels unpack {:.1f} bytes of {} weights per SM-cycle: {} "
        "on this GPU ({} of memory at its efficiency){}\n",
        main.dequant_bytes_per_sm_cycle, DTypeName(main.compute_dtype), FormatBandwidth(unpacked),
        FormatBandwidth(memory_rate), unpacked < memory_rate ? ": the SMs set the pace" : "");
  }
  if (per_head_attention) {
    fmt::print(
        "  attention: the engine reads the KV cache with one block per sequence and query head, "
        "{:.1f} bytes per SM-cycle: {:.0f} blocks read {} in {:.2f} ms a step ({:.2f} ms at the "
        "memory's pace)\n",
        main.attention_bytes_per_sm_cycle, main.attention_blocks,
        FormatBytes(main.attention_bytes_per_step), AttentionSecondsOn(main, gpu) * 1e3,
        attention_at_memory_pace * 1e3);
  }
  fmt::print("\n");
  std::vector<std::vector<std::string>> rows = {
      {"", rough ? "params x bytes" : "params x bytes", rough ? "shape + KV cache" : ""}};
  const char* labels[] = {"weights",        "KV cache", "memory",       "bytes per step",
                          "FLOPs per step", "tokens/s", "ms per token", "bandwidth",
                          "compute",        "bound by"};
  std::vector<std::string> a = Column(rough ? *rough : main, rough ? *rough_demand : demand);
  std::vector<std::string> b = rough ? Column(main, demand) : std::vector<std::string>(a.size());
  for (size_t i = 0; i < a.size(); ++i) rows.push_back({labels[i], a[i], b[i]});
  fmt::print("{}", FormatTable(rows));
  if (shard) {
    fmt::print(
        "\n  needs {} GPUs: {} is {} of one {}'s memory. With tensor parallelism {}, each GPU:\n",
        *gpus_needed, FormatBytes(main.memory_bytes()), FormatPercent(demand.memory_fraction),
        gpu.name, *gpus_needed);
    std::vector<std::vector<std::string>> tp_rows = {
        {"", fmt::format("TP = {}, per GPU", *gpus_needed)}};
    std::vector<std::string> c = Column(*shard, *shard_demand);
    for (size_t i = 0; i < c.size(); ++i) tp_rows.push_back({labels[i], c[i]});
    fmt::print("{}", FormatTable(tp_rows));
    if (engine && shape)
      fmt::print(
          "  (tokens/s is the job's, every GPU doing its part of each step, with the engine's\n"
          "  all-reduces between the GPUs: two per layer and step)\n");
    else
      fmt::print(
          "  (tokens/s is the job's, every GPU doing its part of each step; an upper bound: the\n"
          "  all-reduces between the GPUs, two per layer and step, are not in the model; name an\n"
          "  --engine for them)\n");
  } else if (!gpus_needed) {
    fmt::print("\n  needs more than {} {} GPUs: {} is {} of one's memory\n",
               kTensorParallelDegrees[std::size(kTensorParallelDegrees) - 1], gpu.name,
               FormatBytes(main.memory_bytes()), FormatPercent(demand.memory_fraction));
  }
  if (!gpu.uncertain.empty()) {
    fmt::print("\n  note: the catalog marks these {} figures uncertain: {}\n", gpu.name,
               fmt::join(gpu.uncertain, ", "));
  }
  if (sharing) {
    fmt::print("\n{} copies on one {} (SLO {}):\n", sharing->tenants, gpu.name,
               slo.Describe("tok/s"));
    fmt::print("{}", FormatConsidered(sharing->choice.considered,
                                      sharing->choice.chosen ? &*sharing->choice.chosen : nullptr));
    if (sharing->max_copies > 0) {
      fmt::print("  at most {} copies meet the SLO on one {} (by {})\n", sharing->max_copies,
                 gpu.name, sharing->max_copies_strategy);
    } else {
      fmt::print("  not even one copy meets the SLO on one {}\n", gpu.name);
    }
  }
  return kExitOk;
}

}  // namespace

Command AddExplainCommand(CLI::App& app) {
  auto o = std::make_shared<ExplainOptions>();
  CLI::App* sub = app.add_subcommand("explain",
                                     "What one LLM job uses of one GPU: memory, bandwidth, "
                                     "FLOPs, tokens/s, and how many copies can share it");
  sub->add_option("--gpu", o->gpu,
                  "GPU kind from the catalog (case-insensitive), e.g. H100-SXM5-80GB")
      ->required();
  sub->add_option("--model", o->model, "model shape from the catalog, e.g. Llama-2-13B");
  sub->add_option("--params", o->params, "parameter count instead of a model, e.g. 13e9");
  sub->add_option("--dtype", o->dtype,
                  "weight format: bf16, fp16, fp8, int8, int4 (int8/int4 with an fp16 scale per "
                  "--quant-group weights)")
      ->capture_default_str();
  sub->add_option("--kv-dtype", o->kv_dtype, "KV-cache format (default: fp16 for fp16, else bf16)");
  sub->add_option("--step-overhead-ms", o->step_overhead_ms,
                  "time each step spends off the GPU (launches, sync, sampling), in series with it")
      ->check(CLI::Range(0.0, 1000.0))
      ->capture_default_str();
  sub->add_option("--engine", o->engine,
                  "inference engine (vllm, sglang, tensorrt-llm, gpt-fast, torchchat, llama.cpp, "
                  "autoawq, transformers, ...) or class (compiled, llama.cpp, autoawq, eager): its "
                  "measured efficiency, step overhead and all-reduce time, and its error band "
                  "(catalog/engines.yaml)");
  sub->add_option("--slo-margin", o->slo_margin,
                  "fraction above the SLO a predicted rate must be to meet it, for the model's "
                  "error (default: the engine's median error, else 0)")
      ->check(CLI::Range(0.0, 0.99));
  sub->add_option("--quant-group", o->quant_group,
                  "int8/int4 weights per fp16 scale (GPTQ/AWQ 128; llama.cpp Q4_0 32)")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  sub->add_option("--batch", o->batch, "sequences served together")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--context", o->context, "tokens of context per sequence (KV cache)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  sub->add_option("--efficiency", o->efficiency, "achieved fraction of peak HBM bandwidth, eta")
      ->check(CLI::Range(1e-6, 1.0))
      ->capture_default_str()
      ->each([o](const std::string&) { o->efficiency_stated = true; });
  sub->add_option("--compute-efficiency", o->compute_efficiency, "achieved fraction of peak FLOP/s")
      ->check(CLI::Range(1e-6, 1.0))
      ->capture_default_str()
      ->each([o](const std::string&) { o->efficiency_stated = true; });
  sub->add_option("--calibration", o->calibrations,
                  "a `gpumux calibrate` file: its GPU kind's measured efficiencies stand for "
                  "--efficiency and --compute-efficiency when they are not given (default: the "
                  "node's, in $GPUMUX_CALIBRATION_DIR or /var/lib/gpumux/calibrations; 'none': "
                  "none)");
  sub->add_option("--phase", o->phase, "decode or prefill")->capture_default_str();
  sub->add_option("--catalog", o->catalogs, "extra catalog file with your own GPU kinds or models");
  sub->add_option("--tenants", o->tenants, "evaluate this many copies sharing the GPU")
      ->check(CLI::Range(1, kMpsMaxClients));
  sub->add_option("--min-tokens-per-second", o->min_tokens_per_second,
                  "SLO: per-sequence tokens/s");
  sub->add_option("--max-ms-per-token", o->max_ms_per_token, "SLO: ms per token");
  sub->add_option("--max-slowdown", o->max_slowdown, "SLO: slowdown against running alone");
  sub->add_flag("--json", o->json, "print one JSON object instead of a table");
  return {sub, [o] { return RunExplain(*o); }};
}

}  // namespace gpumux
