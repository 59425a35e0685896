// The simulated driver's contexts, shared by its two halves (sim_driver.cc keeps them, sim_exec.cc
// checks them): per thread, as the real driver keeps them, so that a client that forgets to make
// one current fails here as it would on a GPU (CUDA_ERROR_INVALID_CONTEXT). A context is of one
// device; work, memory and queries go to the device of the calling thread's current context.
#pragma once

namespace gpumux::sim {

// The ordinal of the device of the calling thread's current context (cuCtxSetCurrent,
// cuCtxCreate), or -1 when it has none. Thread-safe.
int CurrentDeviceOrdinal();
inline bool HasCurrentContext() { return CurrentDeviceOrdinal() >= 0; }

}  // namespace gpumux::sim
