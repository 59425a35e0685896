// The contention model for tenants that run at the same time on the same SMs and HBM (MPS).
//
// Tenant i, alone on the whole GPU, needs per step mem_i = bytes_i/(η_i·BW) seconds of memory time
// and comp_i = FLOPs_i/(η_c,i·peak_i) seconds of math time, and may pace itself at one step per
// pace_i seconds. Sharing stretches every tenant's memory time by one factor S_B and its math time
// by one factor S_C (both ≥ 1), so its step takes max(pace_i, max(mem_i·S_B, comp_i·S_C/cap_i) +
// o_i), cap_i being its MPS thread cap and o_i its time off the GPU each step (launches,
// synchronisation; 0 unless stated), during which it uses neither. The stretches are the smallest
// for which the tenants together use at most the GPU's bandwidth and math throughput:
//     Σ_i (bytes_i/BW)        · rate_i ≤ 1
//     Σ_i (FLOPs_i/peak_i)    · rate_i ≤ 1
// For bandwidth-bound tenants that run flat out, S_B is exactly the factor by which their summed
// bandwidth demand exceeds the GPU's: two batch-1 decoders at η=1 each get half their solo rate.
// A paced tenant that still fits in the stretched time is not slowed, and the bandwidth it leaves
// is given to the others (the solver is exact for this fluid model, not a conservative bound).
//
// What the tenants can move together is the GPU's peak, unless the GPU is calibrated: then it is
// what its best streaming kernel (and math kernel) achieved (GpuKind::MpsCapacity), so tenants
// whose calibrated η sum past it are stretched (contention starts below 100% of the datasheet
// figure).
//
// This is what the resources can carry. Below saturation, tenants whose GPU phases meet by chance
// still slow each other: the MPS strategy takes this stretch as a floor under colocation.h's
// queueing model. Limits: it ignores L2 thrashing, treats the attainable bandwidth as shared
// without loss and assumes arbitration in proportion to demand.
#pragma once

#include <span>
#include <vector>

#include "share/tenant.h"

namespace gpumux {

struct Stretch {
  double bandwidth = 1;  // S_B
  double compute = 1;    // S_C
};

// Solves the model above. `caps` holds each tenant's MPS thread cap in (0, 1] (empty: all 1);
// `capacity` what the tenants can use together of the GPU's peak bandwidth and math (at most 1).
Stretch SolveMpsStretch(std::span<const TenantLoad* const> loads, std::span<const double> caps = {},
                        const Capacity& capacity = {});

// One tenant's GPU phase (its kernels' time each step) under a stretch, with MPS thread cap `cap`.
double StretchedPhase(const TenantLoad& load, const Stretch& s, double cap = 1.0);
// Step rate of one tenant under a stretch, by the fluid model alone.
double StretchedStepRate(const TenantLoad& load, const Stretch& s, double cap = 1.0);

}  // namespace gpumux
