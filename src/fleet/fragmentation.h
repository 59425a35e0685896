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
//
// gpumux weighs the shapes by scarcity instead of popularity alone: a shape's probability divided
// by the share of the fleet's GPUs it may use (its gpu_spec models'). Free GPU milli that a shape
// able to use only 1/7 of the fleet cannot use is a seventh of its chances lost, not one of many,
// so a pod that may go anywhere is steered away from the GPUs that constrained shapes need.
#pragma once

#include <array>
#include <vector>

#include "fleet/cluster.h"

namespace gpumux::fleet {

struct TargetClass {
  Shape shape;    // memory_mib is 0: the measure ignores memory
  int count = 0;  // pods of this shape in the trace
  double probability = 0;
  double weight = 0;  // what the measures weigh its fragment by: probability, or by scarcity
};

// How a target workload weighs its shapes (see above).
enum class ClassWeight {
  kPopularity,  // probability (FGD)
  kScarcity,    // probability / share of the fleet's GPUs it may use (1 for CPU-only shapes and
                // for shapes that no node's model matches)
};

class TargetWorkload {
 public:
  // The most popular shapes of `pods` covering `coverage` of them (0 < coverage <= 1). Ties in
  // popularity are ordered as the artifact orders them (larger CPU, milli, GPU count, spec first).
  static TargetWorkload FromPods(const Cluster& cluster, const std::vector<PodSpec>& pods,
                                 double coverage = 0.95,
                                 ClassWeight weighting = ClassWeight::kPopularity);
  const std::vector<TargetClass>& classes() const { return classes_; }

  // The CPU milli its GPU shapes request per milli-GPU, averaged by probability: what a node's free
  // GPUs will need of its CPU if pods keep coming in this mix. 0 if it has no GPU shape.
  double cpu_per_gpu_milli() const { return cpu_per_gpu_milli_; }

  // The mean GPU request (milli) of its GPU shapes, averaged by probability. 0 if it has none.
  double mean_gpu_request_milli() const { return mean_gpu_request_milli_; }

  // The classes as the measures read them on a node of GPU model `model` (an index into
  // Cluster::models()): the summed weight of those that cannot use its GPUs (CPU-only shapes and
  // other models), whose fragment there is all of its free GPU milli, and the others merged by
  // shape (a shape that names the model and one that names any model count as one there).
  struct ForModel {
    double unusable_weight = 0;
    std::vector<TargetClass> usable;  // shape.models is kAnyModel; weight summed
  };
  const ForModel& for_model(int model) const { return by_model_[size_t(model)]; }

 private:
  std::vector<TargetClass> classes_;
  std::vector<ForModel> by_model_;  // one per GPU model of the cluster
  double cpu_per_gpu_milli_ = 0;
  double mean_gpu_request_milli_ = 0;
};

// The target workloads the policies measure against, built once per trace.
struct TargetWorkloads {
  TargetWorkload fgd;     // the shapes covering 95% of pods, as FGD's artifact builds it
  TargetWorkload scarce;  // the same shapes weighed by scarcity: gpumux's FGD term
  TargetWorkload wide;    // 99%, by scarcity: gpumux's capacity tie-break also sees rarer shapes
                          // (e.g. pods that fit only one node type), which protects their nodes
  static TargetWorkloads FromPods(const Cluster& cluster, const std::vector<PodSpec>& pods) {
    return {TargetWorkload::FromPods(cluster, pods, 0.95),
            TargetWorkload::FromPods(cluster, pods, 0.95, ClassWeight::kScarcity),
            TargetWorkload::FromPods(cluster, pods, 0.99, ClassWeight::kScarcity)};
  }
};

// Expected fragment of a node in milli-GPU. Hot path of FGD and gpumux scoring: no allocation.
double NodeFragmentation(const NodeState& node, const TargetWorkload& target);

// The same, as if a pod of `shape` were placed on the node as Cluster::Place would place it (on GPU
// `gpu` if it shares one).
double NodeFragmentationAfter(const NodeState& node, const TargetWorkload& target,
                              const Shape& shape, int gpu);

// gpumux's CPU-stranding measure: the node's free GPU milli that its free CPU could not feed if
// pods came in the target workload's mix, max(0, free GPU milli - free CPU / cpu_per_gpu_milli()).
// FGD's measure asks only whether the next pod of each shape fits, so it does not see CPU taken by
// CPU-only and CPU-heavy pods until the node's last cores are gone. 0 if the target has no GPU
// shape. Hot path, no allocation; `After` is the same after placing a pod of `shape` (on any GPU).
double NodeStrandedGpu(const NodeState& node, const TargetWorkload& target);
double NodeStrandedGpuAfter(const NodeState& node, const TargetWorkload& target,
                            const Shape& shape);

// gpumux's capacity fragment: for each target shape, the node's free GPU milli that pods of that
// shape could not use if the node were filled with them until GPU room or CPU ran out (FGD's
// measure asks only whether the next such pod fits). Catches GPUs stranded by exhausted CPU and
// crumbs left by repeated fills. Same weighting over the target workload; hot path, no allocation.
double NodeCapacityFragmentation(const NodeState& node, const TargetWorkload& target);
double NodeCapacityFragmentationAfter(const NodeState& node, const TargetWorkload& target,
                                      const Shape& shape, int gpu);

// NodeFragmentationAfter and NodeCapacityFragmentationAfter of a GPU-sharing `shape` on each GPU
// of the node at once: after[g] for every g < node.gpus (meaningless where the pod does not fit,
// gpu_left[g] < shape.gpu_milli). Equal to the one-GPU calls bit for bit: a placement changes one
// GPU's term, so each class's counts are taken once per node and adjusted per GPU, O(GPUs x
// classes) instead of O(GPUs^2 x classes). Hot path of FGD and gpumux scoring, no allocation.
using PerGpu = std::array<double, kMaxGpusPerNode>;
void NodeFragmentationAfterEachGpu(const NodeState& node, const TargetWorkload& target,
                                   const Shape& shape, PerGpu* after);
void NodeCapacityFragmentationAfterEachGpu(const NodeState& node, const TargetWorkload& target,
                                           const Shape& shape, PerGpu* after);

}  // namespace gpumux::fleet
