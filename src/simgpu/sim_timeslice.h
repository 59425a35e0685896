// Round-robin time slicing of one simulated GPU between processes' contexts, as the driver
// schedules contexts without MPS (../shared/reference/mig-mps-gpus.md §3): while several contexts
// have work, each in turn gets the whole GPU for one timeslice; a kernel still running when the
// slice ends is preempted (compute preemption, Pascal and later) and resumes at the context's next
// slice; each switch from one context to another costs GPU time that nobody uses. A context whose
// work runs out before its slice ends gives the GPU up at once; one alone keeps it, slice after
// slice, with no switch. Within a context work runs in submission order.
//
// Figures: the slice defaults to 1,024 µs, the hardware default TSG timeslice on Volta and later
// (NVIDIA's open kernel modules; `nvidia-smi compute-policy --set-timeslice` picks other lengths,
// whose values NVIDIA does not publish). The switch cost defaults to 25 µs, an assumption: NVIDIA
// publishes no figure, and preemption is reported to take up to ~40 µs (GPREEMPT, ATC'25).
// Not modelled: weighted runlists (interleave levels), scheduling inside the GSP firmware, copy
// engines running beside kernels, and streams of one context overlapping.
//
// The schedule is plain data kept in the shared device state (sim_state.h), so every process sees
// one GPU; callers hold the state's lock around every call. It is worked out lazily: Advance plays
// the round robin forward to a time, and is called on every submission, wait and query.
#pragma once

#include <cstdint>

namespace gpumux::sim {

inline constexpr int kSliceContexts = 1024;  // one per process slot (kMaxSimProcesses)
inline constexpr int kRunsKept = 64;         // per context, for when past work completed

struct SliceContext {
  uint64_t submitted_ns;  // GPU time of all work submitted so far (its time alone)
  uint64_t served_ns;     // GPU time of the work done so far
  // Its latest runs on the GPU (a ring): from `start_ns` to `end_ns` its served time went from
  // `served_at_start` to `served_at_end` (as fast as the clock when it has the GPU alone; slower
  // when it shares the GPU, sim_mps.h).
  struct Run {
    uint64_t start_ns, end_ns, served_at_start, served_at_end;
  } runs[kRunsKept];
  uint32_t next_run;
  double weight;  // its share when sharing (sim_mps.h); unused by the round robin
};

struct SliceSchedule {
  uint64_t slice_ns, switch_ns;
  uint64_t at_ns;         // how far the schedule is worked out (may pass now by a switch)
  int32_t current;        // the context the GPU runs or last ran (-1: none yet)
  uint64_t slice_end_ns;  // when its slice ends
  SliceContext contexts[kSliceContexts];
};

// A fresh schedule (every context idle) with these lengths.
void StartSchedule(SliceSchedule* s, uint64_t slice_ns, uint64_t switch_ns);

// Plays the round robin forward to `now_ns`, calling charge(context, ns, arg) for each stretch of
// GPU time a context's work runs.
using ChargeFn = void (*)(int context, uint64_t ns, void* arg);
void Advance(SliceSchedule* s, uint64_t now_ns, ChargeFn charge, void* arg);

// Adds `duration_ns` of work to `context` (after Advance to now). Returns its ticket: the work is
// done when the context's served_ns reaches it.
uint64_t Submit(SliceSchedule* s, int context, uint64_t duration_ns);

// Forgets a context's work (its process is gone): it gets no more GPU time.
void Drop(SliceSchedule* s, int context);

inline bool Done(const SliceSchedule& s, int context, uint64_t ticket) {
  return s.contexts[context].served_ns >= ticket;
}
// The earliest the work of `ticket` can be done: if the context had the GPU from now on.
uint64_t EarliestDone(const SliceSchedule& s, int context, uint64_t ticket);
// When done work completed, from the context's runs (the oldest run kept if it is older).
uint64_t DoneAt(const SliceSchedule& s, int context, uint64_t ticket);

// Records that `context` ran from `start_ns` for `wall_ns` and served `served_ns` of its work (a
// run that goes on at the same pace extends the last one). For Advance and AdvanceShared.
void RecordRun(SliceContext& c, uint64_t start_ns, uint64_t wall_ns, uint64_t served_ns);

}  // namespace gpumux::sim
