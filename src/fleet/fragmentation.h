// GPU fragmentation as FGD measures it (Weng et al., ATC'23; definitions as the authors' simulator
// implements them, ../shared/reference/fleet-scheduling.md §1.1 and A.1 C10).
//
// The target workload is the set of the trace's most popular pod shapes (CPU, GPU count, milli-GPU,
// GPU models; memory is not part of the shape) covering 95% of its pods, CPU-only pods included,
// with their frequencies renormalised. A node's fragment against one shape m is the free GPU milli
// that m could not use there: if m fits (CPU, model, enough GPUs with room), the free milli of the
// GPUs too small for it; otherwise (and always for a CPU-only m) all of the node's free GPU milli.
// A node's fragmentation is the expectation over the target workload; the cluster's is the sum over
// nodes.
#pragma once

#include <vector>

#include "fleet/cluster.h"

namespace gpumux::fleet {

struct TargetClass {
  Shape shape;    // memory_mib is 0: the measure ignores memory
  int count = 0;  // pods of this shape in the trace
  double probability = 0;
};

class TargetWorkload {
 public:
  // The most popular shapes of `pods` covering `coverage` of them (0 < coverage <= 1). Ties in
  // popularity are ordered as the artifact orders them (larger CPU, milli, GPU count, spec first).
  static TargetWorkload FromPods(const Cluster& cluster, const std::vector<PodSpec>& pods,
                                 double coverage = 0.95);
  const std::vector<TargetClass>& classes() const { return classes_; }

 private:
  std::vector<TargetClass> classes_;
};

// The target workloads the policies measure against, built once per trace.
struct TargetWorkloads {
  TargetWorkload fgd;   // the shapes covering 95% of pods, as FGD's artifact builds it
  TargetWorkload wide;  // 99%: gpumux's capacity tie-break also sees rarer shapes (e.g. pods that
                        // fit only one node type), which protects the nodes they need
  static TargetWorkloads FromPods(const Cluster& cluster, const std::vector<PodSpec>& pods) {
    return {TargetWorkload::FromPods(cluster, pods, 0.95),
            TargetWorkload::FromPods(cluster, pods, 0.99)};
  }
};

// Expected fragment of a node in milli-GPU. Hot path of FGD and gpumux scoring: no allocation.
double NodeFragmentation(const NodeState& node, const TargetWorkload& target);

// The same, as if a pod of `shape` were placed on the node as Cluster::Place would place it (on GPU
// `gpu` if it shares one).
double NodeFragmentationAfter(const NodeState& node, const TargetWorkload& target,
                              const Shape& shape, int gpu);

// gpumux's capacity fragment: for each target shape, the node's free GPU milli that pods of that
// shape could not use if the node were filled with them until GPU room or CPU ran out (FGD's
// measure asks only whether the next such pod fits). Catches GPUs stranded by exhausted CPU and
// crumbs left by repeated fills. Same weighting over the target workload; hot path, no allocation.
double NodeCapacityFragmentation(const NodeState& node, const TargetWorkload& target);
double NodeCapacityFragmentationAfter(const NodeState& node, const TargetWorkload& target,
                                      const Shape& shape, int gpu);

}  // namespace gpumux::fleet
