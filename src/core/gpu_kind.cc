#include "core/gpu_kind.h"

#include <algorithm>
#include <iterator>
#include <map>

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

namespace {

// The figure measured for `n` processes, or for the largest count measured below it; `otherwise`
// when none was.
double ForCount(const std::map<int, double>& measured, int n, double otherwise) {
  auto it = measured.upper_bound(n);
  return it == measured.begin() ? otherwise : std::prev(it)->second;
}

}  // namespace

double GpuKind::TimeSliceUsable(int n, double modelled) const {
  if (!calibration || n < 2) return modelled;
  return ForCount(calibration->timeslice_usable, n, modelled);
}

Capacity GpuKind::MpsCapacity(int tenants) const {
  double together = calibration && tenants >= 2 ? ForCount(calibration->mps_usable, tenants, 1.0)
                                                : 1.0;
  return {MeasuredBandwidthEfficiency().value_or(1.0) * together,
          MeasuredComputeEfficiency().value_or(1.0)};
}

}  // namespace gpumux
