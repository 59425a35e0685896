// The MIG strategy's evaluation for a GPU that already runs some of its tenants on MIG instances
// (re-planning a live node, live_node.h). The strategy itself is MigStrategy() in the registry.
#pragma once

#include <span>

#include "share/strategy.h"

namespace gpumux {

// As the MIG strategy's Evaluate, with `running_on[i]` the instance loads[i] runs on now (placed
// in `gpu`'s geometry; no profile: none): among the layouts that keep as many
// SLOs as any layout can, the one that moves the fewest running tenants off their instance (same
// profile at the same start), then the most headroom, then the fewest slots. With `running_on`
// empty it is the strategy's Evaluate.
StrategyResult EvaluateMigAround(const GpuKind& gpu, std::span<const TenantLoad* const> loads,
                                 std::span<const MigInstance> running_on);

}  // namespace gpumux
