// gpumux's policy: FGD's decision, with its ties broken by a look further ahead.
//
// FGD's integer score (fgd_policy.cc) treats placements whose fragmentation growth differs by less
// than ~40 milli as equal and hands the choice to the node ranking. Among those, gpumux prefers the
// placement that keeps most of the node's free GPU usable by the trace's shapes (the wider, 99%
// set) if the node were filled with such pods until GPU room or CPU ran out
// (NodeCapacityFragmentation), compared at a 400-milli resolution so that near-equal ones still go
// to the node ranking, which keeps the cluster filling from one end and whole nodes free for
// multi-GPU pods. The second measure sees what FGD's one-pod look-ahead cannot: CPU-only and
// CPU-heavy pods that would strand a node's GPUs, GPUs that repeated fills would leave in crumbs,
// and the nodes that rarer shapes alone can use.
//
// Chosen on seeds 42-51 over the five openb variants (resolutions 100-400, coverages 95-100%) and
// checked on seeds 52-61; measured results in the README (bench/fleet_policies.sh).
#include <cmath>

#include "fleet/policy.h"

namespace gpumux::fleet {
namespace {

constexpr double kCapacityResolution = 400;  // milli-GPU

class GpumuxPolicy : public Policy {
 public:
  explicit GpumuxPolicy(const TargetWorkloads& targets) : fgd_(targets.fgd), wide_(targets.wide) {}

  NodeScore Score(const Cluster& cluster, int node, const Shape& s) const override {
    // Hot path: the simulator caches the result per (node state, shape).
    const NodeState& n = cluster.node(node);
    const double frag = NodeFragmentation(n, fgd_);
    const double capacity = NodeCapacityFragmentation(n, wide_);
    auto score = [&](int gpu) {
      double fgd = std::floor(
          100.0 / (1.0 + std::exp(-(frag - NodeFragmentationAfter(n, fgd_, s, gpu)) / 1000.0)));
      double kept = std::floor((capacity - NodeCapacityFragmentationAfter(n, wide_, s, gpu)) /
                               kCapacityResolution);
      return fgd * 1e9 + kept;  // lexicographic: |kept| < 1e9 always (at most 16 GPUs of 1000)
    };
    if (!s.shares_gpu()) return {score(-1), -1};
    NodeScore best{0, -1};
    for (int g = 0; g < n.gpus; ++g) {
      if (n.gpu_left[g] < s.gpu_milli) continue;
      double sc = score(g);
      if (best.gpu < 0 || sc > best.score) best = {sc, g};
    }
    return best;
  }

 private:
  const TargetWorkload& fgd_;
  const TargetWorkload& wide_;
};

}  // namespace

std::unique_ptr<Policy> MakeGpumuxPolicy(const TargetWorkloads& targets) {
  return std::make_unique<GpumuxPolicy>(targets);
}

}  // namespace gpumux::fleet
