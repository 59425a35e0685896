// GpuClustering: keeps pods of one kind (sharing, or N whole GPUs) together. Tiers: a node running
// only this kind (75-100), several kinds including this one (50-75), an idle node (25-50), other
// kinds only (0-25); within a tier, less free GPU scores higher. CPU-only pods score 0 everywhere.
// Best-fit GPU (artifact: gpu_clustering_score.go; integer arithmetic as there).
#include "fleet/policy.h"

namespace gpumux::fleet {
namespace {

class GpuClusteringPolicy : public Policy {
 public:
  NodeScore Score(const Cluster& cluster, int node, const Shape& s) const override {
    if (s.cpu_only()) return {0, -1};
    const NodeState& n = cluster.node(node);
    int kind = s.shares_gpu() ? -1 : s.num_gpu;
    bool has_kind = false;
    for (auto [k, count] : n.affinity) has_kind |= (k == kind && count > 0);
    int64_t within = 25 * (8000 - int64_t(n.gpu_left_total)) / 8000;
    int64_t tier = has_kind ? (n.affinity.size() == 1 ? 75 : 50) : (n.affinity.empty() ? 25 : 0);
    return {double(within + tier), s.shares_gpu() ? BestFitGpu(n, s.gpu_milli) : -1};
  }
};

}  // namespace

std::unique_ptr<Policy> MakeGpuClusteringPolicy(const TargetWorkloads&) {
  return std::make_unique<GpuClusteringPolicy>();
}

}  // namespace gpumux::fleet
