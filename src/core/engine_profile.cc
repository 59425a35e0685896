#include "core/engine_profile.h"

namespace gpumux {

EngineProfile EngineProfile::Over(const EngineProfile& fitted) const {
  EngineProfile e = fitted;
  e.name = name, e.aliases = aliases, e.description = description, e.source = source;
  e.runs = fitted.name;
  e.host_overhead_seconds = host_overhead_seconds;
  e.error_median = error_median, e.error_worst = error_worst;
  e.uncertain = uncertain;
  return e;
}

double EngineProfile::BandwidthEfficiency(DType weights) const {
  switch (weights) {
    case DType::kFp8: return efficiency_fp8;
    case DType::kInt8: return efficiency_int8;
    case DType::kInt4: return efficiency_int4;
    default: return efficiency_16bit;
  }
}

double EngineProfile::DequantBytesPerSmCycle(DType weights) const {
  switch (weights) {
    case DType::kInt8: return dequant_bytes_per_sm_cycle_int8;
    case DType::kInt4: return dequant_bytes_per_sm_cycle_int4;
    default: return 0;
  }
}

}  // namespace gpumux
