#include "simgpu/sim_mps.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace gpumux::sim {
namespace {

uint64_t Left(const SliceContext& c) { return c.submitted_ns - c.served_ns; }

double WeightOf(const SliceContext& c) { return std::max(c.weight, kLeastWeight); }

// The total weight of the contexts with work.
double Sharing(const SliceSchedule& s) {
  double total = 0;
  for (const SliceContext& c : s.contexts)
    if (Left(c) > 0) total += WeightOf(c);
  return total;
}

// How long `c` takes to serve `ns` of its work while contexts of weight `total` share the GPU.
uint64_t WallNs(const SliceContext& c, uint64_t ns, double total) {
  return uint64_t(std::ceil(double(ns) * total / WeightOf(c)));
}

}  // namespace

void AdvanceShared(SliceSchedule* s, uint64_t now_ns, ChargeFn charge, void* arg) {
  uint64_t t = s->at_ns;
  while (t < now_ns) {
    double total = Sharing(*s);
    if (total == 0) {  // idle until now
      t = now_ns;
      break;
    }
    // Up to now, or to the first time a context's work runs out (the sharing changes then).
    uint64_t step = now_ns - t;
    for (const SliceContext& c : s->contexts)
      if (Left(c) > 0) step = std::min(step, WallNs(c, Left(c), total));
    for (int i = 0; i < kSliceContexts; ++i) {
      SliceContext& c = s->contexts[i];
      if (Left(c) == 0) continue;
      uint64_t served = step >= WallNs(c, Left(c), total)
                            ? Left(c)
                            : std::min(Left(c), uint64_t(double(step) * WeightOf(c) / total));
      if (served == 0) continue;  // a step too short to serve a whole nanosecond of it
      RecordRun(c, t, step, served);
      if (charge) charge(i, served, arg);
    }
    t += step;
  }
  s->at_ns = std::max(s->at_ns, t);
}

uint64_t SharedDoneForecast(const SliceSchedule& s, int context, uint64_t ticket) {
  const SliceContext& mine = s.contexts[context];
  if (ticket <= mine.served_ns) return s.at_ns;
  // Plays the sharing forward on a copy, each context's work running out in turn, until this
  // context has served up to the ticket.
  struct Share {
    double left_ns, weight;
  };
  std::vector<Share> others;
  double total = WeightOf(mine);
  for (const SliceContext& c : s.contexts) {
    if (&c == &mine || Left(c) == 0) continue;
    others.push_back({double(Left(c)), WeightOf(c)});
    total += WeightOf(c);
  }
  // In order of when each would run out at the present sharing (that order never changes).
  std::sort(others.begin(), others.end(), [](const Share& a, const Share& b) {
    return a.left_ns / a.weight < b.left_ns / b.weight;
  });
  double left_ns = double(ticket - mine.served_ns), wall_ns = 0, served_per_weight = 0;
  for (const Share& o : others) {
    // Every sharer serves weight * x by the time `o` runs out, x = its left / its weight.
    double x = o.left_ns / o.weight - served_per_weight;
    if (left_ns <= x * WeightOf(mine)) break;
    wall_ns += x * total;
    left_ns -= x * WeightOf(mine);
    served_per_weight += x;
    total -= o.weight;
  }
  return s.at_ns + uint64_t(std::ceil(wall_ns + left_ns / WeightOf(mine) * total));
}

}  // namespace gpumux::sim
