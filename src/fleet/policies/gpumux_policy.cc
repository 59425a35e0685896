// gpumux's policy: FGD's decision on a measure of the free GPU a node loses, with its ties broken
// by a look further ahead.
//
// The measure adds four things to FGD's fragmentation (fragmentation.h):
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
// - the price of the GPU model the pod consumes (model_prices.h): g milli taken from a model that
//   gpu_spec pods are confined to cost what the confined demand loses, its demand over what is
//   left of it, so flexible pods leave scarce models to the pods that can use nothing else. It
//   depends on the whole fleet, so it is added in Final, to the cached loss; 0 without gpu_spec.
// - for a pod that shares a GPU, what it adds to the GPU's room that the trace's common sharing
//   sizes could never fill (fill_waste.h), weighed kFillWasteWeight times: FGD's fragment sees
//   whether the next pod fits, not whether the GPU can be filled to the end, so it would as soon
//   leave 130 milli after a 550 and a 320 as 0 after a 550, a 230 and a 220.
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
// from GPU pods, all pods or per GPU model; model prices or none; the fill waste's sizes and
// weight) and the default openb trace, and checked on the other half; results in docs/models.md.
#include <array>
#include <cmath>
#include <optional>

#include "fleet/fill_waste.h"
#include "fleet/model_prices.h"
#include "fleet/policy.h"

namespace gpumux::fleet {
namespace {

// A milli of GPU room that the common sizes can never fill counts as this many milli of FGD's
// fragment. On the default trace 6-12 do equally well (3.84-3.85% unallocated); beyond ~16 the
// loss reaches where FGD's quantised sigmoid no longer tells placements apart, and it does worse.
// Chosen on the choose half (docs/models.md).
constexpr double kFillWasteWeight = 8;

// The capacity tie-break's unit: this share of the mean GPU request (milli) of the target's GPU
// shapes, by probability (a whole GPU's if it has none).
constexpr double kResolutionOfMeanRequest = 0.25;

double CapacityResolution(const TargetWorkload& target) {
  double request = target.mean_gpu_request_milli();
  return kResolutionOfMeanRequest * (request > 0 ? request : kMilli);
}

class GpumuxPolicy : public Policy {
 public:
  explicit GpumuxPolicy(const TargetWorkloads& targets)
      : scarce_(targets.scarce),
        wide_(targets.wide),
        resolution_(CapacityResolution(targets.fgd)),
        fill_waste_(FillWaste::FromTarget(targets.fgd)) {}

  // The cached score with the price of the GPU model the pod consumes added to its loss
  // (model_prices.h), which depends on the whole fleet. Hot path: every feasible node, every pod.
  double Final(const Cluster& cluster, int node, const Shape& s,
               const NodeScore& cached) const override {
    if (!prices_) prices_.emplace(cluster, scarce_);
    double cost = prices_->Of(cluster, cluster.node(node).model) * double(s.total_gpu_milli());
    return cost == 0 ? cached.score : Combine(cached.loss + cost, cached.tie);
  }

  // Without a price on any model for this pod (a trace with no gpu_spec pods, or none confined to
  // a model it may take), Final is the cached score.
  bool FinalIsCached(const Cluster& cluster, const Shape& s) const override {
    if (!prices_) prices_.emplace(cluster, scarce_);
    for (int m = 0; m < int(cluster.models().size()); ++m)
      if ((s.models >> m & 1) && prices_->Of(cluster, m) * double(s.total_gpu_milli()) != 0)
        return false;
    return true;
  }

  NodeScore Score(const Cluster& cluster, int node, const Shape& s) const override {
    // Hot path: the simulator caches the result per (node state, shape).
    const NodeState& n = cluster.node(node);
    const double lost = NodeFragmentation(n, scarce_) + NodeStrandedGpu(n, scarce_);
    const double stranded_after = NodeStrandedGpuAfter(n, scarce_, s);  // the same on every GPU
    const double capacity = NodeCapacityFragmentation(n, wide_);
    auto score = [&](int gpu, double fragmentation_after, double capacity_after) {
      double loss = fragmentation_after + stranded_after - lost;
      if (gpu >= 0) {  // a sharing pod: what it adds to the GPU's room no common size fills
        int left = n.gpu_left[gpu];
        loss += kFillWasteWeight * (fill_waste_.Of(left - s.gpu_milli) - fill_waste_.Of(left));
      }
      double kept = std::floor((capacity - capacity_after) / resolution_);
      return NodeScore{Combine(loss, kept), gpu, loss, kept};
    };
    if (!s.shares_gpu())
      return score(-1, NodeFragmentationAfter(n, scarce_, s, -1),
                   NodeCapacityFragmentationAfter(n, wide_, s, -1));
    PerGpu fragmentation_after, capacity_after;
    NodeFragmentationAfterEachGpu(n, scarce_, s, &fragmentation_after);
    NodeCapacityFragmentationAfterEachGpu(n, wide_, s, &capacity_after);
    NodeScore best{0, -1};
    for (int g = 0; g < n.gpus; ++g) {
      if (n.gpu_left[g] < s.gpu_milli) continue;
      NodeScore sc = score(g, fragmentation_after[size_t(g)], capacity_after[size_t(g)]);
      if (best.gpu < 0 || sc.score > best.score) best = sc;
    }
    return best;
  }

 private:
  // FGD's integer score of the loss's growth, then the tie-break: lexicographic (|kept| < 1e9 for
  // any resolution above 0.1 milli).
  static double Combine(double loss, double kept) { return Sigmoid100(loss) * 1e9 + kept; }

  // floor(100 / (1 + e^(loss / 1000))), FGD's quantised sigmoid, without exp: it is at least k
  // exactly when loss <= 1000 ln(100 / k - 1). Hot path (Final prices every feasible node).
  static int Sigmoid100(double loss) {
    static const std::array<double, 100> at_least = [] {
      std::array<double, 100> t{};
      for (int k = 1; k < 100; ++k) t[size_t(k)] = 1000.0 * std::log(100.0 / k - 1.0);
      return t;
    }();
    int lo = 0, hi = 99;  // the answer, in [lo, hi]; at_least falls as k grows
    while (lo < hi) {
      int mid = (lo + hi + 1) / 2;
      if (loss <= at_least[size_t(mid)])
        lo = mid;
      else
        hi = mid - 1;
    }
    return lo;
  }

  const TargetWorkload& scarce_;
  const TargetWorkload& wide_;
  const double resolution_;
  const FillWaste fill_waste_;
  mutable std::optional<ModelPrices> prices_;  // made on the first Final, when the fleet is known
};

}  // namespace

std::unique_ptr<Policy> MakeGpumuxPolicy(const TargetWorkloads& targets) {
  return std::make_unique<GpumuxPolicy>(targets);
}

}  // namespace gpumux::fleet
