// DotProd (Tetris): prefers the node whose free (CPU, GPU) vector has the smallest dot product with
// the pod's request, both normalised by the largest node spec (128 cores, 8 GPUs); integer scores;
// best-fit GPU (artifact: dot_product_score.go with -dimext merge -norm max -gpusel best).
#include "fleet/policy.h"

namespace gpumux::fleet {
namespace {

constexpr double kMaxSpecCpu = 128000;
constexpr double kMaxSpecGpu = 8000;

class DotProductPolicy : public Policy {
 public:
  NodeScore Score(const Cluster& cluster, int node, const Shape& s) const override {
    const NodeState& n = cluster.node(node);
    double dot = (double(n.cpu_left) / kMaxSpecCpu) * (double(s.cpu_milli) / kMaxSpecCpu) +
                 (n.gpu_left_total / kMaxSpecGpu) * (s.total_gpu_milli() / kMaxSpecGpu);
    return {double(int64_t(100 * (1 - dot / 2))), s.shares_gpu() ? BestFitGpu(n, s.gpu_milli) : -1};
  }
};

}  // namespace

std::unique_ptr<Policy> MakeDotProductPolicy(const TargetWorkloads&) {
  return std::make_unique<DotProductPolicy>();
}

}  // namespace gpumux::fleet
