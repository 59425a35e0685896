// gpumux's policy: FGD's decision on a measure of the free GPU a node loses, with its ties broken
// by a look further ahead.
//
// The measure adds two things to FGD's fragmentation (fragmentation.h):
// - each target shape is weighed by its probability divided by the share of the fleet's GPUs it
//   may use: free GPU milli lost to a shape that can use only one GPU model counts as many times
//   more as that model is rare, so pods that may go anywhere leave the constrained shapes' GPUs to
//   them (without gpu_spec pods this is FGD's weighting exactly);
// - the GPU milli the node's free CPU could not feed if pods kept coming in the trace's mix
//   (NodeStrandedGpu). FGD's fragment only asks whether the next pod of each shape fits, so a
//   CPU-only or CPU-heavy pod costs nothing until a node's last cores go, and then all its free
//   GPUs are lost at once. Counting stranded GPU milli as lost, in the same unit, sends such pods
//   to the nodes with CPU to spare for their GPUs. It has no parameter: the mix's CPU per GPU milli
//   is read off the trace.
//
// FGD's integer score (fgd_policy.cc) treats placements whose loss differs by less than ~40 milli
// as equal and hands the choice to the node ranking. Among those, gpumux prefers the placement
// that keeps most of the node's free GPU usable by the trace's shapes (the wider, 99% set, weighed
// the same way) if the node were filled with such pods until GPU room or CPU ran out
// (NodeCapacityFragmentation), compared in units of a quarter of the trace's mean GPU request per
// GPU pod: differences smaller than that still go to the node ranking, which keeps the cluster
// filling from one end and whole nodes free for multi-GPU pods, while differences of a fraction of
// a typical pod (the crumbs that small sharing pods leave) are seen.
//
// Chosen on the "choose" half of bench/fleet_sweep.sh (20 generated variants, even variant seeds;
// weights by popularity or scarcity, resolutions 20-2000 milli fixed or 0.25-0.5 of the mean
// request, the stranding measure in the tie-break, in the main term or both, with the mix's ratio
// from GPU pods, all pods or per GPU model) and the default openb trace, and checked on the other
// half; results in the README.
#include <cmath>

#include "fleet/policy.h"

namespace gpumux::fleet {
namespace {

// The capacity tie-break's unit: this share of the mean GPU request (milli) of the target's GPU
// shapes, by probability.
constexpr double kResolutionOfMeanRequest = 0.25;

double CapacityResolution(const TargetWorkload& target) {
  double request = 0, gpu_pods = 0;
  for (const TargetClass& c : target.classes()) {
    if (c.shape.cpu_only()) continue;
    request += c.probability * double(c.shape.total_gpu_milli());
    gpu_pods += c.probability;
  }
  return kResolutionOfMeanRequest * (gpu_pods > 0 ? request / gpu_pods : kMilli);
}

class GpumuxPolicy : public Policy {
 public:
  explicit GpumuxPolicy(const TargetWorkloads& targets)
      : scarce_(targets.scarce),
        wide_(targets.wide),
        resolution_(CapacityResolution(targets.fgd)) {}

  NodeScore Score(const Cluster& cluster, int node, const Shape& s) const override {
    // Hot path: the simulator caches the result per (node state, shape).
    const NodeState& n = cluster.node(node);
    const double lost = NodeFragmentation(n, scarce_) + NodeStrandedGpu(n, scarce_);
    const double stranded_after = NodeStrandedGpuAfter(n, scarce_, s);  // the same on every GPU
    const double capacity = NodeCapacityFragmentation(n, wide_);
    auto score = [&](int gpu) {
      double growth = NodeFragmentationAfter(n, scarce_, s, gpu) + stranded_after - lost;
      double fgd = std::floor(100.0 / (1.0 + std::exp(growth / 1000.0)));
      double kept =
          std::floor((capacity - NodeCapacityFragmentationAfter(n, wide_, s, gpu)) / resolution_);
      return fgd * 1e9 + kept;  // lexicographic: |kept| < 1e9 for any resolution above 0.1 milli
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
  const TargetWorkload& scarce_;
  const TargetWorkload& wide_;
  const double resolution_;
};

}  // namespace

std::unique_ptr<Policy> MakeGpumuxPolicy(const TargetWorkloads& targets) {
  return std::make_unique<GpumuxPolicy>(targets);
}

}  // namespace gpumux::fleet
