#include "fleet/fill_waste.h"

#include <algorithm>
#include <map>

namespace gpumux::fleet {

FillWaste FillWaste::FromTarget(const TargetWorkload& target) {
  std::map<int, double> share;  // gpu_milli -> probability, over the sharing shapes
  for (const TargetClass& c : target.classes())
    if (c.shape.shares_gpu()) share[c.shape.gpu_milli] += c.probability;
  std::vector<int> sizes;
  for (auto [milli, p] : share)
    if (p >= kMinShareOfPods && milli >= kMinMilli) sizes.push_back(milli);
  return FillWaste(std::move(sizes));
}

FillWaste::FillWaste(std::vector<int> sizes) {
  for (int s : sizes)
    if (s >= 1 && s < kMilli) sizes_.push_back(s);
  std::sort(sizes_.begin(), sizes_.end());
  // reachable[v]: some sum of the sizes is exactly v (unbounded knapsack, by increasing v).
  std::vector<bool> reachable(kMilli + 1, false);
  reachable[0] = true;
  for (int v = 1; v <= kMilli; ++v) {
    for (int s : sizes_) {
      if (s > v) break;
      if (reachable[size_t(v - s)]) {
        reachable[size_t(v)] = true;
        break;
      }
    }
  }
  waste_.assign(kMilli + 1, 0);
  int filled = 0;  // the largest reachable sum so far
  for (int v = 0; v <= kMilli; ++v) {
    if (reachable[size_t(v)]) filled = v;
    waste_[size_t(v)] = int16_t(v - filled);
  }
  waste_[kMilli] = 0;
}

}  // namespace gpumux::fleet
