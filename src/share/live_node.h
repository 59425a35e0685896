// What a node runs now, for re-planning it (`gpumux plan --apply` against a gpumuxd with tenants):
// its GPUs' sharing modes and where each of its tenants runs. A plan made with it (PlanInput::live)
// leaves running tenants where they are wherever that keeps every SLO, so that applying it changes
// only what must change (a plan never evicts: what would have to move, the apply names).
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/share_mode.h"

namespace gpumux {

struct LiveGpu {
  ShareMode mode = ShareMode::kTimeSlice;  // never kWhole
  std::vector<std::string> layout;         // kMig: as gpumuxd lists it ("NAME" or "NAME@START")
  uint64_t memory_bytes = 0;               // as gpumuxd reports it; 0: not known
};

// Whether a GPU showing `shown` bytes is one of a catalog kind of `kind` bytes: real GPUs show a
// little less than their kind (an 80 GiB H100 shows 79.6 GiB); another size is another kind.
inline bool SameKindOfGpu(uint64_t shown, uint64_t kind) {
  return std::fabs(double(shown) - double(kind)) <= 0.02 * double(kind);
}

struct RunningTenant {
  int gpu = 0;        // the node GPU it runs on
  int instance = -1;  // its MIG instance (an index into the GPU's layout); -1 on a whole GPU
};

struct LiveNode {
  std::vector<LiveGpu> gpus;                     // by node GPU index
  std::map<std::string, RunningTenant> tenants;  // by gpumuxd id (TenantIdFor(planned name))
};

}  // namespace gpumux
