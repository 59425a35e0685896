// Where a pod can go, without looking at the whole fleet for each pod: per pod shape, the nodes
// that can host it, best first by a policy's cached score (ties to the node ranked first), and in
// node order for policies that pick at random. Kept up to date lazily: the cluster's changes are
// logged (Changed), and a shape's order takes in only the nodes that changed since it was last
// asked for, each scored once per change, as the simulator's per-node cache would have rescored
// them. So placing a pod costs the nodes that changed and a few heap steps, not a scan of every
// node; answers are the same, bit for bit, as a scan of every node in order (the policy's
// definition; `simulator_test.cc` holds it to that).
//
// Valid only for a policy whose Final is its cached score for the shape asked
// (Policy::FinalIsCached); the simulator scans every node otherwise. Not thread-safe (one per run).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "fleet/cluster.h"
#include "fleet/policy.h"

namespace gpumux::fleet {

class CandidateIndex {
 public:
  // `shapes` are the run's distinct pod shapes, asked for by their index; `rank` the per-seed
  // ranking of the nodes (lower goes first on equal scores). `cluster`, `shapes`, `policy` and
  // `rank` must outlive it. `in_node_order`: keep each shape's feasible nodes in node order (Count
  // and Nth, for a policy that picks at random) instead of by score (Best).
  CandidateIndex(const Cluster& cluster, const std::vector<Shape>& shapes, const Policy& policy,
                 const std::vector<int>& rank, bool in_node_order);

  // Node `node` was placed on or emptied (its version moved).
  void Changed(int node) { log_.push_back(node); }

  // The feasible node with the highest cached score for shape `shape` (lowest rank on equal
  // scores) and the GPU that score picked (-1 for a pod that does not share one); {-1, -1} if no
  // node can host it. Not `in_node_order`. Hot path (every pod): the nodes changed since the
  // shape's last call, then heap steps.
  std::pair<int, int> Best(int shape);

  // How many nodes can host shape `shape`, and the `k`-th of them in node order (k < Count; only
  // `in_node_order`).
  int Count(int shape);
  int Nth(int shape, int k);

 private:
  struct Entry {  // a node's score for a shape, as of the node's version
    double score;
    int32_t rank, node;
    uint32_t version;
    int32_t gpu;
  };
  struct PerShape {
    bool built = false;
    size_t seen = 0;                   // how much of log_ it has taken in
    std::vector<uint32_t> version;     // per node: the version taken in
    std::vector<uint8_t> feasible_at;  // per node: it could host the shape at that version
    std::vector<Entry> heap;           // feasible nodes' entries, best on top; stale ones linger
    std::vector<int> fenwick;          // feasible nodes in node order (in_node_order)
    int feasible = 0;
  };
  static bool Worse(const Entry& a, const Entry& b) {
    return a.score < b.score || (a.score == b.score && a.rank > b.rank);
  }
  PerShape& UpToDate(int shape);
  void Build(int shape, PerShape& p);
  void TakeIn(int shape, PerShape& p, int node);
  Entry Scored(int shape, int node) const;
  void MarkFeasible(PerShape& p, int node, bool feasible);

  const Cluster& cluster_;
  const std::vector<Shape>& shapes_;
  const Policy& policy_;
  const std::vector<int>& rank_;
  const bool in_node_order_;
  std::vector<int> log_;  // nodes changed, in order
  std::vector<PerShape> per_shape_;
};

}  // namespace gpumux::fleet
