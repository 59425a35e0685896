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
};

struct MigLayout {
  std::vector<MigInstance> instances;

  // Empty if the driver would accept the layout; otherwise the first rule it breaks.
  std::string Violation(const MigGeometry& geo) const;
  int SlotsUsed() const;
  // An order of creation in which `nvidia-smi mig -cgi ID` (first free legal start, no explicit
  // placement) reproduces this layout, largest first; empty if no such order exists among those tried,
  // in which case placements must be given explicitly.
  std::vector<MigInstance> FirstFitCreationOrder(const MigGeometry& geo) const;
  // "nvidia-smi mig -cgi 9:0,14:4,19:6 -C" (explicit placements, creation order).
  std::string CreateCommand(const MigGeometry& geo) const;
  std::string Describe() const;  // "3g.40gb@0 2g.20gb@4 1g.10gb@6"
};

// The start `nvidia-smi mig -cgi` picks for `profile` given the slots already taken: the first
// allowed start whose slots are free; -1 if none.
int FirstFreeStart(const MigProfile& profile, unsigned occupied_mask);

}  // namespace gpumux
