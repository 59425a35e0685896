// Numeric formats of weights, KV cache and tensor-core math.
#pragma once

#include <optional>
#include <string_view>

namespace gpumux {

enum class DType { kBf16, kFp16, kFp8, kInt4, kTf32 };

// "bf16", "fp16", "fp8", "int4", "tf32" (case-insensitive); nullopt for anything else.
std::optional<DType> ParseDType(std::string_view text);
std::string_view DTypeName(DType dtype);
// Bytes one element occupies: 2, 2, 1, 0.5, 4.
double BytesPerElement(DType dtype);

}  // namespace gpumux
