// MIG layouts: which GPU instances exist where on one GPU, checked against the catalog's geometry
// exactly as the driver checks them (allowed starts, no overlap on the slot axis, per-profile
// instance limits, at most one media-engine profile, compute slices within the GPU's).
#pragma once

#include <string>
#include <vector>

#include "core/gpu_kind.h"

namespace gpumux {

struct MigInstance {
  const MigProfile* profile = nullptr;
  int start = 0;

  // "NAME@START": the instance as PlaceInCreationOrder takes it placed explicitly.
  std::string Entry() const;
  // The same profile (of one geometry) at the same start.
  bool operator==(const MigInstance&) const = default;
};

struct MigLayout {
  std::vector<MigInstance> instances;

  // Empty if the driver would accept the layout; otherwise the first rule it breaks.
  std::string Violation(const MigGeometry& geo) const;
  // An order of creation in which `nvidia-smi mig -cgi ID` without explicit placements (the driver
  // then picks DriverDefaultStart) reproduces this layout, largest first when that works; empty if
  // no order does, in which case the placements must be given explicitly.
  std::vector<MigInstance> FirstFitCreationOrder(const MigGeometry& geo) const;
  // "nvidia-smi mig -cgi 9:4,14:2,19:1 -C": explicit placements, in an order that the driver's
  // default placement would also reproduce when there is one, else largest first.
  std::string CreateCommand(const MigGeometry& geo) const;
  std::string Describe() const;  // "3g.40gb@0 2g.20gb@4 1g.10gb@6"
};

// The layout the driver makes from `nvidia-smi mig -cgi NAME,NAME,...`: each profile, in order, at
// DriverDefaultStart, or at START for an entry "NAME@START" (an explicit placement, as a plan gives
// it). Throws Error (bad input) naming an unknown profile, a start the profile may not take, one
// that finds no room, or the rule the result breaks. The pointers in the result point into `geo`.
MigLayout PlaceInCreationOrder(const MigGeometry& geo, const std::vector<std::string>& profiles);

// The instances of `now` that must stay where they are through a live layout change: each its
// index in `now`, and who holds it (for the refusal: "tenant 'a'").
struct KeptInstance {
  int index = 0;
  std::string held_by;
};
// Layout `next` (entries as PlaceInCreationOrder takes them) ordered so that each kept instance of
// `now` keeps its index (its tenants name it by index), the others following in `next`'s order
// into the indices left; each entry "NAME@START". Throws Error: bad input for a `next` the
// geometry refuses; conflict naming a kept instance that `next` lacks at its placement (it would
// move or go), or whose index `next` has too few instances to keep.
std::vector<std::string> KeepingInstances(const MigGeometry& geo, const MigLayout& now,
                                          const std::vector<KeptInstance>& kept,
                                          const std::vector<std::string>& next);

// The start the driver picks for `profile` when none is given, with `occupied_mask` slots taken:
// the highest allowed start whose slots are all free; -1 if none. Highest, not lowest: it is the
// only rule that reproduces the MIG user guide's A100 examples (`3-2-1-1` gives 1g@0 1g@1 2g@2
// 3g@4, `2-1-1-1-1-1` gives 1g@0,1,2,3,6 2g@4) and its known issue (`-cgi 19,19,14,9` fails while
// `-cgi 9,19,14,19` works). mig_layout_test checks all three.
int DriverDefaultStart(const MigProfile& profile, unsigned occupied_mask);

}  // namespace gpumux
