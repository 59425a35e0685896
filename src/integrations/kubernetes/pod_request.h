// What a Kubernetes pod asks of gpumux, read from its v1.Pod JSON: per container, GiB of GPU
// memory, percent of a GPU's compute, or whole GPUs (extended resources, in `limits` or
// `requests`), its priority (annotation), and where the scheduler extender placed it (annotation).
// Shared by the scheduler extender, which places the pod, and the device plugin, which admits it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpumux::k8s {

// Extended resources, counted by the kubelet as devices of the gpumux device plugin.
inline constexpr char kMemoryResource[] = "gpumux.io/gpu-memory";    // one per GiB
inline constexpr char kComputeResource[] = "gpumux.io/gpu-compute";  // one per percent
inline constexpr char kGpuResource[] = "gpumux.io/gpu";              // one per whole GPU
// Pod annotations: the scheduler extender's choice of GPU ("3", or "3.1" for MIG instance 1 of
// GPU 3), and the tenant priority the pod asks for ("high", "normal" or "low").
inline constexpr char kAssignedAnnotation[] = "gpumux.io/assigned";
inline constexpr char kPriorityAnnotation[] = "gpumux.io/priority";

// A GPU or one MIG instance of it: what one pod's tenants are admitted on.
struct SlotId {
  int gpu = 0;
  int instance = -1;  // -1: the whole GPU
  // "3" or "3.1"; Parse throws Error (bad input) for anything else.
  std::string ToString() const;
  static SlotId Parse(const std::string& text);
  bool operator==(const SlotId&) const = default;
  auto operator<=>(const SlotId&) const = default;
};

struct ContainerRequest {
  std::string name;
  int index = 0;  // its place among the pod's containers, init containers first
  int memory_gib = 0;
  int compute_percent = 0;
  int whole_gpus = 0;
  // securityContext.runAsUser of the container, else of the pod; -1 when neither sets it. The
  // tenant's owner: only processes of that uid (or root) may draw on its memory.
  int64_t run_as_user = -1;
};

struct PodRequest {
  std::string uid, ns, name;
  std::string node;   // spec.nodeName; empty until bound
  std::string phase;  // status.phase
  std::string priority = "normal";
  std::optional<SlotId> assigned;
  std::vector<ContainerRequest> containers;  // only those that ask gpumux for something

  bool asks_gpumux() const { return !containers.empty(); }
  bool finished() const { return phase == "Succeeded" || phase == "Failed"; }
  // The pod's total, which the extender fits on one GPU (all its containers share it).
  int memory_gib() const;
  int compute_percent() const;
  bool whole_gpu() const;
};

// The most gpu-memory (GiB) one pod may ask in all: more than any GPU holds.
inline constexpr int64_t kMaxPodMemoryGib = 4096;

// Reads a v1.Pod. Throws Error (bad input) naming the field for a request gpumux cannot honour:
// a non-integer or negative quantity, more than one whole GPU, whole GPUs mixed with shares,
// compute without memory, more than 100% compute (in a container or the pod), more than
// kMaxPodMemoryGib, an unknown priority, or a container gpumuxd would not admit as a tenant
// (node::CheckTenant: a high-priority one with a compute cap).
PodRequest ParsePod(const nlohmann::json& pod);

}  // namespace gpumux::k8s
