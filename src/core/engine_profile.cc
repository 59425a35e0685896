#include "core/engine_profile.h"

namespace gpumux {

double EngineProfile::BandwidthEfficiency(DType weights) const {
  switch (weights) {
    case DType::kFp8: return efficiency_fp8;
    case DType::kInt8: return efficiency_int8;
    case DType::kInt4: return efficiency_int4;
    default: return efficiency_16bit;
  }
}

}  // namespace gpumux
