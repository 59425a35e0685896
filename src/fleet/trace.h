// Cluster traces in the openb format (Alibaba cluster-trace-gpu-v2023): the node list and the pod
// list. Loading is strict: an unknown or missing column, a row with the wrong number of fields, a
// negative number, gpu_milli over 1000 or a GPU request that is not one of the three kinds
// (CPU-only, a share of one GPU, whole GPUs) stops the load with Error (bad input) naming file,
// line and reason. Nothing is skipped silently.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpumux::fleet {

inline constexpr int kMilli = 1000;  // one whole GPU
inline constexpr int kMaxGpusPerNode = 16;

struct NodeSpec {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int gpus = 0;
  std::string model;  // GPU model; empty when the node has no GPU
};

struct PodSpec {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int num_gpu = 0;
  int gpu_milli = 0;                  // per GPU; 1000 = whole
  std::vector<std::string> gpu_spec;  // allowed models; empty = any
  int64_t creation_time = -1;         // seconds; -1 where the trace has none
  int64_t deletion_time = -1;

  bool cpu_only() const { return num_gpu == 0; }
  bool shares_gpu() const { return num_gpu == 1 && gpu_milli < kMilli; }
  int64_t total_gpu_milli() const { return int64_t(num_gpu) * gpu_milli; }
};

// Columns: sn,cpu_milli,memory_mib,gpu,model (in any order).
std::vector<NodeSpec> LoadNodes(const std::string& path);
// Columns: name,cpu_milli,memory_mib,num_gpu,gpu_milli and optionally gpu_spec, qos, pod_phase,
// creation_time, deletion_time, scheduled_time (qos, pod_phase and scheduled_time are read past,
// not used; the times are read when given, for the departures experiment).
std::vector<PodSpec> LoadPods(const std::string& path);

}  // namespace gpumux::fleet
