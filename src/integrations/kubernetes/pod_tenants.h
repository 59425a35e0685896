// The one mapping between Kubernetes pods and gpumuxd tenants, for the device plugin (and the DRA
// driver to come): each container of a pod that asks gpumux for something is tenant
// "k8s-<pod UID>-<container index>" on the GPU the scheduler extender assigned the pod to.
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

#include "integrations/kubernetes/pod_request.h"

namespace gpumux::k8s {

inline constexpr char kTenantPrefix[] = "k8s-";

std::string TenantId(const std::string& pod_uid, int container_index);
// The pod UID a tenant id names; nullopt for a tenant that is not a pod's.
std::optional<std::string> PodOfTenant(const std::string& tenant_id);

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
