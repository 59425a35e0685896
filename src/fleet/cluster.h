// The cluster being filled: each node's free CPU, memory and per-GPU free milli-GPU, and which
// kinds of GPU pods it already runs. The placement core shared by every policy, the trace simulator
// and (later) the Slurm and Kubernetes integrations. Not thread-safe; copy one per simulation.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "fleet/trace.h"

namespace gpumux::fleet {

// A set of GPU models, as bits of the cluster's model index. All ones = any model.
using ModelMask = uint64_t;
inline constexpr ModelMask kAnyModel = ~ModelMask{0};

// What placement needs to know of a pod. Pods with equal shapes are interchangeable.
struct Shape {
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int num_gpu = 0;
  int gpu_milli = 0;
  ModelMask models = kAnyModel;

  bool cpu_only() const { return num_gpu == 0; }
  bool shares_gpu() const { return num_gpu == 1 && gpu_milli < kMilli; }
  int64_t total_gpu_milli() const { return int64_t(num_gpu) * gpu_milli; }
  bool operator==(const Shape&) const = default;
};

struct NodeState {
  int64_t cpu_left = 0, cpu_capacity = 0;
  int64_t memory_left = 0;
  int gpus = 0;
  int model = -1;  // index into Cluster::models(); -1 without GPUs
  std::array<int16_t, kMaxGpusPerNode> gpu_left{};
  int gpu_left_total = 0;
  int free_gpus = 0;     // GPUs with all 1000 milli free
  uint32_t version = 0;  // bumped on every placement (score caches key on it)
  // GPU pods running here by kind: -1 = sharing pods, N = pods of N whole GPUs.
  std::vector<std::pair<int, int>> affinity;  // (kind, count)
};

class Cluster {
 public:
  explicit Cluster(const std::vector<NodeSpec>& nodes);

  int size() const { return int(nodes_.size()); }
  const NodeState& node(int i) const { return nodes_[i]; }
  const std::vector<std::string>& models() const { return models_; }
  int64_t gpu_capacity_milli() const { return capacity_milli_; }
  int total_gpus() const { return int(capacity_milli_ / kMilli); }
  int64_t used_gpu_milli() const { return used_milli_; }

  // The mask of a gpu_spec list (empty = any). Models no node has match nothing.
  ModelMask MaskOf(const std::vector<std::string>& gpu_spec) const;
  Shape ShapeOf(const PodSpec& pod) const;

  // Whether the node can host the pod: CPU, memory, GPU model and GPU room (some GPU with enough
  // free milli for a sharing pod; num_gpu fully free GPUs for a whole-GPU pod).
  bool Fits(int node, const Shape& shape) const;

  // Places a pod that Fits. A sharing pod goes on GPU `gpu` (which must have room); whole-GPU pods
  // take the lowest-index fully free GPUs, as the artifact does. Returns the GPUs it took, one bit
  // each (0 for a CPU-only pod), for Remove.
  uint32_t Place(int node, const Shape& shape, int gpu);
  // Takes away a pod that Place put on `node` and that took `gpus` (Place's answer): its CPU,
  // memory and GPU room are free again.
  void Remove(int node, const Shape& shape, uint32_t gpus);

 private:
  std::vector<NodeSpec> specs_;
  std::vector<NodeState> nodes_;
  std::vector<std::string> models_;
  int64_t capacity_milli_ = 0;
  int64_t used_milli_ = 0;
};

}  // namespace gpumux::fleet
