// Scores Kubernetes nodes for a pod with one of gpumux's fleet policies: the same Policy code that
// `gpumux fleet simulate` replays traces with (src/fleet), run on a fleet::Cluster made of the
// nodes' GPUs as they are used now. The fleet model counts a GPU in milli-GPU; a pod's share is its
// larger fraction of the GPU's memory or compute.
//
// Nodes whose fitting slots are MIG instances only are scored by best fit instead (the fleet
// model has no instances): the fuller the instance after placing the pod, the higher. So are
// pods of several GPUs (the fleet model's multi-GPU pods take whole GPUs): the fuller the node's
// GPUs after placing the pod, the higher, on the GPUs with the least room that fits.
//
// Hot path of the scheduler extender (one call per pod over every candidate node): no per-node
// allocation beyond the Cluster it builds. Thread-safe (it reads the nodes it is given).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "integrations/kubernetes/node_gpus.h"
#include "integrations/kubernetes/pod_request.h"

namespace gpumux::k8s {

struct NodeChoice {
  bool fits = false;
  std::string why_not;  // when it does not
  int slot = -1;        // index into the node's slots() where the pod would go (its first GPU)
  std::vector<int> more_slots;  // a pod of several GPUs: where the others would go
  double score = 0;             // 0..10 (kube-scheduler's extender range), higher is better
};

// The share of one GPU of `slot_memory_gib` that `pod` takes (on each of its GPUs), in milli-GPU
// (1..1000).
int PodMilli(const PodRequest& pod, int slot_memory_gib);

// The threads ChooseSlots scores on by default: the machine's cores, at most 4.
size_t DefaultScoringThreads();

// One choice per node, in order. `recent_milli` are the GPU shares of recently placed pods: the
// target workload FGD-style policies measure fragmentation against (the pod itself is added).
// Thousands of nodes are scored in ranges on up to `max_threads` threads, with the same answer
// as on one. Throws Error (bad input) for an unknown policy name.
std::vector<NodeChoice> ChooseSlots(const std::vector<const NodeGpus*>& nodes,
                                    const PodRequest& pod, std::string_view policy,
                                    const std::vector<int>& recent_milli,
                                    size_t max_threads = DefaultScoringThreads());

}  // namespace gpumux::k8s
