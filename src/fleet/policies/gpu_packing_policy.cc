// GpuPacking: from best to worst, (1) use GPUs already shared, preferring the least free; (2) use
// fully free GPUs on a node that is partly used; (3) open a fully free node. CPU-only pods score 0
// everywhere. Best-fit GPU (artifact: gpu_packing_score.go; integer arithmetic as there).
#include <algorithm>
#include <numeric>

#include "fleet/policy.h"

namespace gpumux::fleet {
namespace {

class GpuPackingPolicy : public Policy {
 public:
  NodeScore Score(const Cluster& cluster, int node, const Shape& s) const override {
    if (s.cpu_only()) return {0, -1};
    const NodeState& n = cluster.node(node);
    int gpu = s.shares_gpu() ? BestFitGpu(n, s.gpu_milli) : -1;
    if (n.free_gpus == n.gpus) {  // (3) an idle node
      return {double(std::max<int64_t>(33 - n.free_gpus, n.free_gpus)), gpu};
    }
    // The GPUs it would use: least free first.
    std::array<int, kMaxGpusPerNode> order;
    std::iota(order.begin(), order.begin() + n.gpus, 0);
    std::stable_sort(order.begin(), order.begin() + n.gpus,
                     [&](int a, int b) { return n.gpu_left[a] < n.gpu_left[b]; });
    int need = s.num_gpu, fully_free_used = 0;
    int64_t free_ratio = 0;
    for (int i = 0; i < n.gpus && need > 0; ++i) {
      int left = n.gpu_left[order[i]];
      if (left >= s.gpu_milli) {
        --need;
        fully_free_used += left == kMilli;
        free_ratio += int64_t(left) * 100 / kMilli;
      }
    }
    if (fully_free_used > 0)
      return {double(std::max<int64_t>(50 - fully_free_used, 33)), gpu};  // (2)
    return {double(std::max<int64_t>(100 - free_ratio / 10, 50)), gpu};   // (1)
  }
};

}  // namespace

std::unique_ptr<Policy> MakeGpuPackingPolicy(const TargetWorkloads&) {
  return std::make_unique<GpuPackingPolicy>();
}

}  // namespace gpumux::fleet
