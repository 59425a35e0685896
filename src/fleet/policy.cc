#include "fleet/policy.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/input_error.h"

namespace gpumux::fleet {

const std::vector<std::string>& PolicyNames() {
  static const std::vector<std::string> names = {"random", "dotprod", "clustering", "packing",
                                                 "bestfit", "fgd", "gpumux"};
  return names;
}

std::unique_ptr<Policy> MakePolicy(std::string_view name, const TargetWorkloads& targets) {
  if (name == "random") return MakeRandomPolicy();
  if (name == "dotprod") return MakeDotProductPolicy();
  if (name == "clustering") return MakeGpuClusteringPolicy();
  if (name == "packing") return MakeGpuPackingPolicy();
  if (name == "bestfit") return MakeBestFitPolicy();
  if (name == "fgd") return MakeFgdPolicy(targets.fgd);
  if (name == "gpumux") return MakeGpumuxPolicy(targets);
  throw InputError(fmt::format("unknown policy '{}' (known: {})", name, fmt::join(PolicyNames(), ", ")));
}

int BestFitGpu(const NodeState& n, int milli) {
  int best = -1;
  for (int g = 0; g < n.gpus; ++g) {
    if (n.gpu_left[g] >= milli && (best < 0 || n.gpu_left[g] < n.gpu_left[best])) best = g;
  }
  return best;
}

}  // namespace gpumux::fleet
