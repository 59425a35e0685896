#include "share/colocation.h"

#include <algorithm>
#include <cmath>

namespace gpumux {

std::vector<double> QueuedSteps(std::span<const GpuPhase> phases) {
  // Written for speed: the planner's inner loop calls it. Starting from each tenant alone, every
  // round raises the in-phase fractions Q (the map is monotone: more time in phase for others
  // means a longer phase for each), so the rounds climb to the smallest fixed point.
  size_t n = phases.size();
  std::vector<double> q(n), step(n);
  for (size_t i = 0; i < n; ++i) {
    const GpuPhase& p = phases[i];
    double r = p.gpu * p.floor;
    step[i] = std::max(p.pace, r + p.off);
    q[i] = step[i] > 0 ? r / step[i] : 0;
  }
  if (n < 2) return step;
  for (int round = 0; round < 200; ++round) {
    double load = 0;  // Σ_j w_j · Q_j
    for (size_t j = 0; j < n; ++j) load += phases[j].weight * q[j];
    double moved = 0;
    for (size_t i = 0; i < n; ++i) {
      const GpuPhase& p = phases[i];
      double others = load - p.weight * q[i];
      double r = p.gpu * std::max(p.floor, 1 + others);
      step[i] = std::max(p.pace, r + p.off);
      double next = step[i] > 0 ? r / step[i] : 0;
      moved = std::max(moved, std::abs(next - q[i]));
      q[i] = next;
    }
    if (moved < 1e-12) break;
  }
  return step;
}

}  // namespace gpumux
