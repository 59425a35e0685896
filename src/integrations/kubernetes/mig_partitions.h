// Dynamic MIG for the DRA driver (`--dynamic-mig`): a GPU in MIG mode is advertised as what it
// could still make, as Kubernetes' partitionable devices (resource.k8s.io/v1 counter sets) define
// it. Each placement of each profile is a device ("gpu-0-mig-1g-10gb-at-6"), made or not, that
// consumes counters of its GPU's counter set ("gpu-0-mig": one counter per memory slice, and the
// compute slices), so that the scheduler allocates only placements that fit together; the driver
// makes an instance when a claim allocated it is prepared, and removes one left idle.
//
// Instances that hold tenants other than this driver's claims (admitted by hand, a plan, the
// device plugin) are not the scheduler's to give: neither they nor any placement overlapping them
// is offered, and their compute slices are taken off the counter set. Profiles holding the media
// engines ("+me") are not offered (at most one may exist per GPU, which counters cannot say).
// Pure functions over gpumuxd's answers; thread-safe.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpumux::k8s {

struct MigPlacement {
  std::string profile;  // "1g.10gb"
  int start = 0;
  int memory_slices = 0, compute_slices = 0;
  uint64_t memory_bytes = 0;

  std::string Entry() const {
    return profile + "@" + std::to_string(start);
  }  // as gpumuxd takes it
  bool Overlaps(const MigPlacement& o) const {
    return start < o.start + o.memory_slices && o.start < start + memory_slices;
  }
};

// One GPU in MIG mode as gpumuxd describes it (GET /v1/gpus, with its "mig_geometry"), and which
// tenants (GET /v1/tenants) are on each of its instances.
struct MigGpu {
  struct Instance {
    int index = 0;
    MigPlacement placement;
    std::string uuid;  // a real GPU's MIG device
    int claim_tenants = 0, other_tenants = 0;
    // Not the driver's to replace or remove (it did not make it): when idle it is offered itself,
    // but no placement overlapping it.
    bool kept = false;
    bool idle() const { return claim_tenants == 0 && other_tenants == 0; }
  };
  int gpu = 0;
  std::string model;
  int slots = 0, compute_slices = 0;
  std::vector<MigPlacement> placements;  // every placement of every profile but "+me" ones
  std::vector<Instance> instances;

  // Null for a GPU not in MIG mode, or whose answer has no geometry. Throws Error (bad input) for
  // an answer that does not read as gpumuxd's.
  static std::optional<MigGpu> Read(const nlohmann::json& gpu, const nlohmann::json& tenants);

  // The counter set the GPU's devices consume from: "gpu-N-mig".
  nlohmann::json CounterSet() const;
  // Its devices: every placement neither held by others nor overlapping one that is, nor
  // overlapping a kept instance other than at its own placement.
  std::vector<nlohmann::json> Devices() const;
  // The placement a device name of this GPU stands for, if it is one it offers.
  std::optional<MigPlacement> Offered(const std::string& device) const;
  // The instance at `p`, if made.
  const Instance* InstanceAt(const MigPlacement& p) const;
  // The layout (PUT /v1/gpus/N "layout") that makes `p`: the instances there now, less the idle
  // ones it overlaps that are not kept. gpumuxd keeps the busy ones where they are and refuses if
  // `p` overlaps one.
  std::vector<std::string> LayoutMaking(const MigPlacement& p) const;
  // The layout without the instances numbered in `indices`.
  std::vector<std::string> LayoutWithout(const std::set<int>& indices) const;
};

// "gpu-0-mig-1g-10gb-at-6": the device name of placement `p` of GPU `gpu`.
std::string MigPlacementDevice(int gpu, const MigPlacement& p);
// The GPU of a placement device name; nullopt for a name of another form.
std::optional<int> GpuOfMigPlacementDevice(const std::string& device);

}  // namespace gpumux::k8s
