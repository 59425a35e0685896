// Strategy "time-slicing": contexts take turns owning the whole GPU, one quantum at a time. Memory
// is not isolated (the sum must fit). A context keeps the GPU through the short host gaps between
// its launches: each step it holds it GpuKind::timeslice_hold times as long as its kernels run (at
// most its whole step), and holds that meet by chance queue (colocation.h). The switches leave
// q/(q+c) of the time, or what a calibration measured for this many tenants.
#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "core/units.h"
#include "share/colocation.h"
#include "share/strategy.h"

namespace gpumux {
namespace {

// The share of its time `tenants` contexts get together: what switching leaves, or what a
// calibration measured on this GPU kind.
double UsableTime(const GpuKind& gpu, size_t tenants) {
  return tenants < 2 ? 1.0 : gpu.TimeSliceUsable(int(tenants), kTimeSliceUsableModelled);
}

// Each tenant's step rate when they take turns.
std::vector<double> StepRates(const GpuKind& gpu, std::span<const TenantLoad* const> loads) {
  double usable = UsableTime(gpu, loads.size());
  std::vector<GpuPhase> holds;
  holds.reserve(loads.size());
  for (const TenantLoad* l : loads) {
    double kernels = std::max(l->whole.memory, l->whole.compute);
    double busy = kernels + l->whole.overhead;
    double hold = std::min(gpu.timeslice_hold * kernels, busy);
    holds.push_back({hold / usable, 1.0, busy - hold, l->whole.pace, 1.0});
  }
  std::vector<double> rates = QueuedSteps(holds);
  for (double& r : rates) r = 1.0 / r;
  return rates;
}

bool FitsTimeSlice(const GpuKind& gpu, std::span<const TenantLoad* const> loads) {
  if (TotalMemory(loads) > gpu.memory_bytes) return false;
  std::vector<double> rates = StepRates(gpu, loads);
  for (size_t i = 0; i < loads.size(); ++i) {
    if (!loads[i]->MeetsSlo(rates[i])) return false;
  }
  return true;
}

StrategyResult EvaluateTimeSlice(const GpuKind& gpu, std::span<const TenantLoad* const> loads) {
  StrategyResult r;
  r.kind = ShareMode::kTimeSlice;
  double usable = UsableTime(gpu, loads.size());
  std::vector<double> rates = StepRates(gpu, loads);
  double memory = TotalMemory(loads);
  for (size_t i = 0; i < loads.size(); ++i) {
    const TenantLoad& l = *loads[i];
    double kernels = std::max(l.whole.memory, l.whole.compute);
    r.tenants.push_back(MakeOutcome(
        l, rates[i], fmt::format("time share {}", FormatPercent(kernels * rates[i]))));
  }
  bool memory_ok = memory <= gpu.memory_bytes;
  std::string cause =
      memory_ok ? fmt::format("timeslice: {} tenants share {} of GPU time after switches, each "
                              "holding it {:.1f}x as long as its kernels run",
                              loads.size(), FormatPercent(usable), gpu.timeslice_hold)
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
