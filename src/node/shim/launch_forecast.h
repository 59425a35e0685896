// Keeps a lower-priority process's work off the GPU while a high-priority tenant's burst runs
// (part of the shim). gpumux cannot preempt a kernel, and the GPU switches contexts only at
// timeslice ends (under MPS not at all), so work of a best-effort tenant still queued or running
// when a latency-sensitive tenant's burst comes delays each of that tenant's kernels; holding new
// launches once the burst has begun is too late. So before each launch this process predicts when
// its work would end — what it has in flight plus the launch's duration, learnt per kernel (or
// graph) from events recorded around its earlier launches; a kernel never seen counts as the
// longest seen — and holds the launch while that would be past the next burst's predicted start
// (Ledger::HighPriorityForecast: the high-priority tenants' rhythm), or while a burst runs. A
// launch held four periods (its work fits no gap between bursts) goes as the next burst ends
// (after eight, at once outside a burst).
// Launches into a stream that is capturing a graph run nothing: they are neither held nor timed
// (an event recorded or queried there would end the capture).
//
// Off for high-priority tenants, and while no high-priority tenant has a rhythm: then Before and
// After cost one relaxed atomic load (Refresh, on the governor's tick, looks at the ledger).
// Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "abi/cuda_types.h"
#include "node/ledger/ledger.h"

namespace gpumux::shim {

// The driver's event calls, as the shim reaches the real driver.
struct EventCalls {
  CUresult (*create)(CUevent*, unsigned int);
  CUresult (*record)(CUevent, CUstream);
  CUresult (*query)(CUevent);
  CUresult (*elapsed)(float*, CUevent, CUevent);
  CUresult (*destroy)(CUevent);
  CUresult (*is_capturing)(CUstream, int*);
};

class LaunchForecast {
 public:
  // `ledger` (the tenant's ledger, or gpumuxd's view) must outlive it; `tenant` is its slot there.
  void Start(const node::Ledger* ledger, int tenant, EventCalls events);
  // Once a millisecond (the governor's tick): whether a high-priority tenant has a rhythm now.
  void Refresh(uint64_t now_ns);
  // Before a launch of `work` (a CUfunction or a CUgraphExec) on `stream`: may hold (sleeps).
  // Hot path: one relaxed load while off.
  void Before(const void* work, CUstream stream) {
    if (on_.load(std::memory_order_relaxed)) Hold(work, stream);
  }
  // Whether Before may hold or time a launch now (a high-priority tenant has a rhythm).
  bool on() const { return on_.load(std::memory_order_relaxed); }
  // After that launch, whatever the driver answered (`launched`: it succeeded). Hot path: one
  // thread-local load unless Before timed the launch.
  void After(const void* work, CUstream stream, bool launched) {
    if (started_) AfterTimed(work, stream, launched);
  }
  // Whether the launch Before let through on this thread is timed (After has work to do).
  static bool Timing() { return started_ != nullptr; }

 private:
  struct Timed {
    const void* work;
    CUevent start, end;
  };
  void Hold(const void* work, CUstream stream);
  void AfterTimed(const void* work, CUstream stream, bool launched);
  void Learn();         // with mu_ held: durations of the timed launches that completed
  CUevent TakeEvent();  // with mu_ held

  // The start event Hold recorded on this thread for the launch After follows (null: none).
  // Initial-exec: the shim is preloaded, so its thread-locals live in static TLS, read without a
  // call to __tls_get_addr.
  static inline thread_local CUevent started_ __attribute__((tls_model("initial-exec"))) = nullptr;
  std::atomic<bool> on_{false};
  const node::Ledger* ledger_ = nullptr;
  bool high_priority_ = true;
  EventCalls events_{};
  std::mutex mu_;
  std::unordered_map<const void*, uint64_t> duration_ns_;
  uint64_t longest_ns_ = 0;
  uint64_t busy_until_ns_ = 0;  // when this process's launched work is predicted to end
  std::deque<Timed> timed_;     // launches whose end is not learnt yet, oldest first
  std::vector<CUevent> spare_;
};

}  // namespace gpumux::shim
