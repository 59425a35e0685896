// Strategy "MPS": all tenants' kernels run at once on all SMs; each client gets a memory limit
// (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT) and optionally a thread cap
// (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE). Contention for bandwidth and math follows interference.h.
#include <fmt/format.h>

#include <numeric>
#include <vector>

#include "core/units.h"
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

bool FitsMps(const GpuKind& gpu, std::span<const TenantLoad* const> loads) {
  // Hot path of the planner: called for every tentative addition to a GPU.
  if (loads.size() > size_t(kMpsMaxClients) || TotalMemory(loads) > gpu.memory_bytes) return false;
  std::vector<double> caps = Caps(loads);
  Stretch s = SolveMpsStretch(loads, caps, gpu.MpsCapacity());
  for (size_t i = 0; i < loads.size(); ++i) {
    if (!loads[i]->MeetsSlo(StretchedStepRate(*loads[i], s, caps[i]))) return false;
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
  Stretch s = SolveMpsStretch(loads, caps, gpu.MpsCapacity());
  double solo_bandwidth = 0, solo_compute = 0;
  for (size_t i = 0; i < loads.size(); ++i) {
    const TenantLoad& l = *loads[i];
    double rate = StretchedStepRate(l, s, caps[i]);
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
    if (gpu.MpsCapacity().bandwidth < 1)
      cause +=
          fmt::format(" ({} attainable, calibrated)", FormatPercent(gpu.MpsCapacity().bandwidth));
    if (s.bandwidth > 1 + 1e-9) cause += fmt::format(", stretched {:.2f}x", s.bandwidth);
    if (s.compute > 1 + 1e-9) {
      cause += fmt::format("; compute demand {}, stretched {:.2f}x", FormatPercent(solo_compute),
                           s.compute);
    }
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
