// The simulated GPU's MPS-like mode: processes' work runs at once and shares the GPU. Under MPS,
// kernels of several processes run on the SMs together and share them and the memory bandwidth
// (../shared/reference/mig-mps-gpus.md §4); a piece of work slows only while others' work runs
// beside it, and theirs slows as much. Modelled as processor sharing: while contexts of total
// weight W have work, context i serves its work at weight_i / W of its speed alone. A normal
// client weighs 1; a below-normal one (CUDA_MPS_CLIENT_PRIORITY=1) SimSpec::below_normal_weight,
// never less than kLeastWeight (at 0 it would get nothing, and that is not what a hint does).
// Within a context work runs in submission order (as the round robin does).
//
// It plays the same schedule as the round robin (sim_timeslice.h: Submit, Done, DoneAt, Drop), so
// a device can change mode between pieces of work; callers hold the state's lock around every call.
#pragma once

#include <cstdint>

#include "simgpu/sim_timeslice.h"

namespace gpumux::sim {

inline constexpr double kLeastWeight = 1.0 / 1024;

// Plays processor sharing forward to `now_ns`, calling charge(context, ns, arg) with the GPU time
// (at its speed alone) each context's work was served.
void AdvanceShared(SliceSchedule* s, uint64_t now_ns, ChargeFn charge, void* arg);

// When the work of `ticket` would be done if the contexts with work now kept it and no more came.
uint64_t SharedDoneForecast(const SliceSchedule& s, int context, uint64_t ticket);

}  // namespace gpumux::sim
