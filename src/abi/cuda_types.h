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
// Virtual memory: where a cuMemCreate allocation lives, and how it may be shared between processes.
typedef struct {
  int type;  // CUmemLocationType
  int id;    // a device ordinal for a device location
} CUmemLocation;
typedef struct CUmemAllocationProp_st {
  int type;                  // CUmemAllocationType: 1 pinned
  int requestedHandleTypes;  // CUmemAllocationHandleType flags: 1 a POSIX file descriptor
  CUmemLocation location;
  void* win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
} CUmemAllocationProp;
// A device allocation's handle for another process (cuIpcGetMemHandle): 64 opaque bytes.
typedef struct {
  char reserved[64];
} CUipcMemHandle;
typedef struct {
  size_t Width;
  size_t Height;
  int Format;
  unsigned int NumChannels;
} CUDA_ARRAY_DESCRIPTOR;
typedef struct {
  size_t Width;
  size_t Height;  // 0 for a 1D array
  size_t Depth;   // 0 for a 1D or 2D array
  int Format;
  unsigned int NumChannels;
  unsigned int Flags;
} CUDA_ARRAY3D_DESCRIPTOR;
typedef struct CUmipmappedArray_st* CUmipmappedArray;
typedef struct CUmod_st* CUmodule;
typedef struct CUfunc_st* CUfunction;
typedef struct CUevent_st* CUevent;
typedef struct CUgraph_st* CUgraph;
typedef struct CUgraphNode_st* CUgraphNode;
typedef struct CUgraphExec_st* CUgraphExec;
typedef struct CUlaunchAttribute_st CUlaunchAttribute;  // contents not read
typedef struct {
  unsigned int gridDimX, gridDimY, gridDimZ;
  unsigned int blockDimX, blockDimY, blockDimZ;
  unsigned int sharedMemBytes;
  CUstream hStream;
  CUlaunchAttribute* attrs;
  unsigned int numAttrs;
} CUlaunchConfig;
// Graph memory nodes: only the size and the returned address are read; the pool properties
// (CUmemPoolProps, 88 bytes in every CUDA 11.4+ and 12.x release) are carried opaquely.
typedef struct {
  unsigned char poolProps[88];
  const void* accessDescs;
  size_t accessDescCount;
  size_t bytesize;
  CUdeviceptr dptr;
} CUDA_MEM_ALLOC_NODE_PARAMS;
}

namespace gpumux::cuda {
inline constexpr CUresult kSuccess = 0;
inline constexpr CUresult kErrorInvalidValue = 1;
inline constexpr CUresult kErrorOutOfMemory = 2;
inline constexpr CUresult kErrorNotInitialized = 3;
inline constexpr CUresult kErrorNoDevice = 100;
inline constexpr CUresult kErrorInvalidDevice = 101;
inline constexpr CUresult kErrorInvalidImage = 200;
inline constexpr CUresult kErrorInvalidContext = 201;
inline constexpr CUresult kErrorFileNotFound = 301;
inline constexpr CUresult kErrorInvalidHandle = 400;
inline constexpr CUresult kErrorPeerAccessAlreadyEnabled = 704;
inline constexpr CUresult kErrorPeerAccessNotEnabled = 705;
inline constexpr CUresult kErrorNotFound = 500;
inline constexpr CUresult kErrorNotReady = 600;
inline constexpr CUresult kErrorStreamCaptureUnsupported = 900;
inline constexpr int kAttributeMultiprocessorCount = 16;
// CUmemLocationType.
inline constexpr int kMemLocationDevice = 1;
inline constexpr int kMemLocationHost = 2;
inline constexpr int kMemLocationHostNuma = 3;
inline constexpr int kMemLocationHostNumaCurrent = 4;
// CUmemAllocationHandleType.
inline constexpr int kMemHandlePosixFileDescriptor = 1;
inline constexpr int kProcAddressSuccess = 0;
inline constexpr int kProcAddressSymbolNotFound = 1;

// Bytes per channel element of a CUarray_format (0 for an unknown format).
inline size_t ArrayFormatBytes(int format) {
  switch (format) {
    case 0x01:
    case 0x08: return 1;  // (UN)SIGNED_INT8
    case 0x02:
    case 0x09:
    case 0x10: return 2;  // (UN)SIGNED_INT16, HALF
    case 0x03:
    case 0x0a:
    case 0x20: return 4;  // (UN)SIGNED_INT32, FLOAT
    default: return 0;
  }
}
// Bytes of a 3D array, or of all `levels` levels of a mipmapped one (each level halves every
// extent).
inline uint64_t Array3DBytes(const CUDA_ARRAY3D_DESCRIPTOR& d, unsigned int levels = 1) {
  uint64_t total = 0, w = d.Width, h = d.Height ? d.Height : 1, z = d.Depth ? d.Depth : 1;
  for (unsigned int l = 0; l < levels; ++l) {
    total += w * h * z;
    w = w > 1 ? w / 2 : 1, h = h > 1 ? h / 2 : 1, z = z > 1 ? z / 2 : 1;
  }
  return total * d.NumChannels * ArrayFormatBytes(d.Format);
}
inline uint64_t ArrayBytes(const CUDA_ARRAY_DESCRIPTOR& d) {
  return Array3DBytes({d.Width, d.Height, 0, d.Format, d.NumChannels, 0});
}
}  // namespace gpumux::cuda
