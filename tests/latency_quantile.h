// Quantiles of what a compute_client measured (tests/node/compute_client.cc): its latencies in the
// order measured (`latencies_ms`), split into the first `learning` of them (while a high-priority
// tenant's rhythm is learnt) and the rest. Tests judge the two apart, by p50 and p90: the mean and
// p99 of a few hundred steps are a few host stalls on a loaded 2-core machine, solo or not.
#pragma once

#include <algorithm>
#include <cstddef>
#include <nlohmann/json.hpp>
#include <vector>

namespace gpumux::testing {

// Quantile `q` (0..1) of `client_output`'s first `learning` latencies (`first_part`) or of those
// after them; 0 when there are none.
inline double LatencyQuantileMs(const nlohmann::json& client_output, size_t learning,
                                bool first_part, double q) {
  std::vector<double> all = client_output.at("latencies_ms").get<std::vector<double>>();
  learning = std::min(learning, all.size());
  std::vector<double> part(first_part ? all.begin() : all.begin() + learning,
                           first_part ? all.begin() + learning : all.end());
  if (part.empty()) return 0;
  std::sort(part.begin(), part.end());
  return part[std::min(part.size() - 1, size_t(q * double(part.size())))];
}

}  // namespace gpumux::testing
