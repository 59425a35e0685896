// Numeric formats of weights, KV cache and tensor-core math.
#pragma once

#include <optional>
#include <string_view>

namespace gpumux {

enum class DType { kBf16, kFp16, kFp8, kInt8, kInt4, kTf32 };

// "bf16", "fp16", "fp8", "int8", "int4", "tf32" (case-insensitive); nullopt for anything else.
std::optional<DType> ParseDType(std::string_view text);
std::string_view DTypeName(DType dtype);
// Bytes one element occupies: 2, 2, 1, 1, 0.5, 4.
double BytesPerElement(DType dtype);

// The group of weights that share one scale in a quantised format (GPTQ, AWQ and most int4
// kernels use 128; llama.cpp's Q4_0 blocks are 32).
inline constexpr int kDefaultQuantGroup = 128;
// Bytes of weight memory per parameter in `dtype`, quantisation scales included: int8 and int4
// weights carry an fp16 scale per group of `group` weights (int4 also a 4-bit zero point, as the
// asymmetric GPTQ/AWQ formats do); other formats hold the bare element.
double WeightBytesPerParam(DType dtype, int group = kDefaultQuantGroup);

}  // namespace gpumux
