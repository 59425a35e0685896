// The one mapping between Kubernetes objects and gpumuxd tenants, for the device plugin and the DRA
// driver alike: each container of a pod that asks gpumux resources through the device plugin is
// tenant "k8s-<pod UID>-<container index>" on the GPU (or GPUs) the scheduler extender assigned the
// pod to; each ResourceClaim the DRA driver prepares is tenant "k8s-claim-<claim UID>" (every
// container and pod that shares the claim joins it). Each program removes only its own kind.
//
// The kubelet's Allocate names devices, not the pod (the device plugin API has no pod in it), so
// the container an Allocate is for is found among the pods bound to the node: one assigned by the
// extender, not finished, with a container that asks `resource` in exactly that many units and has
// not been answered for it yet — the earliest container of the earliest such pod (the kubelet
// admits pods one at a time and allocates a pod's containers in order). Which (pod, container,
// resource) were answered is kept in a file, so a restarted plugin carries on where it was.
//
// Thread-compatible.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "integrations/kubernetes/pod_request.h"
#include "node/agent/tenant_request.h"

namespace gpumux::k8s {

inline constexpr char kTenantPrefix[] = "k8s-";

std::string TenantId(const std::string& pod_uid, int container_index);
std::string ClaimTenantId(const std::string& claim_uid);

// Where a gpumuxd admission request puts its tenant: a GPU (and instance) for one slot, several
// places for several, one tenant over all.
void SetTenantSlots(const std::vector<SlotId>& slots, agent::TenantRequest* request);

// The text that names a pod's control group in /proc/PID/cgroup ("pod<UID>"; gpumuxd's check
// takes systemd's underscores for the dashes): the tenant's processes must be in it.
std::string PodCgroup(const std::string& pod_uid);

struct TenantOwner {
  enum Kind { kPodContainer, kClaim } kind;
  std::string uid;     // the pod's or the claim's
  int container = -1;  // kPodContainer: its index
};
// Whose tenant `tenant_id` is; nullopt for one that is not Kubernetes' (Slurm's, an operator's).
std::optional<TenantOwner> OwnerOfTenant(const std::string& tenant_id);

struct ContainerToAllocate {
  PodRequest pod;
  ContainerRequest container;
  std::string tenant;
};

class AllocationRecord {
 public:
  // Loads the record at `path` (none yet: empty). Throws Error (bad input) for a file that is not
  // one, rather than forget what it held.
  explicit AllocationRecord(std::string path);

  // The container an Allocate of `units` of `resource` is for, among `pods` (those bound to this
  // node); nullopt when none waits for it.
  std::optional<ContainerToAllocate> Find(const std::vector<PodRequest>& pods,
                                          const std::string& resource, int units) const;
  // Records that the container was answered for `resource` (written to the file before return).
  void Answered(const ContainerToAllocate& c, const std::string& resource);
  // Forgets pods not in `live_uids`. Returns the UIDs forgotten.
  std::vector<std::string> KeepOnly(const std::set<std::string>& live_uids);

 private:
  void Save() const;
  std::string path_;
  // pod UID → container index → resources answered
  std::map<std::string, std::map<int, std::set<std::string>>> answered_;
};

}  // namespace gpumux::k8s
