// Which way the shim's launch entry points go: straight to the driver's own entry point while a
// launch needs nothing of the shim, else through the gated path (shim.cc). The shim chooses the
// straight way after a gated launch finds nothing to do (this tick's launch noted, the gate open,
// no forecast that could hold or time a launch); whatever then makes launches need the gate again
// (a new tick, whose first launch must be noted; a gate that closes; a forecast that starts) calls
// LaunchesNeedTheGate() after storing its change.
//
// Ordering: the caller's store, a sequentially consistent fence here, then the reset; the shim
// stores the straight way, fences, and checks again, taking the gated way back if anything
// changed. Of the two, the later fence sees the other side's store, so the way never stays
// straight past a change that needs the gate.
#pragma once

#include <atomic>

namespace gpumux::shim {

using LaunchRouteReset = void (*)();
// Set by the shim once it routes launches; null elsewhere (unit tests of the governor's parts).
inline std::atomic<LaunchRouteReset> launch_route_reset{nullptr};

// Sends the next launches through the gated path. Thread-safe and lock-free; not a hot path (once
// a tick at most, per change).
inline void LaunchesNeedTheGate() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (LaunchRouteReset reset = launch_route_reset.load(std::memory_order_acquire)) reset();
}

}  // namespace gpumux::shim
