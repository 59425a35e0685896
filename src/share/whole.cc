// Strategy "whole": one tenant owns the GPU. The baseline every sharing strategy is compared with.
#include <fmt/format.h>

#include "core/units.h"
#include "share/strategy.h"

namespace gpumux {
namespace {

StrategyResult EvaluateWhole(const GpuKind& gpu, std::span<const TenantLoad* const> loads) {
  StrategyResult r;
  r.kind = ShareMode::kWhole;
  if (loads.size() != 1) {
    r.verdict =
        fmt::format("whole: one tenant per GPU, and {} tenants share this one", loads.size());
    return r;
  }
  const TenantLoad& load = *loads[0];
  r.tenants.push_back(MakeOutcome(load, load.solo_step_rate(), "whole GPU"));
  bool memory_ok = load.memory <= gpu.memory_bytes;
  Conclude(&r, memory_ok,
           memory_ok ? ""
                     : fmt::format("memory {} > {} on {}", FormatBytes(load.memory),
                                   FormatBytes(gpu.memory_bytes), gpu.name));
  return r;
}

bool AppliesToOneTenant(const GpuKind&, size_t tenants) { return tenants == 1; }

bool FitsWhole(const GpuKind& gpu, std::span<const TenantLoad* const> loads) {
  return loads.size() == 1 && loads[0]->memory <= gpu.memory_bytes &&
         loads[0]->MeetsSlo(loads[0]->solo_step_rate());
}

}  // namespace

const Strategy& WholeStrategy() {
  static const StrategyOf<ShareMode::kWhole, AppliesToOneTenant, FitsWhole, EvaluateWhole> strategy;
  return strategy;
}

}  // namespace gpumux
