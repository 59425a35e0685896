#include "share/strategy_registry.h"

#include <array>
#include <string>

#include "base/error.h"

namespace gpumux {

// One per file in share/.
const Strategy& WholeStrategy();
const Strategy& MigStrategy();
const Strategy& MpsStrategy();
const Strategy& TimeSliceStrategy();

namespace {

const std::array<const Strategy*, 4>& ByIsolation() {
  static const std::array<const Strategy*, 4> list = {&WholeStrategy(), &MigStrategy(),
                                                      &MpsStrategy(), &TimeSliceStrategy()};
  return list;
}

const std::array<const Strategy*, 4>& ByFitCost() {
  static const std::array<const Strategy*, 4> list = {&WholeStrategy(), &MpsStrategy(),
                                                      &TimeSliceStrategy(), &MigStrategy()};
  return list;
}

}  // namespace

std::span<const Strategy* const> Strategies() { return ByIsolation(); }

std::span<const Strategy* const> StrategiesCheapestFirst() { return ByFitCost(); }

const Strategy& StrategyFor(ShareMode mode) {
  for (const Strategy* s : ByIsolation()) {
    if (s->mode() == mode) return *s;
  }
  throw Internal("no strategy plans mode " + std::string(ShareModeName(mode)));
}

}  // namespace gpumux
