// For tests: an independent statement of the driver's MIG rules, to check layouts against.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/gpu_kind.h"
#include "core/mig_layout.h"

namespace gpumux {

// An independent statement of the driver's rules, written from the reference notes (§1.3), not from
// MigLayout: per-slot occupancy, allowed starts, instance limits, compute slices, one +me instance.
inline bool DriverAccepts(const GpuKind& gpu, const std::vector<MigInstance>& layout) {
  const MigGeometry& geo = *gpu.mig;
  std::vector<int> slot(geo.slots, 0);
  std::map<std::string, int> count;
  int compute = 0, media = 0;
  for (const MigInstance& inst : layout) {
    const MigProfile& p = *inst.profile;
    bool allowed = false;
    for (int s : p.placement_starts) allowed |= (s == inst.start);
    if (!allowed) return false;
    for (int s = inst.start; s < inst.start + p.memory_slices; ++s) {
      if (s >= geo.slots || slot[s]++) return false;
    }
    if (++count[p.name] > p.max_instances) return false;
    compute += p.compute_slices;
    if (p.name.find("+me") != std::string::npos) ++media;
  }
  return compute <= geo.compute_slices && media <= 1;
}

}  // namespace gpumux
