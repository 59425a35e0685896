// How tenants that share one GPU delay each other before it saturates: a queueing model of their
// GPU phases, used by the MPS and time-slicing strategies on top of what each resource can carry.
//
// Each tenant's step is a GPU phase (its kernels in flight) and time off the GPU (launches,
// synchronisation, its engine's loop, or waiting for its pace). While a co-runner's phase is in
// flight, the tenant's own phase progresses more slowly: by the share of the GPU the co-runner's
// phase occupies (processor sharing). Whether phases meet is a matter of chance, so the slowdown
// grows with how often the co-runners are in their phases, long before their summed demand reaches
// the GPU's capacity (the fluid model in interference.h sees no contention until then; published
// co-location measurements see it from two tenants on; bench/fidelity/colocation.csv).
//
// The model is approximate mean-value analysis (Schweitzer) of a closed network with one
// processor-sharing station, the GPU, and one customer per tenant: tenant i, whose phase alone
// takes g_i, occupies w_i of the GPU while in it and spends the fraction Q_j of its time in it,
// finishes its phase in
//     R_i = g_i · max(floor_i, 1 + Σ_{j≠i} w_j · Q_j)
// and its step takes max(pace_i, R_i + off_i), with Q_i = R_i / step_i, solved as a fixed point.
// `floor_i` is a stretch the phase has anyway (MPS: the fluid model's, when the tenants' demand
// exceeds a resource). With w = 1 and no time off the GPU it is the fluid model exactly: N
// saturating tenants each get 1/N.
#pragma once

#include <span>
#include <vector>

namespace gpumux {

// One tenant's step as the model sees it (seconds, except `weight`).
struct GpuPhase {
  double gpu = 0;     // its GPU phase alone on the whole GPU
  double weight = 1;  // the share of the GPU its phase occupies, as co-runners feel it, in (0, 1]
  double off = 0;     // time off the GPU each step
  double pace = 0;    // the shortest step its own pace allows, or 0
  double floor = 1;   // the stretch its phase has anyway (≥ 1)
};

// Each tenant's step time when they share (same order as `phases`). A tenant alone, or beside
// tenants that never use the GPU, keeps its own step. Hot path of the planner (called for every
// tentative addition to a GPU): O(n) per round, a few dozen rounds. Thread-safe (pure).
std::vector<double> QueuedSteps(std::span<const GpuPhase> phases);

}  // namespace gpumux
