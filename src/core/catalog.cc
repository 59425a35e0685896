#include "core/catalog.h"

#include <fmt/format.h>

#include <fmt/ranges.h>
#include <filesystem>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <set>

#include "base/error.h"
#include "core/yaml_fields.h"

#ifndef GPUMUX_CATALOG_DIR
#define GPUMUX_CATALOG_DIR "catalog"
#endif

namespace gpumux {
namespace {

// Fields that a catalog entry's `uncertain:` list may name.
const std::set<std::string> kUncertainFields = {
    "memory",     "memory_bandwidth", "tflops",      "tflops.bf16",    "tflops.fp16",
    "tflops.fp8", "tflops.tf32",      "sms",         "tdp_watts",      "price_per_hour",
    "mig",        "mig.profiles",     "boost_clock", "mig.placements", "mig.sms"};

std::string Where(const std::string& path, const YAML::Node& node) {
  return fmt::format("{}:{}", path, node.Mark().line + 1);
}

// "{0,2,4,6}:2" -> starts {0,2,4,6}, size 2.
void ParsePlacements(const YamlFields& f, std::string_view key, std::vector<int>* starts,
                     int* size) {
  std::string text = f.String(key);
  auto open = text.find('{');
  auto close = text.find('}');
  auto colon = text.rfind(':');
  if (open != 0 || close == std::string::npos || colon != close + 1) {
    f.Fail(key, fmt::format("'{}' is not in the driver's form {{start,start,...}}:size", text));
  }
  std::string list = text.substr(1, close - 1);
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    std::string item =
        list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    char* end = nullptr;
    long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 0) {
      f.Fail(key, fmt::format("'{}' has a start that is not a whole number: '{}'", text, item));
    }
    starts->push_back(int(v));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  char* end = nullptr;
  std::string size_text = text.substr(colon + 1);
  long v = std::strtol(size_text.c_str(), &end, 10);
  if (size_text.empty() || *end != '\0' || v <= 0) {
    f.Fail(key, fmt::format("'{}' has a size that is not a positive whole number", text));
  }
  *size = int(v);
}

MigProfile ReadMigProfile(const std::string& path, const YAML::Node& node, const GpuKind& gpu,
                          const MigGeometry& geo) {
  std::string where = fmt::format("GPU '{}' MIG profile", gpu.name);
  YamlFields f(path, node, where);
  f.AllowOnly({"name", "id", "compute_slices", "memory_slices", "memory", "sms", "max_instances",
               "placements"});
  MigProfile p;
  p.name = f.String("name");
  YamlFields named(path, node, fmt::format("GPU '{}' MIG profile '{}'", gpu.name, p.name));
  p.id = named.Integer("id", 0, 1000);
  p.compute_slices = named.Integer("compute_slices", 1, geo.compute_slices);
  p.memory_slices = named.Integer("memory_slices", 1, geo.slots);
  p.memory_bytes = named.Bytes("memory");
  if (p.memory_bytes <= 0) named.Fail("memory", "must be positive");
  if (p.memory_bytes > gpu.memory_bytes) {
    named.Fail("memory", fmt::format("{:.2f} GiB is more than the GPU's {:.2f} GiB",
                                     p.memory_bytes / (1 << 30), gpu.memory_bytes / (1 << 30)));
  }
  p.sms = named.Integer("sms", 1, geo.sms);
  p.max_instances = named.Integer("max_instances", 1, geo.slots);
  int size = 0;
  ParsePlacements(named, "placements", &p.placement_starts, &size);
  if (size != p.memory_slices) {
    named.Fail("placements", fmt::format("placement size {} differs from memory_slices {}", size,
                                         p.memory_slices));
  }
  std::set<int> seen;
  for (int start : p.placement_starts) {
    if (start + size > geo.slots) {
      named.Fail("placements",
                 fmt::format("placement {}:{} ends past the {}-slot grid", start, size, geo.slots));
    }
    if (!seen.insert(start).second) {
      named.Fail("placements", fmt::format("start {} is listed twice", start));
    }
  }
  p.holds_media_engines = p.name.find("+me") != std::string::npos;
  return p;
}

MigGeometry ReadMig(const std::string& path, const YAML::Node& node, const GpuKind& gpu) {
  YamlFields f(path, node, fmt::format("GPU '{}' mig", gpu.name));
  f.AllowOnly({"slots", "compute_slices", "sms", "profiles"});
  MigGeometry geo;
  geo.slots = f.Integer("slots", 1, 32);
  geo.compute_slices = f.Integer("compute_slices", 1, 32);
  geo.sms = f.Integer("sms", 1, gpu.sms);
  std::set<std::string> names;
  std::set<int> ids;
  for (const auto& item : f.List("profiles")) {
    MigProfile p = ReadMigProfile(path, item, gpu, geo);
    if (!names.insert(p.name).second || !ids.insert(p.id).second) {
      throw BadInput(fmt::format("{}: GPU '{}': MIG profile '{}' (id {}) is listed twice",
                                 Where(path, item), gpu.name, p.name, p.id));
    }
    geo.profiles.push_back(std::move(p));
  }
  if (geo.profiles.empty()) f.Fail("profiles", "a MIG-capable GPU needs at least one profile");
  return geo;
}

GpuKind ReadGpu(const std::string& path, const YAML::Node& node) {
  YamlFields first(path, node, "GPU");
  GpuKind g;
  g.name = first.String("name");
  YamlFields f(path, node, fmt::format("GPU '{}'", g.name));
  f.AllowOnly({"name", "aliases", "pci_device_id", "memory", "memory_bandwidth", "tflops", "sms",
               "boost_clock", "tdp_watts", "price_per_hour", "uncertain", "mig"});
  g.source = Where(path, node);
  g.aliases = f.StringList("aliases");
  if (f.Has("pci_device_id")) f.String("pci_device_id");
  g.memory_bytes = f.Bytes("memory");
  if (g.memory_bytes <= 0) f.Fail("memory", "must be positive");
  g.bandwidth = f.Bandwidth("memory_bandwidth");
  if (g.bandwidth <= 0) f.Fail("memory_bandwidth", "must be positive");
  YamlFields t(path, f.Map("tflops"), fmt::format("GPU '{}' tflops", g.name));
  t.AllowOnly({"bf16", "fp16", "fp8", "tf32"});
  g.tflops_bf16 = t.Number("bf16");
  g.tflops_fp16 = t.Number("fp16");
  if (!t.node()["fp8"].IsDefined()) t.Fail("fp8", "missing (write null for a part without FP8)");
  g.tflops_fp8 = t.OptionalNumber("fp8").value_or(0);
  g.tflops_tf32 = t.Number("tf32");
  if (g.tflops_bf16 <= 0) t.Fail("bf16", "must be positive");
  g.sms = f.Integer("sms", 1, 100000);
  if (f.Has("boost_clock")) {
    g.boost_clock_hz = f.Frequency("boost_clock");
    if (!(g.boost_clock_hz >= 100e6 && g.boost_clock_hz <= 10e9))
      f.Fail("boost_clock", "must lie between 100 MHz and 10 GHz");
  }
  g.tdp_watts = f.Number("tdp_watts");
  g.price_per_hour = f.OptionalNumber("price_per_hour");
  g.uncertain = f.StringList("uncertain");
  for (const std::string& u : g.uncertain) {
    if (!kUncertainFields.count(u)) {
      f.Fail("uncertain", fmt::format("'{}' is not a field of a GPU entry (known: {})", u,
                                      fmt::join(kUncertainFields, ", ")));
    }
  }
  if (f.Has("mig")) g.mig = ReadMig(path, f.Map("mig"), g);
  return g;
}

ModelShape ReadModel(const std::string& path, const YAML::Node& node) {
  YamlFields first(path, node, "model");
  ModelShape m;
  m.name = first.String("name");
  YamlFields f(path, node, fmt::format("model '{}'", m.name));
  f.AllowOnly({"name", "aliases", "params", "layers", "hidden", "heads", "kv_heads", "head_dim",
               "intermediate", "vocab", "tied_embeddings", "qkv_bias", "sliding_window"});
  m.source = Where(path, node);
  m.aliases = f.StringList("aliases");
  m.layers = f.Integer("layers", 1, 1000);
  m.hidden = f.Integer("hidden", 1, 1 << 20);
  m.heads = f.Integer("heads", 1, 1 << 12);
  m.kv_heads = f.Integer("kv_heads", 1, m.heads);
  if (m.heads % m.kv_heads != 0) {
    f.Fail("kv_heads", fmt::format("{} does not divide heads {}", m.kv_heads, m.heads));
  }
  m.head_dim = f.Integer("head_dim", 1, 1 << 12);
  m.intermediate = f.Integer("intermediate", 1, 1 << 22);
  m.vocab = f.Integer("vocab", 1, 1 << 24);
  m.tied_embeddings = f.Bool("tied_embeddings", false);
  if (!f.Has("tied_embeddings")) f.Fail("tied_embeddings", "missing (true or false)");
  m.qkv_bias = f.Bool("qkv_bias", false);
  if (f.Has("sliding_window")) m.sliding_window = f.Integer("sliding_window", 1, 1 << 24);
  double published = f.Number("params");
  double computed = m.Params();
  if (std::fabs(computed - published) > 0.02 * published) {
    f.Fail("params", fmt::format("{:.3g} disagrees with the {:.3g} parameters its shape holds "
                                 "(more than 2% apart): check the shape fields",
                                 published, computed));
  }
  return m;
}

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// An engine's `uncertain:` list, each entry one of `fields`.
std::vector<std::string> ReadUncertain(YamlFields& f,
                                       std::initializer_list<std::string_view> fields) {
  std::vector<std::string> uncertain = f.StringList("uncertain");
  for (const std::string& u : uncertain)
    if (std::find(fields.begin(), fields.end(), u) == fields.end())
      f.Fail("uncertain", fmt::format("'{}' is not one of the engine's fields", u));
  return uncertain;
}

// An engine's `error: {median, worst}`, if stated.
void ReadErrorBand(const std::string& path, YamlFields& f, EngineProfile* e) {
  if (!f.Has("error")) return;
  YamlFields err(path, f.Map("error"), fmt::format("engine '{}' error", e->name));
  err.AllowOnly({"median", "worst"});
  e->error_median = err.Number("median");
  e->error_worst = err.Number("worst");
  if (!(e->error_median >= 0 && e->error_median <= e->error_worst && e->error_worst < 10))
    err.Fail("median", "expected 0 <= median <= worst < 10 (fractions)");
}

EngineProfile ReadEngine(const std::string& path, const YAML::Node& node) {
  YamlFields first(path, node, "engine");
  EngineProfile e;
  e.name = first.String("name");
  YamlFields f(path, node, fmt::format("engine '{}'", e.name));
  e.source = Where(path, node);
  e.aliases = f.StringList("aliases");
  if (f.Has("description")) e.description = f.String("description");
  if (f.Has("runs")) {  // a loop of its own over another class's kernels: AddEngine fills it in
    f.AllowOnly(
        {"name", "aliases", "description", "runs", "host_overhead_ms", "error", "uncertain"});
    e.runs = f.String("runs");
    if (f.Has("host_overhead_ms")) {
      double host = f.Number("host_overhead_ms");
      if (!(host >= 0 && host <= 100)) f.Fail("host_overhead_ms", "must lie in [0, 100]");
      e.host_overhead_seconds = host / 1e3;
    }
    ReadErrorBand(path, f, &e);
    e.uncertain = ReadUncertain(f, {"host_overhead_ms"});
    return e;
  }
  f.AllowOnly({"name", "aliases", "description", "efficiency", "step_overhead_ms",
               "layer_overhead_us", "allreduce_us", "dequant_bytes_per_sm_cycle", "attention",
               "attention_bytes_per_sm_cycle", "error", "uncertain"});
  YamlFields eff(path, f.Map("efficiency"), fmt::format("engine '{}' efficiency", e.name));
  eff.AllowOnly({"16bit", "fp8", "int8", "int4"});
  auto fraction = [&](std::string_view key) {
    double v = eff.Number(key);
    if (!(v > 0 && v <= 1)) eff.Fail(key, "must lie in (0, 1]");
    return v;
  };
  e.efficiency_16bit = fraction("16bit");
  e.efficiency_fp8 = fraction("fp8");
  e.efficiency_int8 = fraction("int8");
  e.efficiency_int4 = fraction("int4");
  double overhead = f.Number("step_overhead_ms"), allreduce = f.Number("allreduce_us");
  if (!(overhead >= 0 && overhead <= 100)) f.Fail("step_overhead_ms", "must lie in [0, 100]");
  if (!(allreduce >= 0 && allreduce <= 10000)) f.Fail("allreduce_us", "must lie in [0, 10000]");
  e.step_overhead_seconds = overhead / 1e3;
  if (f.Has("layer_overhead_us")) {
    double per_layer = f.Number("layer_overhead_us");
    if (!(per_layer >= 0 && per_layer <= 10000))
      f.Fail("layer_overhead_us", "must lie in [0, 10000]");
    e.layer_overhead_seconds = per_layer / 1e6;
  }
  e.allreduce_seconds = allreduce / 1e6;
  if (f.Has("dequant_bytes_per_sm_cycle")) {
    YamlFields dq(path, f.Map("dequant_bytes_per_sm_cycle"),
                  fmt::format("engine '{}' dequant_bytes_per_sm_cycle", e.name));
    dq.AllowOnly({"int8", "int4"});
    auto rate = [&](std::string_view key) {
      if (!dq.Has(key)) return 0.0;  // no limit
      double v = dq.Number(key);
      if (!(v > 0 && v <= 1000)) dq.Fail(key, "must lie in (0, 1000] (bytes per SM per cycle)");
      return v;
    };
    e.dequant_bytes_per_sm_cycle_int8 = rate("int8");
    e.dequant_bytes_per_sm_cycle_int4 = rate("int4");
  }
  if (f.Has("attention")) {
    std::string kind = f.String("attention");
    if (kind != "per-head" && kind != "split")
      f.Fail("attention", fmt::format("'{}' is not per-head or split", kind));
    e.attention_per_head = kind == "per-head";
  }
  if (f.Has("attention_bytes_per_sm_cycle")) {
    if (!e.attention_per_head)
      f.Fail("attention_bytes_per_sm_cycle", "only an engine with `attention: per-head` has one");
    double v = f.Number("attention_bytes_per_sm_cycle");
    if (!(v > 0 && v <= 1000))
      f.Fail("attention_bytes_per_sm_cycle", "must lie in (0, 1000] (bytes per SM per cycle)");
    e.attention_bytes_per_sm_cycle = v;
  }
  ReadErrorBand(path, f, &e);
  e.uncertain =
      ReadUncertain(f, {"efficiency.16bit", "efficiency.fp8", "efficiency.int8", "efficiency.int4",
                        "step_overhead_ms", "layer_overhead_us", "allreduce_us",
                        "dequant_bytes_per_sm_cycle", "attention_bytes_per_sm_cycle"});
  return e;
}

template <typename T>
const T& Find(std::string_view name, const std::vector<T>& items,
              const std::map<std::string, size_t>& index, std::string_view what) {
  auto it = index.find(NormaliseName(name));
  if (it != index.end()) return items[it->second];
  std::vector<std::string> names;  // every name it knows, each item's aliases after it
  for (const T& item : items) {
    names.push_back(item.name);
    names.insert(names.end(), item.aliases.begin(), item.aliases.end());
  }
  std::vector<std::string> nearest = NearestNames(name, names);
  throw BadInput(fmt::format("unknown {} '{}'; nearest known: {} (all: {})", what, name,
                             fmt::join(nearest, ", "), fmt::join(names, ", ")));
}

}  // namespace

std::string NormaliseName(std::string_view name) {
  std::string out;
  for (char c : name) {
    if (c == '-' || c == '_' || c == ' ' || c == '.') continue;
    out += char(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

std::vector<std::string> NearestNames(std::string_view name,
                                      const std::vector<std::string>& candidates, size_t limit) {
  std::string key = NormaliseName(name);
  std::vector<std::pair<size_t, std::string>> scored;
  for (const std::string& c : candidates) {
    std::string norm = NormaliseName(c);
    size_t d = EditDistance(key, norm);
    // A name that contains the query (or is contained in it) is a strong hint.
    if (!key.empty() &&
        (norm.find(key) != std::string::npos || key.find(norm) != std::string::npos)) {
      d = std::min(d, size_t(1));
    }
    scored.emplace_back(d, c);
  }
  std::stable_sort(scored.begin(), scored.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  for (size_t i = 0; i < scored.size() && i < limit; ++i) out.push_back(scored[i].second);
  return out;
}

std::string Catalog::BundledDir() {
  const char* env = std::getenv("GPUMUX_CATALOG_DIR");
  if (env && *env) return env;
  if (std::filesystem::exists(GPUMUX_CATALOG_DIR)) return GPUMUX_CATALOG_DIR;  // the source tree
  // An installed tree: <prefix>/bin/gpumux and <prefix>/share/gpumux/catalog.
  return (std::filesystem::read_symlink("/proc/self/exe").parent_path().parent_path() / "share" /
          "gpumux" / "catalog")
      .string();
}

Catalog Catalog::LoadBundled() {
  Catalog c;
  std::string dir = BundledDir();
  c.AddFile(dir + "/gpus.yaml");
  c.AddFile(dir + "/models.yaml");
  c.AddFile(dir + "/engines.yaml");
  return c;
}

void Catalog::AddFile(const std::string& path) {
  YAML::Node root = YamlFields::LoadFile(path);
  if (!root.IsMap()) {
    throw BadInput(
        fmt::format("{}:1: a catalog file holds a mapping with 'gpus:' and/or "
                    "'models:' lists",
                    path));
  }
  YamlFields top(path, root, "catalog");
  top.AllowOnly({"gpus", "models", "engines"});
  if (!top.Has("gpus") && !top.Has("models") && !top.Has("engines")) {
    throw BadInput(
        fmt::format("{}:1: catalog file has none of 'gpus:', 'models:' and 'engines:'", path));
  }
  if (top.Has("gpus")) {
    for (const auto& item : top.List("gpus")) AddGpu(ReadGpu(path, item));
  }
  if (top.Has("models")) {
    for (const auto& item : top.List("models")) AddModel(ReadModel(path, item));
  }
  if (top.Has("engines")) {
    for (const auto& item : top.List("engines")) AddEngine(ReadEngine(path, item));
  }
}

namespace {

// Adds `item` under its name and aliases; refuses a name another item of its kind has taken.
template <typename T>
void AddNamed(T item, std::vector<T>* items, std::map<std::string, size_t>* index,
              std::string_view what) {
  std::vector<std::string> keys = {item.name};
  keys.insert(keys.end(), item.aliases.begin(), item.aliases.end());
  for (const std::string& k : keys) {
    auto it = index->find(NormaliseName(k));
    if (it != index->end()) {
      const T& taken = (*items)[it->second];
      throw BadInput(fmt::format("{}: {} '{}': name '{}' is already taken by {} '{}' ({})",
                                 item.source, what, item.name, k, what, taken.name, taken.source));
    }
  }
  for (const std::string& k : keys) (*index)[NormaliseName(k)] = items->size();
  items->push_back(std::move(item));
}

}  // namespace

void Catalog::AddGpu(GpuKind gpu) { AddNamed(std::move(gpu), &gpus_, &gpu_index_, "GPU"); }

void Catalog::AddModel(ModelShape model) {
  AddNamed(std::move(model), &models_, &model_index_, "model");
}

void Catalog::AddEngine(EngineProfile engine) {
  if (!engine.runs.empty()) {  // the constants of the class it runs, read before it
    auto base = engine_index_.find(NormaliseName(engine.runs));
    if (base == engine_index_.end() || !engines_[base->second].runs.empty())
      throw BadInput(fmt::format("{}: engine '{}': runs '{}', which is not a class read before it",
                                 engine.source, engine.name, engine.runs));
    engine = engine.Over(engines_[base->second]);
  }
  AddNamed(std::move(engine), &engines_, &engine_index_, "engine");
}

void Catalog::Calibrate(const GpuCalibration& c) {
  const GpuKind& kind = FindGpu(c.gpu);
  gpus_[size_t(&kind - gpus_.data())].calibration = c;
}

const GpuKind& Catalog::FindGpu(std::string_view name) const {
  return Find(name, gpus_, gpu_index_, "GPU kind");
}

const ModelShape& Catalog::FindModel(std::string_view name) const {
  return Find(name, models_, model_index_, "model");
}

const EngineProfile& Catalog::FindEngine(std::string_view name) const {
  return Find(name, engines_, engine_index_, "engine");
}

}  // namespace gpumux
