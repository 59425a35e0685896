// A placement policy: how to choose the node (and the GPU) for a pod among the nodes that can host
// it. The simulator owns the loop: it filters feasible nodes, asks the policy for scores, places
// the pod on the highest score and breaks ties by a per-seed random ranking of the nodes (as the
// artifact's scheduler does, reference A.1 C1).
//
// Policies hold what they were built with and, at most, a cache of the fleet's state (gpumux's
// model prices); they are thread-compatible (one per run).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fleet/cluster.h"
#include "fleet/fragmentation.h"
#include "fleet/rng.h"

namespace gpumux::fleet {

struct NodeScore {
  double score = 0;          // higher is better
  int gpu = -1;              // for a GPU-sharing pod: the GPU it would take on this node
  double loss = 0, tie = 0;  // what a policy's Final may rescore from (gpumux's two measures)
};

class Policy {
 public:
  virtual ~Policy() = default;

  // Score of placing a pod of `shape` on the feasible node `node`. Depends only on that node's
  // state and the shape, so the simulator caches it until the node changes.
  virtual NodeScore Score(const Cluster& cluster, int node, const Shape& shape) const = 0;

  // The score the simulator compares: `cached` (Score's answer for this node and shape, computed
  // when the node last changed) adjusted by what depends on the whole cluster. Hot path: every
  // feasible node, every pod, where FinalIsCached is false. Default: the cached score.
  virtual double Final(const Cluster& cluster, int node, const Shape& shape,
                       const NodeScore& cached) const {
    (void)cluster, (void)node, (void)shape;
    return cached.score;
  }
  // Whether Final is the cached score on every node for a pod of `shape` in `cluster` as it is
  // now: then the simulator keeps the nodes ordered by it (candidate_index.h) and scans none.
  virtual bool FinalIsCached(const Cluster& cluster, const Shape& shape) const {
    (void)cluster, (void)shape;
    return true;
  }

  // Whether it picks a node at random rather than by score (then PickNth chooses).
  virtual bool PicksAtRandom() const { return false; }
  // Which of the `feasible` (> 0) nodes that can host the pod, in node order, it picks.
  virtual int PickNth(int feasible, Rng& rng) const {
    (void)feasible, (void)rng;
    return 0;
  }

  // The GPU a sharing pod takes on the chosen node; by default the one Score picked.
  virtual int PickGpu(const Cluster& cluster, int node, const Shape& shape, int scored_gpu,
                      Rng& rng) const {
    (void)cluster, (void)node, (void)shape, (void)rng;
    return scored_gpu;
  }
};

// The policies, one per file in policies/, each named in the {name, factory} table of policy.cc
// (adding one: its file and its line there).

// Names accepted by MakePolicy, in the order the README lists them.
const std::vector<std::string>& PolicyNames();

// Builds a policy by name. `targets` are the workloads FGD-style policies measure fragmentation
// against; they must outlive the policy. Throws Error (bad input) for an unknown name, listing the
// known ones.
std::unique_ptr<Policy> MakePolicy(std::string_view name, const TargetWorkloads& targets);

// The GPU with the least free milli that still holds `milli`, lowest index on ties; -1 if none.
// The artifact's "best" GPU selection, shared by several policies.
int BestFitGpu(const NodeState& node, int milli);

}  // namespace gpumux::fleet
