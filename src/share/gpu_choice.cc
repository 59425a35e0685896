#include "share/gpu_choice.h"

namespace gpumux {

GpuChoice ChooseStrategy(const GpuKind& gpu, std::span<const TenantLoad* const> loads,
                         const StrategySet& allowed) {
  GpuChoice choice;
  if (loads.size() == 1) choice.considered.push_back(EvaluateWhole(gpu, loads));
  if (allowed.mig && gpu.mig) choice.considered.push_back(EvaluateMig(gpu, loads));
  if (allowed.mps) choice.considered.push_back(EvaluateMps(gpu, loads));
  if (allowed.timeslice) choice.considered.push_back(EvaluateTimeSlice(gpu, loads));
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
  if (loads.size() == 1) {
    const TenantLoad& l = *loads[0];
    return l.memory <= gpu.memory_bytes && l.MeetsSlo(l.solo_step_rate());
  }
  return (allowed.mps && FitsMps(gpu, loads)) || (allowed.timeslice && FitsTimeSlice(gpu, loads)) ||
         (allowed.mig && FitsMig(gpu, loads));
}

}  // namespace gpumux
