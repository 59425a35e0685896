// Trace replay exactly as the FGD artifact runs its experiments (reference A.1): pods arrive one by
// one and never leave; each goes to the feasible node the policy scores highest, ties to the node
// ranked first in a per-seed random ranking; a pod no node can host fails and the stream goes on.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "fleet/cluster.h"
#include "fleet/fragmentation.h"
#include "fleet/rng.h"
#include "fleet/trace.h"

namespace gpumux::fleet {

// The pods of one run, as indices into the trace (C2, C3): the whole trace once in a random order,
// then clones drawn with replacement from the trace until the next draw's per-GPU share would take
// the total GPU request past `inflation` x capacity (the artifact checks the per-GPU share, not
// num_gpu x share, so an 8-GPU clone can overshoot; reproduced on purpose).
std::vector<int> BuildStream(const std::vector<PodSpec>& pods, int64_t capacity_milli,
                             double inflation, Rng& rng);

struct StreamRow {
  int64_t arrived_milli = 0;  // GPU request of every pod so far, failed ones included
  int64_t used_milli = 0;     // GPU milli allocated
  double frag_milli = 0;      // cluster fragmentation against the target workload
  int failed_pods = 0;        // so far
};

struct Placement {
  int pod = 0;  // index into the trace
  int node = 0;
  int gpu = -1;  // the GPU of a sharing pod
};

struct Simulation {
  std::vector<StreamRow> rows;  // one per pod, after it was placed or failed
  int64_t capacity_milli = 0;
  int failed_pods = 0;
};

// One run of `policy` with `seed`. `empty` is the cluster before any pod; `targets` the workloads
// fragmentation is measured against (built from the original trace; the reported fragmentation is
// FGD's measure against `targets.fgd`). If `placements` is given, every
// placement is appended to it (for checking). Each pod touches the nodes that changed since its
// shape was last placed, not the fleet (candidate_index.h), where the policy allows it;
// `scan_every_node` checks and scores every node for every pod instead, as the policy's definition
// reads (the same placements; for checks and for the bench's baseline). Throws Error (bad input)
// for an unknown policy name.
Simulation Simulate(const Cluster& empty, const std::vector<PodSpec>& pods,
                    const TargetWorkloads& targets, std::string_view policy, uint64_t seed,
                    double inflation, std::vector<Placement>* placements = nullptr,
                    bool scan_every_node = false);

// The departures experiment, which the artifact does not run: pods arrive at their trace
// creation_time divided by `time_scale` (the trace's own times load openb's default cluster to at
// most about 1% of its GPUs at once; a scale packs the same arrivals closer) and each leaves after
// its trace lifetime (deletion_time - creation_time), in time order: departures before arrivals at
// equal times, arrivals at equal times in a per-seed order. A pod no node can host fails.
struct ChurnResult {
  double unallocated_pct = 0;      // capacity not allocated, averaged from first to last arrival
  double failed_request_pct = 0;   // GPU request of failed pods / all pods' GPU request
  double peak_allocation_pct = 0;  // the most allocated at once
  int64_t peak_used_milli = 0;
  int failed_pods = 0, pods = 0;
};
// After each event: what was placed and departed so far, and what is allocated (placed_milli -
// departed_milli == used_milli always).
struct ChurnStep {
  double time = 0;
  int placed = 0, departed = 0;
  int64_t placed_milli = 0, departed_milli = 0, used_milli = 0;
};
// Throws Error (bad input) for a pod without both times, a time scale not above 0, or an unknown
// policy.
// `scan_every_node` as for Simulate.
ChurnResult SimulateDepartures(const Cluster& empty, const std::vector<PodSpec>& pods,
                               const TargetWorkloads& targets, std::string_view policy,
                               uint64_t seed, double time_scale,
                               std::vector<ChurnStep>* steps = nullptr,
                               bool scan_every_node = false);

}  // namespace gpumux::fleet
