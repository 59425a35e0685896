// What a driver API client does before its first allocation on a thread, as the CUDA runtime does
// for its callers: make device `device`'s primary context current. The driver (and the simulated
// one) refuses allocations on a thread without a current context. For the test clients and the
// benchmarks; header-only, like the rest of abi/.
#pragma once

#include "abi/driver_api.h"

namespace gpumux::cuda {

// Retains device `device`'s primary context and makes it current on the calling thread. Returns the
// first error, or 0.
inline CUresult UsePrimaryContext(int device = 0) {
  CUdevice dev;
  CUcontext ctx;
  if (CUresult r = cuDeviceGet(&dev, device)) return r;
  if (CUresult r = cuDevicePrimaryCtxRetain(&ctx, dev)) return r;
  return cuCtxSetCurrent(ctx);
}

}  // namespace gpumux::cuda
