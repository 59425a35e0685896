#include "core/gpu_kind.h"

#include <algorithm>
#include <iterator>

namespace gpumux {

double GpuKind::PeakFlops(DType dtype) const {
  switch (dtype) {
    case DType::kBf16: return tflops_bf16 * 1e12;
    case DType::kFp16: return tflops_fp16 * 1e12;
    case DType::kFp8: return (tflops_fp8 > 0 ? tflops_fp8 : tflops_fp16) * 1e12;
    case DType::kInt8:  // weight-only: dequantised and multiplied in bf16, as int4
    case DType::kInt4: return tflops_bf16 * 1e12;
    case DType::kTf32: return tflops_tf32 * 1e12;
  }
  return tflops_bf16 * 1e12;
}

std::optional<double> GpuKind::MeasuredBandwidthEfficiency() const {
  if (!calibration || bandwidth <= 0) return std::nullopt;
  return std::min(1.0, calibration->bandwidth / bandwidth);
}

std::optional<double> GpuKind::MeasuredComputeEfficiency() const {
  double peak = PeakFlops(DType::kBf16);
  if (!calibration || peak <= 0) return std::nullopt;
  return std::min(1.0, calibration->flops / peak);
}

double GpuKind::TimeSliceUsable(int n, double modelled) const {
  if (!calibration || n < 2) return modelled;
  auto it = calibration->timeslice_usable.upper_bound(n);
  if (it == calibration->timeslice_usable.begin()) return modelled;
  return std::prev(it)->second;
}

}  // namespace gpumux
