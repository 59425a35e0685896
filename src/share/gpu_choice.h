// The choice for one GPU: given a GPU kind and the tenants on it, which strategy meets every SLO
// with the most headroom, and why each other strategy loses (in numbers).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "base/share_mode.h"
#include "share/strategy.h"

namespace gpumux {

// Which strategies a plan may use. `whole` (one tenant alone) is always allowed.
class StrategySet {
 public:
  StrategySet() = default;  // every strategy
  static StrategySet None() { return StrategySet(0); }
  void Allow(ShareMode mode) { modes_ |= Bit(mode); }
  bool Allows(ShareMode mode) const {
    return mode == ShareMode::kWhole || (modes_ & Bit(mode)) != 0;
  }

 private:
  explicit StrategySet(uint32_t modes) : modes_(modes) {}
  static uint32_t Bit(ShareMode mode) { return 1u << uint32_t(mode); }
  uint32_t modes_ = ~0u;
};

struct GpuChoice {
  std::optional<StrategyResult> chosen;    // empty: nothing fits
  std::vector<StrategyResult> considered;  // every strategy evaluated, chosen included
};

// Evaluates every allowed strategy that applies (strategy_registry.h, most isolated first) and
// chooses the one with strictly the most headroom; ties go to the more isolated.
GpuChoice ChooseStrategy(const GpuKind& gpu, std::span<const TenantLoad* const> loads,
                         const StrategySet& allowed = {});

// As ChooseStrategy, for a GPU that already runs some of the tenants (re-planning a live node,
// live_node.h): `mode_now` is the GPU's mode, `running_on[i]` the MIG instance loads[i] runs on
// (placed in `gpu`'s geometry; no profile: none). MIG is evaluated moving the fewest of them off
// their instances (EvaluateMigAround), and the mode the GPU runs in is chosen wherever it keeps
// every SLO (a mode changes only on an idle GPU); where it does not, as ChooseStrategy.
GpuChoice ChooseStrategyKeeping(const GpuKind& gpu, std::span<const TenantLoad* const> loads,
                                const StrategySet& allowed, ShareMode mode_now,
                                std::span<const MigInstance> running_on);

// Yes/no: can these tenants share one GPU of this kind under some allowed strategy? The fleet
// planner's inner question; cheapest strategies are asked first.
bool FitsAny(const GpuKind& gpu, std::span<const TenantLoad* const> loads,
             const StrategySet& allowed = {});

}  // namespace gpumux
