// A Kubernetes node's GPUs as gpumux shares them: each GPU or MIG instance (a slot) with its
// memory, and what the pods placed there use. The device plugin publishes the slots on its Node
// (annotation gpumux.io/gpus, JSON); the scheduler extender reads them and keeps the use.
//
// A slot holds either one pod's whole GPU, or shares: pods whose memory sums to at most the slot's
// and whose compute sums to at most 100%. A MIG instance takes no compute share (its slices are its
// compute) and is never given whole. A pod of several GPUs takes that many whole, time-sliced GPUs
// of one node (gpumuxd runs such a tenant on neither MIG instances nor MPS GPUs), each holding its
// per-GPU share.
//
// A GPU in MIG mode whose instances the device plugin makes on demand (--dynamic-mig) is not a
// slot but a MIG room (annotation gpumux.io/mig-rooms): the placements it could make, and the
// memory slices held there. A pod asking a MIG profile takes one placement of it, alone; no
// placement overlapping a taken one is given. Thread-compatible.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "integrations/kubernetes/pod_request.h"

namespace gpumux::k8s {

inline constexpr char kNodeGpusAnnotation[] = "gpumux.io/gpus";
inline constexpr char kMigRoomsAnnotation[] = "gpumux.io/mig-rooms";

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

// A GPU whose MIG instances are made for pods on demand: where they could go and what is taken.
struct MigRoom {
  static constexpr int kMaxSlices = 16;
  struct Placement {
    std::string profile;  // "1g.10gb"
    int start = 0, memory_slices = 1;
    uint32_t Mask() const { return ((1u << memory_slices) - 1) << start; }
    bool operator==(const Placement&) const = default;
  };
  int gpu = 0;
  bool healthy = true;
  int slices = 0;                     // memory slices
  std::vector<Placement> placements;  // every placement of every profile it could make
  // Memory slices the node holds (published): instances with tenants, and instances the plugin
  // did not make (an operator's, a plan's), which are slots of their own.
  uint32_t held = 0;
  // What is placed here: pods per memory slice.
  std::array<int, kMaxSlices> pods_on_slice{};

  uint32_t Taken() const;
  bool Free(const Placement& p) const { return healthy && !(Taken() & p.Mask()); }
  // What taking `p` costs: the memory slices of every free placement it overlaps, itself
  // included (the fewer and smaller the placements it rules out, the lower).
  int Loss(const Placement& p) const;
  // The memory slices of all its placements (Loss's scale).
  int Weight() const;
  // Counts a pod at `p` in (sign +1) or out (-1).
  void Count(const Placement& p, int sign);
  const Placement* Find(const std::string& profile, int start) const;
  bool operator==(const MigRoom&) const = default;
};

// Where a pod asking a MIG profile would go on a node.
struct MigChoice {
  int room = -1, placement = -1;  // indices into mig_rooms() and its placements; -1: none fits
  double score = 0;               // 0..10: 10 rules out nothing else, 0 everything
};

class NodeGpus {
 public:
  NodeGpus() = default;
  explicit NodeGpus(std::vector<Slot> slots, std::vector<MigRoom> mig_rooms = {})
      : slots_(std::move(slots)), mig_rooms_(std::move(mig_rooms)) {}
  // From a v1.Node's gpumux.io/gpus annotation (a node without it has no slots) and its
  // gpumux.io/mig-rooms annotation. Throws Error (bad input) for an annotation that is not a list
  // of {"gpu", "instance"?, "memory_gib", "healthy"?, "mode"?}, or of {"gpu", "healthy"?, "slices",
  // "held": [slice, ...], "placements": [[profile, start, memory slices], ...]}.
  static NodeGpus FromNode(const nlohmann::json& node);
  // The annotations' values for these slots and rooms (their capacity, not their use); the rooms'
  // is empty when there are none.
  std::string Annotation() const;
  std::string MigRoomsAnnotation() const;

  std::vector<Slot>& slots() { return slots_; }
  const std::vector<Slot>& slots() const { return slots_; }
  Slot* Find(const SlotId& id);
  std::vector<MigRoom>& mig_rooms() { return mig_rooms_; }
  const std::vector<MigRoom>& mig_rooms() const { return mig_rooms_; }
  MigRoom* FindMigRoom(int gpu);
  // For a pod asking a MIG profile: the free placement of it that rules out the least else
  // (MigRoom::Loss; on a GPU already partly taken before an empty one). When none is free, `why`
  // says why not, GPU by GPU.
  MigChoice ChooseMigPlacement(const PodRequest& pod, std::string* why = nullptr) const;
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
  std::vector<MigRoom> mig_rooms_;
};

}  // namespace gpumux::k8s
