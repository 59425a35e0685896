// The allocation benchmarks' loop, shared so that the driver, the ledger shim and the granting shim
// are timed on exactly the same calls.
#pragma once

#include <benchmark/benchmark.h>

#include "abi/driver_api.h"

namespace gpumux::bench {

// Times cuMemAlloc_v2 + cuMemFree_v2 of 1 MiB through `alloc` and `free` (the driver's or a
// shim's), after one pair outside the timing (a shim's first call sets it up). Skips, saying why,
// when either is missing or that first allocation fails.
inline void AllocFreeLoop(benchmark::State& state, decltype(&cuMemAlloc_v2) alloc,
                          decltype(&cuMemFree_v2) free) {
  CUdeviceptr p;
  if (!alloc || !free) {
    state.SkipWithError("libgpumux.so not found");
    return;
  }
  if (alloc(&p, 1 << 20) != 0) {
    state.SkipWithError("the first allocation failed");
    return;
  }
  free(p);
  for (auto _ : state) {
    alloc(&p, 1 << 20);
    free(p);
  }
}

}  // namespace gpumux::bench
