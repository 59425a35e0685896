#include "share/gpu_choice.h"

#include "share/strategy_registry.h"

namespace gpumux {

GpuChoice ChooseStrategy(const GpuKind& gpu, std::span<const TenantLoad* const> loads,
                         const StrategySet& allowed) {
  GpuChoice choice;
  for (const Strategy* s : Strategies()) {
    if (allowed.Allows(s->mode()) && s->Applies(gpu, loads.size()))
      choice.considered.push_back(s->Evaluate(gpu, loads));
  }
  for (const StrategyResult& r : choice.considered) {
    // Strictly more headroom wins; on a tie the earlier (more isolated) strategy stays.
    if (r.fits && (!choice.chosen || r.headroom > choice.chosen->headroom * (1 + 1e-9))) {
      choice.chosen = r;
    }
  }
  return choice;
}

bool FitsAny(const GpuKind& gpu, std::span<const TenantLoad* const> loads,
             const StrategySet& allowed) {
  for (const Strategy* s : StrategiesCheapestFirst()) {
    if (allowed.Allows(s->mode()) && s->Applies(gpu, loads.size()) && s->Fits(gpu, loads))
      return true;
  }
  return false;
}

}  // namespace gpumux
