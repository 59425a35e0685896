// Scores Kubernetes nodes for a pod with one of gpumux's fleet policies: the same Policy code that
// `gpumux fleet simulate` replays traces with (src/fleet), run on a fleet::Cluster made of the
// nodes' GPUs as they are used now. The fleet model counts a GPU in milli-GPU; a pod's share is its
// larger fraction of the GPU's memory or compute.
//
// Nodes whose fitting slots are MIG instances only are scored by best fit instead (the fleet
// model has no instances): the fuller the instance after placing the pod, the higher. So are
// pods of several GPUs (the fleet model's multi-GPU pods take whole GPUs): the fuller the node's
// GPUs after placing the pod, the higher, on the GPUs with the least room that fits. A pod asking
// a MIG profile is scored by what its placement rules out on the node's MIG rooms (MigRoom::Loss):
// the fewer other profiles' placements it takes away, the higher.
//
// Hot path of the scheduler extender (one call per pod over every candidate node): no per-node
// allocation beyond the Cluster it builds for the nodes it scores, and, with memos, only the nodes
// that changed since the last call are scored.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fleet/fragmentation.h"
#include "integrations/kubernetes/node_gpus.h"
#include "integrations/kubernetes/pod_request.h"

namespace gpumux::k8s {

struct NodeChoice {
  bool fits = false;
  std::string why_not;  // when it does not
  int slot = -1;        // index into the node's slots() where the pod would go (its first GPU)
  std::vector<int> more_slots;  // a pod of several GPUs: where the others would go
  double score = 0;             // 0..10 (kube-scheduler's extender range), higher is better
  MigChoice mig{};              // a pod asking a MIG profile: the placement (slot is -1)
};

// The share of one GPU of `slot_memory_gib` that `pod` takes (on each of its GPUs), in milli-GPU
// (1..1000).
int PodMilli(const PodRequest& pod, int slot_memory_gib);

// The threads ChooseSlots scores on by default: the machine's cores, at most 4.
size_t DefaultScoringThreads();

// What NodeScorer answered for one node, kept for the next pods: reused while the scorer's target
// workload is the one they were answered against, for pods that ask the same. One per node, owned
// by the caller, who must call Forget() whenever the node's slots or their use change.
class NodeScoreMemo {
 public:
  void Forget() { count_ = next_ = 0; }

  struct Entry {                      // (NodeScorer's)
    uint64_t generation;              // the scorer's target it was answered against
    int memory_gib, compute_percent;  // what the pod asks of one GPU
    bool whole_gpu;
    bool fleet;                     // scored by the fleet model (else best fit on instances)
    int slot_memory, target_milli;  // the fleet model's: the node's GPU size, the target's pod
    int slot;
    double score, raw;  // Final (or best fit), and Score (NaN where the model refused what fits)
  };

 private:
  friend class NodeScorer;
  static constexpr size_t kEntries = 4;  // the last pod shapes asked about on this node
  std::array<Entry, kEntries> entries_{};
  size_t count_ = 0, next_ = 0;
};

// Scores nodes for pods with one fleet policy against one target workload. Thread-compatible:
// the extender calls it under its lock (it scores on helper threads of its own).
class NodeScorer {
 public:
  // Throws Error (bad input) for an unknown policy name.
  explicit NodeScorer(std::string_view policy);

  // The target workload FGD-style policies measure fragmentation against: the GPU shares of
  // recently placed pods (the pod being scored is added to them). Answers from the next call on
  // are against it; every memo made before is stale.
  void SetTarget(std::vector<int> recent_milli);
  // A new target taken in over the next calls, so that none scores every node again: each call
  // with memos answers against the present target and also scores a slice of its fleet-scored
  // nodes (an eighth, at least kNodesPerSlice) against the new one, into their memos; the call
  // after the last slice answers against the new one. A call without memos takes it at once.
  // A slice is scored on the calling thread: a helper thread, where the second core was slow to
  // take it, kept the call waiting tens of milliseconds (docs/kubernetes.md).
  void StageTarget(std::vector<int> recent_milli);
  static constexpr size_t kNodesPerSlice = 1024;

  // One choice per node, in order. Thousands of nodes are scored in ranges on up to `max_threads`
  // threads, with the same answer as on one. `memos` is null or holds one memo per node (null
  // entries allowed): a node whose memo holds this pod's answer is not scored again, and scored
  // nodes' memos keep theirs; the answer is the same as without them. Hot path of the extender's
  // prioritize: with memos, a call costs a lookup per node plus the scoring of the nodes that
  // changed (and a slice while a target is staged).
  // `take_in_staged`: whether this call scores a slice against a staged target (a call about one
  // node, as bind's, should not: its one-node slice would end the staging).
  std::vector<NodeChoice> Choose(const std::vector<const NodeGpus*>& nodes, const PodRequest& pod,
                                 const std::vector<NodeScoreMemo*>* memos = nullptr,
                                 bool take_in_staged = true,
                                 size_t max_threads = DefaultScoringThreads());

 private:
  struct Target {
    uint64_t generation = 0;  // told apart from every other scorer's (memos name it)
    std::vector<int> recent_milli;
    // The target workloads with the pod added, by the pod's share (built on first use).
    std::map<int, std::unique_ptr<fleet::TargetWorkloads>> workloads;
    const fleet::TargetWorkloads& With(int pod_milli);
  };
  static Target MakeTarget(std::vector<int> recent_milli);

  std::string policy_;
  Target target_, staged_;
  bool has_staged_ = false;
  size_t staged_until_ = 0;  // the fleet-scored candidates scored against it so far
  bool staged_done_ = false;
};

// One choice per node, in order, without memos: NodeScorer(policy) with `recent_milli` as its
// target. Throws Error (bad input) for an unknown policy name.
std::vector<NodeChoice> ChooseSlots(const std::vector<const NodeGpus*>& nodes,
                                    const PodRequest& pod, std::string_view policy,
                                    const std::vector<int>& recent_milli,
                                    size_t max_threads = DefaultScoringThreads());

}  // namespace gpumux::k8s
