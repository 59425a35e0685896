#include "node/ledger/compute_share.h"

#include "base/error.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

namespace gpumux::node {

namespace {

// Water-fills `left` of the GPU among `open` (wanting tenants of one tier) into `share`; returns
// what is left. Each round gives every open tenant its weighted part of what is left; tenants that
// reach their cap are fixed there and the rest shared again. At most one round per tenant.
double WaterFill(const std::vector<ComputeDemand>& tenants, std::vector<size_t> open, double left,
                 std::vector<double>& share) {
  while (!open.empty() && left > 1e-12) {
    double weights = 0;
    for (size_t i : open) weights += tenants[i].weight;
    std::vector<size_t> still_open;
    double given = 0;
    for (size_t i : open) {
      double cap = std::min(tenants[i].cap_permille, kNoCap) / 1000.0;
      double offer = left * tenants[i].weight / weights;
      if (share[i] + offer >= cap) {
        given += cap - share[i];
        share[i] = cap;
      } else {
        still_open.push_back(i);
      }
    }
    if (still_open.size() == open.size()) {  // nobody capped: the rest is divided by weight
      for (size_t i : open) share[i] += left * tenants[i].weight / weights;
      return 0;
    }
    left -= given;
    open = std::move(still_open);
  }
  return left;
}

}  // namespace

std::vector<double> FairShares(const std::vector<ComputeDemand>& tenants) {
  std::vector<double> share(tenants.size(), 0.0);
  std::vector<size_t> first, second;  // wanting tenants: normal and high, then best-effort
  for (size_t i = 0; i < tenants.size(); ++i) {
    if (tenants[i].wants_gpu && tenants[i].weight > 0)
      (tenants[i].best_effort ? second : first).push_back(i);
  }
  WaterFill(tenants, second, WaterFill(tenants, first, 1.0, share), share);
  return share;
}

Priority ParsePriority(const std::string& text) {
  if (text == "high") return Priority::kHigh;
  if (text == "normal") return Priority::kNormal;
  if (text == "low" || text == "best-effort") return Priority::kLow;
  throw BadInput("priority '" + text + "': expected high, normal or low (best-effort)");
}

const char* PriorityName(Priority p) {
  return p == Priority::kHigh ? "high" : p == Priority::kLow ? "low" : "normal";
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
