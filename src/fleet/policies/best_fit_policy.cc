// BestFit: the node with the least CPU and GPU left after placing the pod, each normalised by the
// largest node spec (128 cores, 8 GPUs) and weighted 0.5/0.5, truncated to an integer score 0-100;
// best-fit GPU (artifact: best_fit_score.go, reference A.1 C8).
#include "fleet/policy.h"

namespace gpumux::fleet {
namespace {

class BestFitPolicy : public Policy {
 public:
  NodeScore Score(const Cluster& cluster, int node, const Shape& s) const override {
    const NodeState& n = cluster.node(node);
    double left = 0.5 * double(n.cpu_left - s.cpu_milli) / 128000 +
                  0.5 * double(n.gpu_left_total - s.total_gpu_milli()) / 8000;
    return {double(int64_t((1 - left) * 100)), s.shares_gpu() ? BestFitGpu(n, s.gpu_milli) : -1};
  }
};

}  // namespace

std::unique_ptr<Policy> MakeBestFitPolicy(const TargetWorkloads&) {
  return std::make_unique<BestFitPolicy>();
}

}  // namespace gpumux::fleet
