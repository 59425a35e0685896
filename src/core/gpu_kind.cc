#include "core/gpu_kind.h"

namespace gpumux {

double GpuKind::PeakFlops(DType dtype) const {
  switch (dtype) {
    case DType::kBf16: return tflops_bf16 * 1e12;
    case DType::kFp16: return tflops_fp16 * 1e12;
    case DType::kFp8: return (tflops_fp8 > 0 ? tflops_fp8 : tflops_fp16) * 1e12;
    case DType::kInt4: return tflops_bf16 * 1e12;
    case DType::kTf32: return tflops_tf32 * 1e12;
  }
  return tflops_bf16 * 1e12;
}

}  // namespace gpumux
