#include "node/ledger/compute_share.h"

#include "base/error.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

namespace gpumux::node {

namespace {

// Water-fills `left` of the GPU among `open` (wanting tenants of one tier) into `share`, none past
// limit(i); returns what is left. Each round gives every open tenant its weighted part of what is
// left; tenants that reach their limit are fixed there and the rest shared again. At most one
// round per tenant.
template <typename Limit>
double WaterFill(const std::vector<ComputeDemand>& tenants, std::vector<size_t> open, double left,
                 const Limit& limit, std::vector<double>& share) {
  while (!open.empty() && left > 1e-12) {
    double weights = 0;
    for (size_t i : open) weights += tenants[i].weight;
    std::vector<size_t> still_open;
    double given = 0;
    for (size_t i : open) {
      double most = limit(i);
      double offer = left * tenants[i].weight / weights;
      if (share[i] + offer >= most) {
        given += std::max(0.0, most - share[i]);
        share[i] = std::max(share[i], most);
      } else {
        still_open.push_back(i);
      }
    }
    if (still_open.size() == open.size()) {  // nobody reached its limit: divided by weight
      for (size_t i : open) share[i] += left * tenants[i].weight / weights;
      return 0;
    }
    left -= given;
    open = std::move(still_open);
  }
  return left;
}

double Cap(const ComputeDemand& t) { return std::min(t.cap_permille, kNoCap) / 1000.0; }

}  // namespace

double DemandOf(double use, double share, bool held_lately) {
  // Room to grow: small, since room a tenant does not use idles the GPU while a neighbour is
  // held; it must stay above what "leaves part of its share" asks, or the demand would flap.
  constexpr double kGrowth = 1.25, kRoom = 0.02, kLeaves = 0.8;
  if (held_lately || use >= kLeaves * share) return 1.0;
  return std::min(1.0, use * kGrowth + kRoom);
}

std::vector<double> FairShares(const std::vector<ComputeDemand>& tenants) {
  std::vector<double> share(tenants.size(), 0.0);
  std::vector<size_t> first, second;  // wanting tenants: normal and high, then best-effort
  for (size_t i = 0; i < tenants.size(); ++i) {
    if (tenants[i].wants_gpu && tenants[i].weight > 0)
      (tenants[i].best_effort ? second : first).push_back(i);
  }
  auto demand = [&](size_t i) { return std::min(Cap(tenants[i]), tenants[i].demand); };
  auto cap = [&](size_t i) { return Cap(tenants[i]); };
  double left = WaterFill(tenants, first, 1.0, demand, share);
  left = WaterFill(tenants, second, left, demand, share);
  // What nobody's demand takes: to every wanting tenant, by tier and weight, up to its cap.
  left = WaterFill(tenants, first, left, cap, share);
  WaterFill(tenants, second, left, cap, share);
  return share;
}

double ShareAtWorkNow(std::vector<ComputeDemand> tenants, size_t me, double share) {
  tenants[me].wants_gpu = tenants[me].at_work = true;
  int at_work = 0;
  for (const ComputeDemand& t : tenants) at_work += t.wants_gpu && t.at_work;
  bool changed = false;
  for (size_t i = 0; i < tenants.size(); ++i) {
    ComputeDemand& t = tenants[i];
    if (i == me || !t.wants_gpu) continue;
    if (!t.at_work) {
      t.wants_gpu = false;
      changed = true;
    } else if (t.demand < 1.0 && t.use < kClearlyLight / at_work) {
      t.demand = t.use;
      changed = true;
    }
  }
  return changed ? FairShares(tenants)[me] : share;
}

uint32_t ParseComputeCap(const std::string& text) {
  std::string number = !text.empty() && text.back() == '%' ? text.substr(0, text.size() - 1) : text;
  char* end = nullptr;
  double percent = std::strtod(number.c_str(), &end);
  if (number.empty() || *end != 0 || !(percent > 0 && percent <= 100)) {
    throw BadInput("compute '" + text +
                   "': give a share of GPU time above 0% and at most 100%, e.g. 40%");
  }
  return uint32_t(std::lround(percent * 10));
}

int64_t AccrueCredit(int64_t credit_ns, uint64_t used_ns, double share, uint64_t elapsed_ns,
                     uint64_t burst_ns) {
  int64_t credit = credit_ns + int64_t(std::llround(share * double(elapsed_ns)));
  return std::min(credit, int64_t(used_ns + burst_ns));
}

}  // namespace gpumux::node
