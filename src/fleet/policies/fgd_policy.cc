// FGD (Weng et al., ATC'23): place the pod where the node's fragmentation against the target
// workload grows least. Score = int(sigmoid((F_before - F_after) / 1000) * 100), so placements
// whose growth differs by less than ~40 milli tie (and ties go to the seed's node ranking, which is
// what makes FGD work in the artifact, reference A.1 C1). For a sharing pod every GPU with room is
// tried and the best kept, lowest index on ties (artifact: fgd_score.go).
#include <cmath>

#include "fleet/policy.h"

namespace gpumux::fleet {
namespace {

class FgdPolicy : public Policy {
 public:
  explicit FgdPolicy(const TargetWorkload& target) : target_(target) {}

  NodeScore Score(const Cluster& cluster, int node, const Shape& s) const override {
    // Hot path: the simulator caches the result per (node state, shape).
    const NodeState& n = cluster.node(node);
    double before = NodeFragmentation(n, target_);
    if (!s.shares_gpu()) return {Quantise(before - NodeFragmentationAfter(n, target_, s, -1)), -1};
    PerGpu after;
    NodeFragmentationAfterEachGpu(n, target_, s, &after);
    NodeScore best{-1, -1};
    for (int g = 0; g < n.gpus; ++g) {
      if (n.gpu_left[g] < s.gpu_milli) continue;
      double score = Quantise(before - after[size_t(g)]);
      if (best.gpu < 0 || score > best.score) best = {score, g};
    }
    return best;
  }

 private:
  static double Quantise(double decrease) {
    return double(int64_t(100.0 / (1.0 + std::exp(-decrease / 1000.0))));
  }

  const TargetWorkload& target_;
};

}  // namespace

std::unique_ptr<Policy> MakeFgdPolicy(const TargetWorkloads& targets) {
  return std::make_unique<FgdPolicy>(targets.fgd);
}

}  // namespace gpumux::fleet
