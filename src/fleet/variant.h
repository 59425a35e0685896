// Trace variants: new pod lists sampled from a pod list, emphasizing certain kinds of workloads, as
// the openb trace's published variants were made from its default list ("sampled from the default
// one, emphasizing certain types of workloads"). A policy chosen on a handful of files proves
// little; variants let it be chosen on some and checked on others.
//
// Pods fall into four classes: CPU-only, GPU-sharing (one GPU, gpu_milli < 1000), one whole GPU,
// and multi-GPU. Each knob sets one share; what no knob sets keeps the source's proportions:
//   sharing, multi_gpu   the share of the GPU request (sum of num_gpu x gpu_milli) from that class;
//                        the other GPU classes divide the rest in the source's proportion. With
//                        kReplace the number of GPU pods stays (as gpushare40 was made); with kAdd
//                        the pods of the classes no knob sets stay and the emphasized class grows
//                        or shrinks (as multigpu30 was made).
//   cpu_only             the share of all pods that are CPU-only; GPU pods stay (as cpu100).
//   gpu_spec             the share of GPU pods constrained to GPU models (as gpuspec20): one
//                        model for 86% of them, two for 9%, three to five for the rest (that
//                        file's proportions), drawn from the node list's models weighted by their
//                        GPU count; the other GPU pods are unconstrained.
// Pods of a class are drawn without replacement while the source has enough, then with replacement.
// Pure function of its inputs and seed; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "fleet/trace.h"

namespace gpumux::fleet {

struct VariantKnobs {
  enum class Growth { kReplace, kAdd };
  std::optional<double> sharing, multi_gpu, cpu_only, gpu_spec;  // shares in [0, 1)
  Growth growth = Growth::kReplace;
  uint64_t seed = 42;
};

// Throws Error (bad input) for a share outside [0, 1), sharing + multi-GPU of 1 or more, a source
// without a pod of a class a knob asks for, or gpu_spec without a node model to draw.
std::vector<PodSpec> MakeVariant(const std::vector<PodSpec>& source,
                                 const std::vector<NodeSpec>& nodes, const VariantKnobs& knobs);

// Writes pods as a pod list CSV that LoadPods reads
// (name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec).
void WritePods(std::ostream& out, const std::vector<PodSpec>& pods);

// How a pod list divides into the classes above: shares of pods and of the GPU request.
struct PodClassShares {
  double cpu_only = 0, sharing = 0, whole = 0, multi_gpu = 0;            // of all pods
  double sharing_request = 0, whole_request = 0, multi_gpu_request = 0;  // of the GPU request
  double gpu_spec = 0;                                                   // of GPU pods
};
PodClassShares ClassShares(const std::vector<PodSpec>& pods);

}  // namespace gpumux::fleet
