// The p-quantile (0 <= p <= 1) of a benchmark's samples, the nearest rank at or above it; 0 for
// no samples. Shared by the benchmarks that report p50 and p99.
#pragma once

#include <algorithm>
#include <vector>

namespace gpumux::bench {

inline double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(p * double(v.size())))];
}

}  // namespace gpumux::bench
