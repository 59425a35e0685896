// How the driver-API programs of the tests and benchmarks report a failed call: one JSON line on
// stdout naming the call and the driver's answer, and exit status 4. Header-only, like the rest of
// abi/.
#pragma once

#include <cstdio>

#include "abi/cuda_types.h"

namespace gpumux::cuda {

inline int ReportFailure(const char* what, CUresult r) {
  std::printf("{\"error\": \"%s\", \"code\": %d}\n", what, r);
  return 4;
}

}  // namespace gpumux::cuda
