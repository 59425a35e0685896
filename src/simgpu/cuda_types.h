// The few CUDA driver API types and codes gpumux's simulated driver and shim use, declared from the
// public ABI (no vendor header is copied). Values match the driver's.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {
typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st* CUcontext;
typedef unsigned long long CUdeviceptr;
typedef uint64_t cuuint64_t;
typedef int CUdriverProcAddressQueryResult;
}

namespace gpumux::cuda {
inline constexpr CUresult kSuccess = 0;
inline constexpr CUresult kErrorInvalidValue = 1;
inline constexpr CUresult kErrorOutOfMemory = 2;
inline constexpr CUresult kErrorNotInitialized = 3;
inline constexpr CUresult kErrorNoDevice = 100;
inline constexpr CUresult kErrorInvalidDevice = 101;
inline constexpr CUresult kErrorInvalidContext = 201;
inline constexpr CUresult kErrorNotFound = 500;
inline constexpr int kAttributeMultiprocessorCount = 16;
inline constexpr int kProcAddressSuccess = 0;
inline constexpr int kProcAddressSymbolNotFound = 1;
}  // namespace gpumux::cuda
