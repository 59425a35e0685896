// How GPU time is divided among the tenants of one GPU (the policy; the ledger applies it).
//
// Each tenant has a cap (never more than this fraction of GPU time), a weight (its share when
// tenants contend) and a priority. Among the tenants that want the GPU now, GPU time is divided by
// weight, no tenant above its cap nor above its demand (what it would use: what it used lately,
// plus room to grow, or its cap while it is being held), and what one cannot use goes to the
// others by weight (water-filling). Best-effort (low-priority) tenants are a second tier: they
// share what the others leave (their caps, their demand, or their absence). What is still left
// once every wanting tenant has its demand goes to them all by weight up to their caps, so the
// division hands out the whole GPU while someone wants it. Credit grows at the division among
// the tenants at work now (ShareAtWorkNow), so neither a neighbour's pause nor a light one's room
// to grow idles the GPU. On top of the division, normal and low tenants yield while a
// high-priority (latency-sensitive) tenant launches (Ledger::ComputeTick).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/priority.h"

namespace gpumux::node {

using gpumux::Priority;  // base/priority.h

inline constexpr uint32_t kNoCap = 1000;  // caps are in per-mille of GPU time

struct ComputeDemand {
  uint32_t cap_permille = kNoCap;
  uint32_t weight = 1;
  bool wants_gpu = false;
  bool best_effort = false;  // shares only what the others leave
  double demand = 1.0;       // fraction of GPU time it would use now (1: unknown, all it may)
  bool at_work = false;      // launched or waited within the last few ms (not just lately)
  double use = 0;            // fraction of GPU time it used lately
};

// A tenant at work that uses less than this fraction of its round-robin part (1 / tenants at work)
// and leaves part of its share is light by its own doing, not held down by the others.
inline constexpr double kClearlyLight = 0.8;

// A tenant's demand from what it used lately (`use`, a fraction of GPU time), the share it was
// given (`share`) and whether it was held for its share lately. A tenant that leaves part of its
// share unused wants what it uses, with a little room to grow; one that uses about all it is
// given, or was held, may want more than it gets: all it may (its cap). Using its whole share
// is how a tenant that contends shows it: its use is bounded by the others then, not by its need.
double DemandOf(double use, double share, bool held_lately);

// The words of the command line and the API. Throw Error (bad input) saying what is expected.
using gpumux::ParsePriority;  // "high", "normal", "low" or "best-effort"
using gpumux::PriorityName;
uint32_t ParseComputeCap(const std::string& text);  // "40%" or "40" -> 400 per mille

// Fraction of GPU time (0..1) each tenant may use now; 0 for those that do not want the GPU.
std::vector<double> FairShares(const std::vector<ComputeDemand>& tenants);

// The share tenant `me`'s credit grows at: the division among the tenants at work now (time a
// neighbour that wants the GPU lately leaves idle at the moment is not kept for it), a clearly
// light neighbour (kClearlyLight) wanting only what it uses (its room to grow is kept by its own
// credit; a heavy-weight tenant held to half by round robin before the gates divide is not
// clearly light, so weights still divide). `me` counts as wanting and at work. `share`: FairShares
// of the same tenants for `me`, returned when no neighbour is idle or clearly light.
double ShareAtWorkNow(std::vector<ComputeDemand> tenants, size_t me, double share);

// The token bucket of one tenant's GPU time: `credit_ns` grows at `share` of wall time and is
// capped at `burst_ns` ahead of what the tenant used, so an idle tenant cannot bank unlimited time.
// Returns the new credit.
int64_t AccrueCredit(int64_t credit_ns, uint64_t used_ns, double share, uint64_t elapsed_ns,
                     uint64_t burst_ns);

}  // namespace gpumux::node
