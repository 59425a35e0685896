// Strategy "time-slicing": contexts take turns owning the whole GPU, one quantum at a time. Memory
// is not isolated (the sum must fit). A tenant busy a fraction u of the time when alone needs u of
// the GPU's time; the time left after context switches, q/(q+c) of it, is shared max-min fairly.
#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "core/units.h"
#include "share/strategy.h"

namespace gpumux {
namespace {

// Fraction of wall time tenant `l` keeps the GPU busy when alone.
double BusyFraction(const TenantLoad& l) {
  return std::max(l.whole.memory, l.whole.compute) / l.whole.step();
}

// Max-min fair shares of `capacity` among demands; returns each tenant's share.
std::vector<double> FairShares(std::span<const TenantLoad* const> loads, double capacity) {
  std::vector<size_t> order(loads.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return BusyFraction(*loads[a]) < BusyFraction(*loads[b]); });
  std::vector<double> share(loads.size());
  double left = capacity;
  for (size_t k = 0; k < order.size(); ++k) {
    double fair = left / double(order.size() - k);
    double s = std::min(BusyFraction(*loads[order[k]]), fair);
    share[order[k]] = s;
    left -= s;
  }
  return share;
}

// The share of its time `tenants` contexts get together: what switching leaves, or what a
// calibration measured on this GPU kind.
double UsableTime(const GpuKind& gpu, size_t tenants) {
  return tenants < 2 ? 1.0
                     : gpu.TimeSliceUsable(int(tenants),
                                           kTimeSliceQuantumSeconds /
                                               (kTimeSliceQuantumSeconds + kContextSwitchSeconds));
}

bool FitsTimeSlice(const GpuKind& gpu, std::span<const TenantLoad* const> loads) {
  if (TotalMemory(loads) > gpu.memory_bytes) return false;
  std::vector<double> share = FairShares(loads, UsableTime(gpu, loads.size()));
  for (size_t i = 0; i < loads.size(); ++i) {
    double rate = loads[i]->solo_step_rate() * share[i] / BusyFraction(*loads[i]);
    if (!loads[i]->MeetsSlo(rate)) return false;
  }
  return true;
}

StrategyResult EvaluateTimeSlice(const GpuKind& gpu, std::span<const TenantLoad* const> loads) {
  StrategyResult r;
  r.kind = ShareMode::kTimeSlice;
  double usable = UsableTime(gpu, loads.size());
  std::vector<double> share = FairShares(loads, usable);
  double memory = TotalMemory(loads);
  for (size_t i = 0; i < loads.size(); ++i) {
    const TenantLoad& l = *loads[i];
    double rate = l.solo_step_rate() * share[i] / BusyFraction(l);
    r.tenants.push_back(
        MakeOutcome(l, rate, fmt::format("time share {}", FormatPercent(share[i]))));
  }
  bool memory_ok = memory <= gpu.memory_bytes;
  std::string cause =
      memory_ok ? fmt::format("timeslice: {} tenants share {} of GPU time after switches",
                              loads.size(), FormatPercent(usable))
                : fmt::format("timeslice: memory {} > {} (not isolated, must fit together)",
                              FormatBytes(memory), FormatBytes(gpu.memory_bytes));
  Conclude(&r, memory_ok, cause);
  return r;
}

}  // namespace

const Strategy& TimeSliceStrategy() {
  static const StrategyOf<ShareMode::kTimeSlice, AppliesToAnyGpu, FitsTimeSlice, EvaluateTimeSlice>
      strategy;
  return strategy;
}

}  // namespace gpumux
