// Strategy "MPS": all tenants' kernels run at once on all SMs; each client gets a memory limit
// (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT) and optionally a thread cap
// (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE). What the tenants can move together follows interference.h
// (the fluid model: a stretch once their demand exceeds a resource); below that, kernels of
// tenants whose GPU phases meet by chance still slow each other (colocation.h).
#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "core/units.h"
#include "share/colocation.h"
#include "share/interference.h"
#include "share/strategy.h"

namespace gpumux {
namespace {

std::vector<double> Caps(std::span<const TenantLoad* const> loads) {
  std::vector<double> caps;
  caps.reserve(loads.size());
  for (const TenantLoad* l : loads) caps.push_back(l->tenant->mps_thread_cap);
  return caps;
}

// Each tenant's step rate: its GPU phase stretched at least by the fluid model's `s`, and by the
// co-runners it meets. A phase occupies the share of the GPU's attainable bandwidth (or, for math,
// of its math within the tenant's thread cap) that it uses when alone.
std::vector<double> StepRates(std::span<const TenantLoad* const> loads,
                              std::span<const double> caps, const Capacity& capacity,
                              const Stretch& s) {
  std::vector<GpuPhase> phases;
  phases.reserve(loads.size());
  for (size_t i = 0; i < loads.size(); ++i) {
    const TenantLoad& l = *loads[i];
    double memory = l.whole.memory, compute = l.whole.compute / caps[i];
    double kernels = std::max(memory, compute);
    double stretched = StretchedPhase(l, s, caps[i]);
    double weight = 1;
    if (kernels > 0) {
      weight = memory >= compute ? l.bandwidth_use / memory / capacity.bandwidth
                                 : l.compute_use / compute / capacity.compute;
    }
    phases.push_back({kernels, std::clamp(weight, 1e-6, 1.0), l.whole.overhead, l.whole.pace,
                      kernels > 0 ? stretched / kernels : 1.0});
  }
  std::vector<double> rates = QueuedSteps(phases);
  for (double& r : rates) r = 1.0 / r;
  return rates;
}

bool FitsMps(const GpuKind& gpu, std::span<const TenantLoad* const> loads) {
  // Hot path of the planner: called for every tentative addition to a GPU.
  if (loads.size() > size_t(kMpsMaxClients) || TotalMemory(loads) > gpu.memory_bytes) return false;
  std::vector<double> caps = Caps(loads);
  Capacity capacity = gpu.MpsCapacity(int(loads.size()));
  Stretch s = SolveMpsStretch(loads, caps, capacity);
  std::vector<double> rates = StepRates(loads, caps, capacity, s);
  for (size_t i = 0; i < loads.size(); ++i) {
    if (!loads[i]->MeetsSlo(rates[i])) return false;
  }
  return true;
}

StrategyResult EvaluateMps(const GpuKind& gpu, std::span<const TenantLoad* const> loads) {
  StrategyResult r;
  r.kind = ShareMode::kMps;
  if (loads.size() > size_t(kMpsMaxClients)) {
    r.verdict =
        fmt::format("mps: {} tenants > {} MPS clients per GPU", loads.size(), kMpsMaxClients);
    return r;
  }
  std::vector<double> caps = Caps(loads);
  Capacity capacity = gpu.MpsCapacity(int(loads.size()));
  Stretch s = SolveMpsStretch(loads, caps, capacity);
  std::vector<double> rates = StepRates(loads, caps, capacity, s);
  double solo_bandwidth = 0, solo_compute = 0, slowest = 1;
  for (size_t i = 0; i < loads.size(); ++i) {
    const TenantLoad& l = *loads[i];
    double rate = rates[i];
    slowest = std::max(slowest, l.solo_step_rate() / rate);
    std::string slice = caps[i] < 1 ? fmt::format("MPS client, {:.0f}% threads", caps[i] * 100)
                                    : std::string("MPS client");
    r.tenants.push_back(MakeOutcome(l, rate, slice));
    solo_bandwidth += l.bandwidth_use * l.solo_step_rate();
    solo_compute += l.compute_use * l.solo_step_rate();
  }
  double memory = TotalMemory(loads);
  bool memory_ok = memory <= gpu.memory_bytes;
  std::string cause;
  if (!memory_ok) {
    cause = fmt::format("mps: memory {} > {}", FormatBytes(memory), FormatBytes(gpu.memory_bytes));
  } else {
    cause = fmt::format("mps: bandwidth demand {} of {}", FormatPercent(solo_bandwidth),
                        FormatBandwidth(gpu.bandwidth));
    if (capacity.bandwidth < 1)
      cause += fmt::format(" ({} attainable, calibrated)", FormatPercent(capacity.bandwidth));
    if (s.bandwidth > 1 + 1e-9) cause += fmt::format(", stretched {:.2f}x", s.bandwidth);
    if (s.compute > 1 + 1e-9) {
      cause += fmt::format("; compute demand {}, stretched {:.2f}x", FormatPercent(solo_compute),
                           s.compute);
    }
    if (slowest > std::max(s.bandwidth, s.compute) + 1e-9)
      cause += fmt::format("; phases meeting by chance: slowest tenant {:.2f}x", slowest);
  }
  Conclude(&r, memory_ok, cause);
  return r;
}

}  // namespace

const Strategy& MpsStrategy() {
  static const StrategyOf<ShareMode::kMps, AppliesToAnyGpu, FitsMps, EvaluateMps> strategy;
  return strategy;
}

}  // namespace gpumux
