#include "core/dtype.h"

#include <algorithm>
#include <cctype>
#include <string>

namespace gpumux {

std::optional<DType> ParseDType(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (lower == "bf16") return DType::kBf16;
  if (lower == "fp16" || lower == "f16") return DType::kFp16;
  if (lower == "fp8") return DType::kFp8;
  if (lower == "int8") return DType::kInt8;
  if (lower == "int4") return DType::kInt4;
  if (lower == "tf32") return DType::kTf32;
  return std::nullopt;
}

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kBf16: return "bf16";
    case DType::kFp16: return "fp16";
    case DType::kFp8: return "fp8";
    case DType::kInt8: return "int8";
    case DType::kInt4: return "int4";
    case DType::kTf32: return "tf32";
  }
  return "?";
}

double BytesPerElement(DType dtype) {
  switch (dtype) {
    case DType::kBf16: return 2;
    case DType::kFp16: return 2;
    case DType::kFp8: return 1;
    case DType::kInt8: return 1;
    case DType::kInt4: return 0.5;
    case DType::kTf32: return 4;
  }
  return 2;
}

double WeightBytesPerParam(DType dtype, int group) {
  double scale = 2.0 / group;  // one fp16 scale per group
  switch (dtype) {
    case DType::kInt8: return 1 + scale;
    case DType::kInt4: return 0.5 + scale + 0.5 / group;  // and a 4-bit zero point
    default: return BytesPerElement(dtype);
  }
}

}  // namespace gpumux
