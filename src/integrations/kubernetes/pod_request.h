// What a Kubernetes pod asks of gpumux, read from its v1.Pod JSON: per container, GiB of GPU
// memory, percent of a GPU's compute, or whole GPUs (extended resources, in `limits` or
// `requests`), on how many GPUs (annotation), its priority (annotation), and where the scheduler
// extender placed it (annotation).
//
// A pod of several GPUs (a tensor-parallel server): `gpumux.io/gpu-count: "N"` spreads each
// container's gpu-memory and gpu-compute evenly over N GPUs of one node (so each must divide by
// N: 40 gpu-memory over 2 GPUs is 20 GiB on each), and `gpumux.io/gpu: N` asks N whole GPUs. Each
// container is then one tenant over all N.
// A pod may instead ask one MIG instance of a profile made for it on demand (a device plugin with
// --dynamic-mig): `gpumux.io/mig-1g.10gb: 1` in one container, and nothing else of gpumux. The
// extender assigns it a GPU and a placement there (annotations), the device plugin makes the
// instance and admits the container on it, its quota the instance's memory.
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
// "gpumux.io/mig-1g.10gb": one MIG instance of that profile, made for the pod (one device per
// placement of the profile on each GPU whose instances are made on demand).
inline constexpr char kMigResourcePrefix[] = "gpumux.io/mig-";
std::string MigResource(const std::string& profile);
// The profile of a MIG resource name; empty for another name or a profile that is not one
// ("1g.10gb", "3g.40gb", "1g.12gb+me": digits, 'g', '.', digits, "gb", optional "+me").
std::string MigProfileOf(const std::string& resource);
// Pod annotations: the scheduler extender's choice of GPU ("3", or "3.1" for MIG instance 1 of
// GPU 3), and the tenant priority the pod asks for ("high", "normal" or "low").
inline constexpr char kAssignedAnnotation[] = "gpumux.io/assigned";
inline constexpr char kPriorityAnnotation[] = "gpumux.io/priority";
// Where on its assigned GPU the extender placed a pod asking a MIG profile: "1g.10gb@6" (the
// profile, and the first memory slice of the instance to make).
inline constexpr char kMigPlacementAnnotation[] = "gpumux.io/mig-placement";
// How many GPUs the pod's shares are spread over ("2"); 1 when absent.
inline constexpr char kGpuCountAnnotation[] = "gpumux.io/gpu-count";
// The most GPUs one pod may span (a node's GPUs, as far as tensor parallelism goes).
inline constexpr int kMaxPodGpus = 8;

// A GPU or one MIG instance of it: what one pod's tenants are admitted on.
struct SlotId {
  int gpu = 0;
  int instance = -1;  // -1: the whole GPU
  // "3" or "3.1"; Parse throws Error (bad input) for anything else.
  std::string ToString() const;
  static SlotId Parse(const std::string& text);
  // "2,3" for a pod of several GPUs; ParseList throws Error (bad input) for an empty list, a bad
  // entry or a slot named twice.
  static std::string ListToString(const std::vector<SlotId>& slots);
  static std::vector<SlotId> ParseList(const std::string& text);
  bool operator==(const SlotId&) const = default;
  auto operator<=>(const SlotId&) const = default;
};

struct ContainerRequest {
  std::string name;
  int index = 0;  // its place among the pod's containers, init containers first
  // As the kubelet counts them: over all the pod's GPUs.
  int memory_gib = 0;
  int compute_percent = 0;
  int whole_gpus = 0;
  // securityContext.runAsUser of the container, else of the pod; -1 when neither sets it. The
  // tenant's owner: only processes of that uid may draw on its memory (-1: the image's user, which
  // gpumuxd learns from the container's first process).
  int64_t run_as_user = -1;
  std::string mig_profile{};  // the MIG instance it asks for ("1g.10gb"), if it does (one)
};

struct PodRequest {
  std::string uid, ns, name;
  std::string node;   // spec.nodeName; empty until bound
  std::string phase;  // status.phase
  std::string priority = "normal";
  int gpu_count = 1;             // the GPUs its shares are spread over, or its whole GPUs
  std::vector<SlotId> assigned;  // gpu_count slots once the extender placed it; else empty
  std::vector<ContainerRequest> containers;  // only those that ask gpumux for something
  std::string mig_profile;  // the MIG instance one of its containers asks for, if one does
  int mig_start = -1;       // with assigned: where the extender placed that instance

  bool asks_gpumux() const { return !containers.empty(); }
  bool finished() const { return phase == "Succeeded" || phase == "Failed"; }
  // What the pod's containers take together on each of its GPUs, which the extender fits there.
  int memory_gib_per_gpu() const;
  int compute_percent_per_gpu() const;
  bool whole_gpu() const;
  bool asks_mig() const { return !mig_profile.empty(); }
};

// The most gpu-memory (GiB) one pod may ask on one GPU: more than any GPU holds.
inline constexpr int64_t kMaxPodMemoryGib = 4096;

// Reads a v1.Pod. Throws Error (bad input) naming the field for a request gpumux cannot honour:
// a non-integer or negative quantity, whole GPUs asked by two containers or mixed with shares,
// more than kMaxPodGpus GPUs, shares that do not divide by the pod's GPUs, compute without
// memory, more than 100% compute of a GPU (in a container or the pod), more than kMaxPodMemoryGib
// on a GPU, an unknown priority, an assignment of another number of GPUs than the pod asks (or of
// MIG instances to a pod of several), or a container gpumuxd would not admit as a tenant
// (node::CheckTenant: a high-priority one with a compute cap); for a MIG profile: more than one
// instance, another gpumux resource beside it, a pod of several GPUs, an assignment of a MIG
// instance, or a placement annotation of another profile.
PodRequest ParsePod(const nlohmann::json& pod);

}  // namespace gpumux::k8s
