// The choice for one GPU: given a GPU kind and the tenants on it, which strategy meets every SLO with
// the most headroom, and why each other strategy loses (in numbers).
#pragma once

#include <span>
#include <vector>

#include "share/strategy.h"

namespace gpumux {

// Which strategies a plan may use. Isolation order, most isolated first, breaks headroom ties.
struct StrategySet {
  bool mig = true, mps = true, timeslice = true;
};

struct GpuChoice {
  std::optional<StrategyResult> chosen;        // empty: nothing fits
  std::vector<StrategyResult> considered;      // every strategy evaluated, chosen included
};

GpuChoice ChooseStrategy(const GpuKind& gpu, std::span<const TenantLoad* const> loads,
                         const StrategySet& allowed = {});

// Yes/no: can these tenants share one GPU of this kind under some allowed strategy? The fleet
// planner's inner question; cheapest strategies are asked first.
bool FitsAny(const GpuKind& gpu, std::span<const TenantLoad* const> loads,
             const StrategySet& allowed = {});

}  // namespace gpumux
