#include "fleet/policy.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/error.h"

namespace gpumux::fleet {

// One per file in policies/.
std::unique_ptr<Policy> MakeRandomPolicy(const TargetWorkloads& targets);
std::unique_ptr<Policy> MakeDotProductPolicy(const TargetWorkloads& targets);
std::unique_ptr<Policy> MakeGpuClusteringPolicy(const TargetWorkloads& targets);
std::unique_ptr<Policy> MakeGpuPackingPolicy(const TargetWorkloads& targets);
std::unique_ptr<Policy> MakeBestFitPolicy(const TargetWorkloads& targets);
std::unique_ptr<Policy> MakeFgdPolicy(const TargetWorkloads& targets);
std::unique_ptr<Policy> MakeGpumuxPolicy(const TargetWorkloads& targets);

namespace {

struct PolicyEntry {
  std::string_view name;
  std::unique_ptr<Policy> (*make)(const TargetWorkloads& targets);
};

// The registry, in the order the README lists the policies.
constexpr PolicyEntry kPolicies[] = {
    {"random", MakeRandomPolicy},
    {"dotprod", MakeDotProductPolicy},
    {"clustering", MakeGpuClusteringPolicy},
    {"packing", MakeGpuPackingPolicy},
    {"bestfit", MakeBestFitPolicy},
    {"fgd", MakeFgdPolicy},
    {"gpumux", MakeGpumuxPolicy},
};

}  // namespace

const std::vector<std::string>& PolicyNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const PolicyEntry& p : kPolicies) v.emplace_back(p.name);
    return v;
  }();
  return names;
}

std::unique_ptr<Policy> MakePolicy(std::string_view name, const TargetWorkloads& targets) {
  for (const PolicyEntry& p : kPolicies) {
    if (p.name == name) return p.make(targets);
  }
  throw BadInput(
      fmt::format("unknown policy '{}' (known: {})", name, fmt::join(PolicyNames(), ", ")));
}

int BestFitGpu(const NodeState& n, int milli) {
  int best = -1;
  for (int g = 0; g < n.gpus; ++g) {
    if (n.gpu_left[g] >= milli && (best < 0 || n.gpu_left[g] < n.gpu_left[best])) best = g;
  }
  return best;
}

}  // namespace gpumux::fleet
