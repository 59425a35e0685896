// The simulated driver's contexts, shared by its two halves (sim_driver.cc keeps them, sim_exec.cc
// checks them): per thread, as the real driver keeps them, so that a client that forgets to make
// one current fails here as it would on a GPU (CUDA_ERROR_INVALID_CONTEXT).
#pragma once

namespace gpumux::sim {

// Whether the calling thread has a current context (cuCtxSetCurrent, cuCtxCreate). Thread-safe.
bool HasCurrentContext();

}  // namespace gpumux::sim
