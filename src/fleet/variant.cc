#include "fleet/variant.h"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <iterator>
#include <map>

#include "base/error.h"
#include "fleet/rng.h"

namespace gpumux::fleet {
namespace {

enum Class { kCpu = 0, kSharing = 1, kWhole = 2, kMulti = 3 };

Class ClassOf(const PodSpec& p) {
  if (p.cpu_only()) return kCpu;
  if (p.num_gpu > 1) return kMulti;
  return p.gpu_milli < kMilli ? kSharing : kWhole;
}

void CheckShare(const std::optional<double>& share, const char* name) {
  if (share && !(*share >= 0 && *share < 1)) {
    throw BadInput(fmt::format("{}: a share from 0 to below 1, not {}", name, *share));
  }
}

// `n` pods of `pool`: without replacement while it has enough, then with.
std::vector<PodSpec> Draw(std::vector<PodSpec> pool, size_t n, Rng& rng) {
  std::vector<PodSpec> out;
  rng.Shuffle(pool);
  for (size_t i = 0; i < n && i < pool.size(); ++i) out.push_back(pool[i]);
  while (out.size() < n) out.push_back(pool[rng.Below(pool.size())]);
  return out;
}

// A model constraint as gpuspec20's are: one model for 86% of pods, two for 9%, three to five for
// the rest (the published file's proportions), each drawn with the weight of its GPU count.
std::vector<std::string> DrawModels(std::map<std::string, double> weights, Rng& rng) {
  uint64_t roll = rng.Below(100);
  size_t want = roll < 86 ? 1 : roll < 95 ? 2 : 3 + rng.Below(3);
  std::vector<std::string> models;
  while (models.size() < want && !weights.empty()) {
    double total = 0;
    for (const auto& [model, w] : weights) total += w;
    double at = double(rng.Below(1u << 30)) / double(1u << 30) * total;
    auto it = weights.begin();
    for (; std::next(it) != weights.end() && at >= it->second; ++it) at -= it->second;
    models.push_back(it->first);
    weights.erase(it);
  }
  return models;
}

}  // namespace

std::vector<PodSpec> MakeVariant(const std::vector<PodSpec>& source,
                                 const std::vector<NodeSpec>& nodes, const VariantKnobs& knobs) {
  CheckShare(knobs.sharing, "sharing");
  CheckShare(knobs.multi_gpu, "multi-GPU");
  CheckShare(knobs.cpu_only, "CPU-only");
  if (knobs.gpu_spec && !(*knobs.gpu_spec >= 0 && *knobs.gpu_spec <= 1)) {
    throw BadInput(fmt::format("gpu-spec: a share from 0 to 1, not {}", *knobs.gpu_spec));
  }
  if (knobs.sharing.value_or(0) + knobs.multi_gpu.value_or(0) >= 1) {
    throw BadInput("sharing and multi-GPU shares of the GPU request must sum to below 1");
  }
  std::array<std::vector<PodSpec>, 4> pool;
  for (const PodSpec& p : source) pool[ClassOf(p)].push_back(p);
  std::array<double, 4> milli{}, mean{};  // request per class, and per pod of the class
  for (int c = kSharing; c <= kMulti; ++c) {
    for (const PodSpec& p : pool[c]) milli[c] += double(p.total_gpu_milli());
    mean[c] = pool[c].empty() ? 0 : milli[c] / double(pool[c].size());
  }
  // Target shares of the GPU request: the knobs' classes as asked, the others the rest in the
  // source's proportion.
  std::array<std::optional<double>, 4> asked = {std::nullopt, knobs.sharing, std::nullopt,
                                                knobs.multi_gpu};
  double asked_sum = 0, free_milli = 0;
  for (int c = kSharing; c <= kMulti; ++c) {
    if (asked[c]) {
      asked_sum += *asked[c];
      if (*asked[c] > 0 && pool[c].empty()) {
        throw BadInput(fmt::format("the source has no {} pod to draw",
                                   c == kSharing ? "GPU-sharing" : "multi-GPU"));
      }
    } else {
      free_milli += milli[c];
    }
  }
  std::array<double, 4> share{};
  for (int c = kSharing; c <= kMulti; ++c) {
    share[c] = asked[c] ? *asked[c] : free_milli > 0 ? (1 - asked_sum) * milli[c] / free_milli : 0;
  }
  // Pods per GPU class: share of the request / request per pod, scaled.
  std::array<size_t, 4> count{};
  size_t gpu_pods = pool[kSharing].size() + pool[kWhole].size() + pool[kMulti].size();
  bool add = knobs.growth == VariantKnobs::Growth::kAdd && free_milli > 0;
  double scale = 0;  // pods = scale * share / mean
  if (add) {
    scale = free_milli / (1 - asked_sum);  // the classes no knob sets keep their request
  } else {
    double per_pod = 0;
    for (int c = kSharing; c <= kMulti; ++c) per_pod += mean[c] > 0 ? share[c] / mean[c] : 0;
    scale = per_pod > 0 ? double(gpu_pods) / per_pod : 0;
  }
  for (int c = kSharing; c <= kMulti; ++c) {
    count[c] = mean[c] > 0 ? size_t(std::llround(scale * share[c] / mean[c])) : 0;
    if (add && !asked[c]) count[c] = pool[c].size();
  }
  size_t gpu_total = count[kSharing] + count[kWhole] + count[kMulti];
  count[kCpu] = pool[kCpu].size();
  if (knobs.cpu_only) {
    if (*knobs.cpu_only > 0 && pool[kCpu].empty())
      throw BadInput("the source has no CPU-only pod to draw");
    count[kCpu] = size_t(std::llround(*knobs.cpu_only / (1 - *knobs.cpu_only) * double(gpu_total)));
  }

  Rng rng(knobs.seed);
  std::vector<PodSpec> pods;
  for (int c = kCpu; c <= kMulti; ++c) {
    for (PodSpec& p : Draw(pool[c], count[c], rng)) pods.push_back(std::move(p));
  }
  if (knobs.gpu_spec) {
    // Models weighted by how many GPUs of them the nodes hold, so that a constraint is as easy to
    // meet as the fleet makes it.
    std::map<std::string, double> gpus_of;
    for (const NodeSpec& n : nodes) {
      if (!n.model.empty() && n.gpus > 0) gpus_of[n.model] += n.gpus;
    }
    if (gpus_of.empty() && *knobs.gpu_spec > 0)
      throw BadInput("gpu-spec: the node list names no GPU model");
    std::vector<size_t> gpu_indexes;
    for (size_t i = 0; i < pods.size(); ++i) {
      pods[i].gpu_spec.clear();
      if (!pods[i].cpu_only()) gpu_indexes.push_back(i);
    }
    rng.Shuffle(gpu_indexes);
    size_t constrained = size_t(std::llround(*knobs.gpu_spec * double(gpu_indexes.size())));
    for (size_t k = 0; k < constrained; ++k)
      pods[gpu_indexes[k]].gpu_spec = DrawModels(gpus_of, rng);
  }
  rng.Shuffle(pods);
  for (size_t i = 0; i < pods.size(); ++i) pods[i].name = fmt::format("variant-{:05}", i);
  return pods;
}

void WritePods(std::ostream& out, const std::vector<PodSpec>& pods) {
  out << "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n";
  for (const PodSpec& p : pods) {
    out << fmt::format("{},{},{},{},{},{}\n", p.name, p.cpu_milli, p.memory_mib, p.num_gpu,
                       p.gpu_milli, fmt::join(p.gpu_spec, "|"));
  }
}

PodClassShares ClassShares(const std::vector<PodSpec>& pods) {
  PodClassShares s;
  std::array<double, 4> n{}, milli{};
  double spec = 0;
  for (const PodSpec& p : pods) {
    Class c = ClassOf(p);
    n[c] += 1;
    milli[c] += double(p.total_gpu_milli());
    spec += !p.cpu_only() && !p.gpu_spec.empty();
  }
  double all = double(pods.size()), request = milli[kSharing] + milli[kWhole] + milli[kMulti];
  double gpu = n[kSharing] + n[kWhole] + n[kMulti];
  if (all > 0) s = {n[kCpu] / all, n[kSharing] / all, n[kWhole] / all, n[kMulti] / all};
  if (request > 0) {
    s.sharing_request = milli[kSharing] / request;
    s.whole_request = milli[kWhole] / request;
    s.multi_gpu_request = milli[kMulti] / request;
  }
  s.gpu_spec = gpu > 0 ? spec / gpu : 0;
  return s;
}

}  // namespace gpumux::fleet
