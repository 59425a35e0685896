#include "share/plan_file.h"

#include <fmt/format.h>

#include <map>

#include "core/yaml_fields.h"

namespace gpumux {
namespace {

DType ReadDType(const YamlFields& f, std::string_view key, DType fallback) {
  if (!f.Has(key)) return fallback;
  std::string text = f.String(key);
  std::optional<DType> d = ParseDType(text);
  if (!d) f.Fail(key, fmt::format("'{}' is not one of bf16, fp16, fp8, int8, int4, tf32", text));
  return *d;
}

double ReadEfficiency(const YamlFields& f, std::string_view key, double fallback) {
  if (!f.Has(key)) return fallback;
  double e = f.Number(key);
  if (!(e > 0 && e <= 1)) f.Fail(key, fmt::format("{} must lie in (0, 1]", e));
  return e;
}

Slo ReadSlo(const std::string& path, const YAML::Node& node, const std::string& where) {
  YamlFields f(path, node, where + " slo");
  f.AllowOnly({"min_tokens_per_second", "min_steps_per_second", "max_ms_per_token", "max_slowdown",
               "margin"});
  Slo slo;
  if (f.Has("min_tokens_per_second")) slo.min_rate = f.Number("min_tokens_per_second");
  if (f.Has("min_steps_per_second")) slo.min_rate = f.Number("min_steps_per_second");
  if (f.Has("max_ms_per_token")) {
    slo.max_ms_per_token = f.Number("max_ms_per_token");
    if (*slo.max_ms_per_token <= 0) f.Fail("max_ms_per_token", "must be positive");
  }
  if (f.Has("max_slowdown")) {
    slo.max_slowdown = f.Number("max_slowdown");
    if (*slo.max_slowdown < 1) f.Fail("max_slowdown", "must be at least 1");
  }
  if (f.Has("margin") && f.OptionalString("margin") != std::optional<std::string>("auto")) {
    slo.margin = f.Number("margin");
    if (!(*slo.margin >= 0 && *slo.margin < 1))
      f.Fail("margin", "must be 'auto' or a fraction in [0, 1)");
  }
  if (slo.empty()) f.Fail("slo", "names no objective");
  return slo;
}

}  // namespace

Workload ReadWorkload(const std::string& path, const YAML::Node& node, const Catalog& catalog,
                      const std::string& where) {
  YamlFields f(path, node, where + " workload");
  std::string kind = f.String("kind");
  try {
    if (kind == "generic") {
      f.AllowOnly({"kind", "memory", "bandwidth", "compute", "dtype"});
      double bandwidth = f.Has("bandwidth") ? f.Bandwidth("bandwidth") : 0;
      double compute = f.Has("compute") ? f.Flops("compute") : 0;
      if (bandwidth <= 0 && compute <= 0)
        f.Fail("bandwidth", "a generic job needs a bandwidth or a compute rate above zero");
      return GenericJob(f.Bytes("memory"), bandwidth, compute, ReadDType(f, "dtype", DType::kBf16));
    }
    if (kind != "llm-decode" && kind != "llm-prefill") {
      f.Fail("kind", fmt::format("'{}' is not one of llm-decode, llm-prefill, generic", kind));
    }
    f.AllowOnly({"kind", "model", "params", "dtype", "quant_group", "kv_dtype", "batch", "context",
                 "efficiency", "compute_efficiency", "step_overhead_ms", "tp", "engine"});
    LlmSpec spec;
    if (f.Has("model") == f.Has("params"))
      f.Fail("model", "give exactly one of 'model' and 'params'");
    if (f.Has("model")) {
      try {
        spec.shape = &catalog.FindModel(f.String("model"));
      } catch (const Error& e) {
        f.Fail("model", e.what());
      }
    } else {
      spec.params = f.Number("params");
      if (!(spec.params > 0)) f.Fail("params", "must be more than 0");
    }
    spec.dtype = ReadDType(f, "dtype", DType::kBf16);
    if (f.Has("quant_group")) spec.quant_group = f.Integer("quant_group", 1, 1 << 16);
    if (f.Has("kv_dtype")) spec.kv_dtype = ReadDType(f, "kv_dtype", DType::kBf16);
    spec.batch = f.Has("batch") ? f.Integer("batch", 1, 1 << 20) : 1;
    spec.context = f.Has("context") ? f.Integer("context", 0, 1 << 24) : 0;
    if (kind == "llm-prefill" && spec.context < 1)
      f.Fail("context", "prefill needs a context (prompt length) of at least 1 token");
    spec.efficiency_stated = f.Has("efficiency") || f.Has("compute_efficiency");
    if (f.Has("step_overhead_ms")) {
      double ms = f.Number("step_overhead_ms");
      if (!(ms >= 0 && ms <= 1000)) f.Fail("step_overhead_ms", "must lie in [0, 1000]");
      spec.step_overhead_seconds = ms / 1e3;
    }
    if (f.Has("engine")) {
      try {
        spec.engine = &catalog.FindEngine(f.String("engine"));
      } catch (const Error& e) {
        f.Fail("engine", e.what());
      }
    }
    spec.bandwidth_efficiency = ReadEfficiency(f, "efficiency", kDefaultBandwidthEfficiency);
    spec.compute_efficiency = ReadEfficiency(f, "compute_efficiency", kDefaultComputeEfficiency);
    Workload whole = kind == "llm-decode" ? LlmDecode(spec) : LlmPrefill(spec);
    // Tensor parallelism: the job spans `tp` GPUs of one node, each holding and doing its part.
    int tp = f.Has("tp") ? f.Integer("tp", 1, 8) : 1;
    if (tp & (tp - 1)) f.Fail("tp", fmt::format("{} is not 1, 2, 4 or 8", tp));
    if (spec.shape && spec.shape->heads % tp != 0)
      f.Fail("tp", fmt::format("{} does not divide {}'s {} attention heads", tp, spec.shape->name,
                               spec.shape->heads));
    return LlmTensorParallelShard(whole, tp, spec.shape, spec.engine);
  } catch (const Error& e) {
    // Errors from the workload constructors lack the location; those from YamlFields have it.
    std::string msg = e.what();
    if (msg.rfind(path, 0) == 0) throw;
    f.Fail("kind", msg);
  }
}

PlanFile LoadPlanFile(const std::string& path, const Catalog& catalog) {
  YAML::Node root = YamlFields::LoadFile(path);
  if (!root.IsMap())
    throw BadInput(
        fmt::format("{}:1: a plan file is a mapping with 'fleet:' and 'tenants:'", path));
  YamlFields top(path, root, "plan");
  top.AllowOnly({"fleet", "tenants", "strategies", "default_slo"});
  PlanFile plan;

  // Each counted GPU and tenant is a record the planner holds: the counts are bounded so that
  // what a file asks stays within memory (100,000 of each plan in under a second and 150 MB).
  int64_t gpus = 0, tenants = 0;
  for (const auto& item : top.List("fleet")) {
    YamlFields f(path, item, "fleet entry");
    f.AllowOnly({"gpu", "count", "price_per_hour"});
    FleetEntry e;
    try {
      e.gpu = &catalog.FindGpu(f.String("gpu"));
    } catch (const Error& err) {
      f.Fail("gpu", err.what());
    }
    e.count = f.Integer("count", 0, kMaxPlannedGpus);
    if ((gpus += e.count) > kMaxPlannedGpus)
      f.Fail("count", fmt::format("the fleet would hold more than {} GPUs", kMaxPlannedGpus));
    if (f.Has("price_per_hour")) {
      e.price_per_hour = f.Number("price_per_hour");
    } else if (e.gpu->price_per_hour) {
      e.price_per_hour = *e.gpu->price_per_hour;
      plan.notes.push_back(
          fmt::format("{}: catalog price ${:.2f}/hour (indicative; set price_per_hour)",
                      e.gpu->name, e.price_per_hour));
    }
    plan.input.fleet.push_back(e);
  }
  if (plan.input.fleet.empty()) top.Fail("fleet", "lists no GPU kind");

  if (top.Has("strategies")) {
    plan.input.allowed = StrategySet::None();
    for (const std::string& s : top.StringList("strategies")) {
      std::optional<ShareMode> mode = ParseShareMode(s);
      if (mode && *mode != ShareMode::kWhole)
        plan.input.allowed.Allow(*mode);
      else
        top.Fail("strategies", fmt::format("'{}' is not one of mig, mps, timeslice", s));
    }
  }

  Slo default_slo;
  default_slo.max_slowdown = kDefaultMaxSlowdown;
  bool explicit_default = top.Has("default_slo");
  if (explicit_default) default_slo = ReadSlo(path, top.Map("default_slo"), "plan default");

  std::map<std::string, std::string> names;  // name -> where it was first defined
  for (const auto& item : top.List("tenants")) {
    YamlFields first(path, item, "tenant");
    TenantClass tc;
    tc.tenant.name = first.String("name");
    auto [it, fresh] = names.emplace(tc.tenant.name, first.Location("name"));
    if (!fresh)
      first.Fail("name", fmt::format("'{}' is already used at {}", tc.tenant.name, it->second));
    std::string where = fmt::format("tenant '{}'", tc.tenant.name);
    YamlFields f(path, item, where);
    f.AllowOnly({"name", "count", "workload", "slo", "mps_thread_percentage"});
    tc.count = f.Has("count") ? f.Integer("count", 1, kMaxPlannedTenants) : 1;
    if ((tenants += tc.count) > kMaxPlannedTenants)
      f.Fail("count", fmt::format("the plan would hold more than {} tenants", kMaxPlannedTenants));
    tc.tenant.work = ReadWorkload(path, f.Map("workload"), catalog, where);
    if (f.Has("slo")) {
      tc.tenant.slo = ReadSlo(path, f.Map("slo"), where);
    } else {
      tc.tenant.slo = default_slo;
      if (!explicit_default) {
        plan.notes.push_back(fmt::format("{}: no SLO given; using the default max slowdown {}x",
                                         tc.tenant.name, kDefaultMaxSlowdown));
      }
    }
    if (f.Has("mps_thread_percentage")) {
      double pct = f.Number("mps_thread_percentage");
      if (pct <= 0 || pct > 100) f.Fail("mps_thread_percentage", "must lie in (0, 100]");
      tc.tenant.mps_thread_cap = pct / 100;
    }
    plan.input.classes.push_back(std::move(tc));
  }
  if (plan.input.classes.empty()) top.Fail("tenants", "lists no tenant");
  return plan;
}

}  // namespace gpumux
