#include "share/gpu_choice.h"

#include <algorithm>

#include "share/mig.h"
#include "share/strategy_registry.h"

namespace gpumux {
namespace {

// The fitting result with strictly the most headroom; on a tie the earlier (more isolated).
std::optional<StrategyResult> MostHeadroom(const std::vector<StrategyResult>& considered) {
  std::optional<StrategyResult> chosen;
  for (const StrategyResult& r : considered) {
    if (r.fits && (!chosen || r.headroom > chosen->headroom * (1 + 1e-9))) chosen = r;
  }
  return chosen;
}

// The mode a node runs a strategy's GPU in: one tenant alone is time-sliced (nothing to share).
ShareMode NodeMode(ShareMode planned) {
  return planned == ShareMode::kWhole ? ShareMode::kTimeSlice : planned;
}

}  // namespace

GpuChoice ChooseStrategy(const GpuKind& gpu, std::span<const TenantLoad* const> loads,
                         const StrategySet& allowed) {
  GpuChoice choice;
  for (const Strategy* s : Strategies()) {
    if (allowed.Allows(s->mode()) && s->Applies(gpu, loads.size()))
      choice.considered.push_back(s->Evaluate(gpu, loads));
  }
  choice.chosen = MostHeadroom(choice.considered);
  return choice;
}

GpuChoice ChooseStrategyKeeping(const GpuKind& gpu, std::span<const TenantLoad* const> loads,
                                const StrategySet& allowed, ShareMode mode_now,
                                std::span<const MigInstance> running_on) {
  GpuChoice choice = ChooseStrategy(gpu, loads, allowed);
  bool on_instances = std::any_of(running_on.begin(), running_on.end(),
                                  [](const MigInstance& i) { return i.profile != nullptr; });
  for (StrategyResult& r : choice.considered) {
    if (r.kind == ShareMode::kMig && on_instances) r = EvaluateMigAround(gpu, loads, running_on);
  }
  choice.chosen = MostHeadroom(choice.considered);
  for (const StrategyResult& r : choice.considered) {
    if (r.fits && NodeMode(r.kind) == mode_now) {
      choice.chosen = r;
      break;
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
