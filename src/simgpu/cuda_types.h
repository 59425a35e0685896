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
typedef struct CUstream_st* CUstream;
typedef struct CUmemPoolHandle_st* CUmemoryPool;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef struct CUarray_st* CUarray;
typedef struct CUmemAllocationProp_st CUmemAllocationProp;  // contents not read
typedef struct {
  size_t Width;
  size_t Height;
  int Format;
  unsigned int NumChannels;
} CUDA_ARRAY_DESCRIPTOR;
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

// Bytes per channel element of a CUarray_format (0 for an unknown format).
inline size_t ArrayFormatBytes(int format) {
  switch (format) {
    case 0x01: case 0x08: return 1;               // (UN)SIGNED_INT8
    case 0x02: case 0x09: case 0x10: return 2;    // (UN)SIGNED_INT16, HALF
    case 0x03: case 0x0a: case 0x20: return 4;    // (UN)SIGNED_INT32, FLOAT
    default: return 0;
  }
}
inline uint64_t ArrayBytes(const CUDA_ARRAY_DESCRIPTOR& d) {
  return uint64_t(d.Width) * (d.Height ? d.Height : 1) * d.NumChannels * ArrayFormatBytes(d.Format);
}
inline constexpr int kProcAddressSymbolNotFound = 1;
}  // namespace gpumux::cuda
