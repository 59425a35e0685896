// A Kubernetes node's GPUs as gpumux shares them: each GPU or MIG instance (a slot) with its
// memory, and what the pods placed there use. The device plugin publishes the slots on its Node
// (annotation gpumux.io/gpus, JSON); the scheduler extender reads them and keeps the use.
//
// A slot holds either one pod's whole GPU, or shares: pods whose memory sums to at most the slot's
// and whose compute sums to at most 100%. A MIG instance takes no compute share (its slices are its
// compute) and is never given whole. A pod of several GPUs takes that many whole, time-sliced GPUs
// of one node (gpumuxd runs such a tenant on neither MIG instances nor MPS GPUs), each holding its
// per-GPU share. Thread-compatible.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "integrations/kubernetes/pod_request.h"

namespace gpumux::k8s {

inline constexpr char kNodeGpusAnnotation[] = "gpumux.io/gpus";

struct Slot {
  SlotId id;
  int memory_gib = 0;
  bool healthy = true;
  bool mps = false;    // the GPU shares by MPS (published as "mode": "mps")
  std::string uuid{};  // a real GPU's or MIG instance's, for the container runtime (not published)
  // What is placed here.
  int used_memory_gib = 0, used_compute_percent = 0, pods = 0;
  bool held_whole = false;

  bool is_mig() const { return id.instance >= 0; }
  // Whether `pod` fits here now (its share of one of its GPUs); when it does not, `why` says which
  // figure is short.
  bool Fits(const PodRequest& pod, std::string* why = nullptr) const;
  // Counts `pod`'s share of one GPU in (sign +1) or out (-1).
  void Count(const PodRequest& pod, int sign);
  bool operator==(const Slot&) const = default;
};

class NodeGpus {
 public:
  NodeGpus() = default;
  explicit NodeGpus(std::vector<Slot> slots) : slots_(std::move(slots)) {}
  // From a v1.Node's gpumux.io/gpus annotation; a node without it has no slots. Throws Error (bad
  // input) for an annotation that is not a list of {"gpu", "instance"?, "memory_gib", "healthy"?,
  // "mode"?}.
  static NodeGpus FromNode(const nlohmann::json& node);
  // The annotation's value for these slots (their capacity, not their use).
  std::string Annotation() const;

  std::vector<Slot>& slots() { return slots_; }
  const std::vector<Slot>& slots() const { return slots_; }
  Slot* Find(const SlotId& id);
  // Whether `pod` fits on this node now: on one slot, or on as many GPUs as it spans. Hot path of
  // the extender's filter: no allocation.
  bool Fits(const PodRequest& pod) const;
  // The slots `pod` fits on now, in slot order; when fewer than the pod's GPUs, `why` says why not,
  // slot by slot.
  std::vector<int> FittingSlots(const PodRequest& pod, std::string* why) const;
  // For a pod of several GPUs: the slots it would take, best fit (those with the least memory left
  // after it first, so that empty GPUs stay whole for pods that need them); empty when it does
  // not fit.
  std::vector<int> SlotsForPodOfSeveralGpus(const PodRequest& pod) const;

 private:
  std::vector<Slot> slots_;
};

}  // namespace gpumux::k8s
