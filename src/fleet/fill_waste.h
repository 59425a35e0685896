// The free room of one GPU that the trace's common sharing pods could never fill: free milli minus
// the largest sum of their sizes (any number of each) that fits in it. A GPU left with 350 free
// where 320-milli pods are common wastes 30; left with 190 where nothing common is under 200, all
// 190. gpumux's policy (policies/gpumux_policy.cc) counts what a placement adds to it as lost.
//
// FGD's fragment (fragmentation.h) asks only whether the *next* pod of each shape fits; it cannot
// tell a 350-milli remainder that a 320 pod will fill from a 450 one that a 230 and a 220 will
// fill exactly. This measure looks to the end of a GPU's filling.
//
// Which sizes count (FromTarget): the sizes of the target's GPU-sharing shapes carried by at least
// kMinShareOfPods of its pods (merged across CPU, memory and models) and of at least kMinMilli.
// Rarer sizes cannot be counted on to come; smaller ones, summed, fit almost any remainder, so
// counting them would call nearly every remainder fillable while they are too few to fill it (on
// openb, pods under 200 milli are 1.3% of pods, against the 14% of 810-milli pods that each leave
// 190). Both bars were chosen on the "choose" half of bench/fleet_sweep.sh and the default trace
// (docs/models.md). Where no size passes them, all of a part-used GPU's room is waste, and the
// policy packs sharing pods onto part-used GPUs before it opens a whole one.
#pragma once

#include <cstdint>
#include <vector>

#include "fleet/cluster.h"
#include "fleet/fragmentation.h"

namespace gpumux::fleet {

class FillWaste {
 public:
  static constexpr double kMinShareOfPods = 0.005;
  static constexpr int kMinMilli = 200;

  // The sizes that count, as above; none when the target has no GPU-sharing shape that passes.
  static FillWaste FromTarget(const TargetWorkload& target);

  // `sizes` in milli; those outside [1, kMilli) are ignored.
  explicit FillWaste(std::vector<int> sizes);

  // The milli of a GPU with `free_milli` free (0 to kMilli) that no sum of the sizes fills; 0 for a
  // whole free GPU, which whole-GPU pods take. Hot path: a table lookup.
  int Of(int free_milli) const { return waste_[size_t(free_milli)]; }

  const std::vector<int>& sizes() const { return sizes_; }

 private:
  std::vector<int> sizes_;
  std::vector<int16_t> waste_;  // kMilli + 1 entries
};

}  // namespace gpumux::fleet
