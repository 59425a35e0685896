#include "share/interference.h"

#include <algorithm>
#include <cmath>

namespace gpumux {
namespace {

// One tenant's term in Σ use / max(floor, time·S + overhead) ≤ 1: `use` seconds of the resource per
// step, a step time `time` that the stretch multiplies, the step's time off the GPU, and a `floor`
// the step cannot go below anyway.
struct Term {
  double use, time, floor, overhead = 0;
  double breakpoint() const { return floor / time; }  // S above which the stretch binds
  double Step(double s) const { return std::max(floor, time * s + overhead); }
};

// SolveOne where some term has an overhead: f(S) = Σ use / step(S) falls as S grows, so bisect.
double SolveWithOverheads(const std::vector<Term>& terms) {
  auto load = [&](double s) {
    double sum = 0;
    for (const Term& t : terms) sum += t.use / t.Step(s);
    return sum;
  };
  if (load(1) <= 1 + 1e-12) return 1;
  double lo = 1, hi = 2;
  while (load(hi) > 1) {
    lo = hi, hi *= 2;
    if (hi > 1e12) return INFINITY;
  }
  for (int i = 0; i < 100 && hi - lo > 1e-12 * hi; ++i) {
    double mid = (lo + hi) / 2;
    (load(mid) > 1 ? lo : hi) = mid;
  }
  return hi;
}

// Smallest S ≥ 1 with Σ use_i / max(floor_i, time_i·S) ≤ 1. Exact: the sum is C + D/S between
// breakpoints, so walk them in order. O(n log n). Hot path of the planner: no allocation beyond
// `terms`, which the caller owns.
double SolveOne(std::vector<Term>& terms) {
  for (const Term& t : terms)
    if (t.overhead > 0) return SolveWithOverheads(terms);
  double c = 0, d = 0;  // C: terms still at their floor; D: terms already stretched (use/time)
  auto unbound = terms.begin();
  for (auto it = terms.begin(); it != terms.end(); ++it) {
    if (it->breakpoint() > 1) {
      std::iter_swap(unbound++, it);
    } else {
      d += it->use / it->time;
    }
  }
  for (auto it = terms.begin(); it != unbound; ++it) c += it->use / it->floor;
  if (c + d <= 1 + 1e-12) return 1;
  std::sort(terms.begin(), unbound,
            [](const Term& a, const Term& b) { return a.breakpoint() < b.breakpoint(); });
  for (auto it = terms.begin();; ++it) {
    // Within this segment f(S) = c + d/S; it reaches 1 at d/(1-c) if c < 1.
    double next = it == unbound ? INFINITY : it->breakpoint();
    if (c < 1 && d > 0) {
      double s = d / (1 - c);
      if (s <= next) return std::max(1.0, s);
    }
    if (it == unbound) return INFINITY;  // c ≥ 1 with nothing left to stretch: cannot happen
    c -= it->use / it->floor;
    d += it->use / it->time;
  }
}

}  // namespace

double StretchedPhase(const TenantLoad& load, const Stretch& s, double cap) {
  return std::max(load.whole.memory * s.bandwidth, load.whole.compute * s.compute / cap);
}

double StretchedStepRate(const TenantLoad& load, const Stretch& s, double cap) {
  return 1.0 / std::max(load.whole.pace, StretchedPhase(load, s, cap) + load.whole.overhead);
}

Stretch SolveMpsStretch(std::span<const TenantLoad* const> loads, std::span<const double> caps,
                        const Capacity& capacity) {
  Stretch s;
  std::vector<Term> terms;
  terms.reserve(loads.size());
  // Alternate the two one-dimensional solves; each raises its stretch monotonically, so the pair
  // converges to the smallest feasible point (a few rounds in practice).
  for (int round = 0; round < 64; ++round) {
    Stretch before = s;
    terms.clear();
    for (size_t i = 0; i < loads.size(); ++i) {
      const TenantLoad& l = *loads[i];
      double cap = caps.empty() ? 1.0 : caps[i];
      if (l.bandwidth_use <= 0) continue;
      // Σ use·rate ≤ capacity, as Σ (use / capacity)·rate ≤ 1.
      terms.push_back({l.bandwidth_use / capacity.bandwidth, l.whole.memory,
                       std::max(l.whole.pace, l.whole.compute * s.compute / cap + l.whole.overhead),
                       l.whole.overhead});
    }
    s.bandwidth = SolveOne(terms);
    terms.clear();
    for (size_t i = 0; i < loads.size(); ++i) {
      const TenantLoad& l = *loads[i];
      double cap = caps.empty() ? 1.0 : caps[i];
      if (l.compute_use <= 0) continue;
      terms.push_back({l.compute_use / capacity.compute, l.whole.compute / cap,
                       std::max(l.whole.pace, l.whole.memory * s.bandwidth + l.whole.overhead),
                       l.whole.overhead});
    }
    s.compute = SolveOne(terms);
    if (std::fabs(s.bandwidth - before.bandwidth) <= 1e-12 * s.bandwidth &&
        std::fabs(s.compute - before.compute) <= 1e-12 * s.compute) {
      break;
    }
  }
  return s;
}

}  // namespace gpumux
