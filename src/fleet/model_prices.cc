#include "fleet/model_prices.h"

#include <algorithm>
#include <map>

namespace gpumux::fleet {

ModelPrices::ModelPrices(const Cluster& cluster, const TargetWorkload& target) {
  const size_t models = cluster.models().size();
  const ModelMask every = models >= 64 ? kAnyModel : (ModelMask(1) << models) - 1;
  double total = 0;
  std::map<ModelMask, double> shares;
  for (const TargetClass& c : target.classes()) {
    if (c.shape.cpu_only()) continue;
    double request = c.probability * double(c.shape.total_gpu_milli());
    total += request;
    ModelMask m = c.shape.models & every;
    if (m != every && m != 0) shares[m] += request;  // 0: no node has its models; never placed
  }
  for (const auto& [mask, request] : shares) confined_.push_back({mask, request / total});
  price_.assign(models, 0);
}

double ModelPrices::Of(const Cluster& cluster, int model) {
  // Hot path (every feasible node, every pod): one range check.
  if (confined_.empty() || model < 0) return 0;
  const int64_t used = cluster.used_gpu_milli();
  if (used < from_ || used >= to_) {
    const int64_t step =
        std::max<int64_t>(1, int64_t(kStep * double(cluster.gpu_capacity_milli())));
    from_ = used / step * step;
    to_ = from_ + step;
    Recompute(cluster);
  }
  return price_[size_t(model)];
}

void ModelPrices::Recompute(const Cluster& cluster) {
  std::vector<double> free(price_.size(), 0);
  double fleet_free = 0;
  for (int i = 0; i < cluster.size(); ++i) {
    const NodeState& n = cluster.node(i);
    if (n.model < 0) continue;
    free[size_t(n.model)] += n.gpu_left_total;
    fleet_free += n.gpu_left_total;
  }
  std::fill(price_.begin(), price_.end(), 0.0);
  for (const auto& [mask, share] : confined_) {
    double supply = 0, demand = 0;
    for (size_t m = 0; m < free.size(); ++m) supply += (mask >> m & 1) ? free[m] : 0;
    for (const auto& [inner, inner_share] : confined_) {
      if ((inner & ~mask) == 0) demand += inner_share * fleet_free;
    }
    if (supply <= 0) continue;  // nothing of M left to protect
    for (size_t m = 0; m < free.size(); ++m) {
      if (mask >> m & 1) price_[m] = std::max(price_[m], demand / supply);
    }
  }
}

}  // namespace gpumux::fleet
