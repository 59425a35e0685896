// Every single-GPU strategy gpumux knows, in one ordered list. Adding a strategy: one file that
// implements `Strategy` (strategy.h) and its line in strategy_registry.cc.
#pragma once

#include <span>

#include "base/share_mode.h"
#include "share/strategy.h"

namespace gpumux {

// Most isolated first: whole, MIG, MPS, time-slicing. A plan prefers the earlier of two strategies
// with equal headroom. The strategies live as long as the program.
std::span<const Strategy* const> Strategies();

// The same strategies, cheapest `Fits` first (MIG searches layouts, so it is asked last): the order
// in which a yes/no question should ask them.
std::span<const Strategy* const> StrategiesCheapestFirst();

// The strategy that plans `mode`.
const Strategy& StrategyFor(ShareMode mode);

}  // namespace gpumux
