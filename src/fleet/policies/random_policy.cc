// Random: a uniformly random feasible node, and a uniformly random GPU with room on it
// (artifact: random_score.go, allocateGpuIdBasedOnRandomFit).
#include "fleet/policy.h"

namespace gpumux::fleet {
namespace {

class RandomPolicy : public Policy {
 public:
  NodeScore Score(const Cluster&, int, const Shape&) const override { return {}; }

  bool PicksAtRandom() const override { return true; }
  int PickNth(int feasible, Rng& rng) const override { return int(rng.Below(uint64_t(feasible))); }

  int PickGpu(const Cluster& cluster, int node, const Shape& shape, int, Rng& rng) const override {
    const NodeState& n = cluster.node(node);
    int chosen = -1, seen = 0;
    for (int g = 0; g < n.gpus; ++g) {
      if (n.gpu_left[g] >= shape.gpu_milli && rng.Below(++seen) == 0) chosen = g;  // reservoir
    }
    return chosen;
  }
};

}  // namespace

std::unique_ptr<Policy> MakeRandomPolicy(const TargetWorkloads&) {
  return std::make_unique<RandomPolicy>();
}

}  // namespace gpumux::fleet
