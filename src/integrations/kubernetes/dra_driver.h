// The core of gpumux's DRA driver (Kubernetes 1.34+, resource.k8s.io/v1), without its gRPC
// transport (dra_plugin_server.h). Driver "gpu.gpumux.io":
//   - publishes this node's ResourceSlice: one device per healthy GPU ("gpu-0") or MIG instance
//     ("gpu-0-mig-1") that gpumuxd owns, with attributes (index, mode: mig|mps|timeslice, model,
//     profile, uuid) and capacity (memory, compute), so that DeviceClasses select by sharing mode;
//   - keeps the claims allocated its devices on this node from a list and a watch of every
//     ResourceClaim (informer.h; a claim has no node field to select on, so the watch sees the
//     cluster's claims and keeps only this node's);
//   - prepares a claim allocated one of its devices, or several (whole time-sliced GPUs or MIG
//     instances: one tenant over all of them, a memory quota on each): reads the claim from that
//     cache (from the API server when the cache does not have it, or has it reserved for no pod),
//     admits its gpumuxd tenant (pod_tenants.h: "k8s-claim-<uid>") with the claim's parameters (the
//     opaque config {"memory", "compute", "priority", "owner_uid"} of the claim or its DeviceClass,
//     else the capacity the allocation consumed, else the whole device; a claim reserved for one
//     pod is bound to its cgroup and, unless the config names a uid, owned by the uid of its first
//     process) and writes a CDI spec (<cdi-dir>/gpumux.io-tenant_<uid>.json, container_edits.h)
//     whose device the kubelet hands to the runtime;
//   - unprepares it: removes the tenant (refused while its processes run) and the CDI spec;
//   - with `dynamic_mig`, advertises each GPU in MIG mode as what it could still make (one device
//     per placement, consuming counters of the GPU's counter set: mig_partitions.h), makes the
//     instance a claim was allocated when it prepares it, and removes the instances it made once
//     left idle (no tenant) for `mig_idle_grace` (mig_maker.h: it remembers which across
//     restarts; an instance it did not make is never removed). Its slices: "<node>-gpu.gpumux.io"
//     (the other GPUs' devices),
//     "<node>-gpu.gpumux.io-counters" (the counter sets; several, 8 sets each, past 8 such GPUs)
//     and "<node>-gpu.gpumux.io-gpu-N" per such GPU, all one pool.
//
// Thread-safety: every call may come from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "integrations/kubernetes/informer.h"
#include "integrations/kubernetes/kube_api.h"
#include "integrations/kubernetes/mig_maker.h"
#include "integrations/kubernetes/pod_request.h"
#include "node/agent/agent_client.h"

namespace gpumux::k8s {

inline constexpr char kDraDriverName[] = "gpu.gpumux.io";

struct DraDriverConfig {
  std::string agent_socket = "/run/gpumux/gpumuxd.sock";
  std::string node_name;
  std::string apiserver = "in-cluster";  // see ResolveApiServer
  std::string cdi_dir = "/var/run/cdi";
  std::string plugin_dir = "/var/lib/kubelet/plugins/gpu.gpumux.io";  // dra.sock
  std::string registry_dir = "/var/lib/kubelet/plugins_registry";     // gpu.gpumux.io-reg.sock
  bool dynamic_mig = false;                                           // see above
  std::chrono::milliseconds mig_idle_grace = std::chrono::minutes(5);
};

struct PreparedDevice {
  std::vector<std::string> request_names;
  std::string pool, device;
  std::vector<std::string> cdi_device_ids;
  // The allocation's shareID (Kubernetes 1.34+, DRAConsumableCapacity): set when several claims
  // share the device, each its own share; empty otherwise.
  std::string share_id;
};

class DraDriver {
 public:
  explicit DraDriver(DraDriverConfig config);

  // The ResourceSlices of this node's pool for gpumuxd's answers to GET /v1/gpus and GET
  // /v1/tenants, at pool generation `generation`: one, or with `dynamic_mig` and GPUs in MIG mode
  // those named above.
  // With dynamic_mig, `made` names the MIG instances this driver made (MadeMigInstances::Key);
  // the others are kept (MigGpu::Instance::kept).
  static std::vector<nlohmann::json> ResourceSlices(const std::string& node,
                                                    const nlohmann::json& gpus,
                                                    const nlohmann::json& tenants, bool dynamic_mig,
                                                    int64_t generation,
                                                    const std::set<std::string>& made = {});
  // Reads gpumuxd's GPUs and publishes the slices when they changed (a new generation when the
  // slices themselves change, and those no longer needed deleted). Returns whether it did. Throws
  // Error (unavailable).
  bool PublishResourceSlice();
  // With dynamic_mig: removes the MIG instances this driver made that have been idle (no tenant)
  // for mig_idle_grace, as seen by the calls before. Returns them ("GPU N PROFILE@START"). Throws
  // Error (unavailable); an instance gpumuxd still refuses to remove (a tenant came) stays.
  std::vector<std::string> RemoveIdleMigInstances();

  // Keeps the claims allocated this driver's devices on this node (see above) until `stop`.
  // Blocks; Prepare reads the API server itself while nothing runs this.
  void WatchClaims(const std::atomic<bool>& stop);
  // How many claims the watch keeps now (this node's, allocated).
  size_t claims_kept() const;

  // Prepares claim `uid` (namespace `ns`, name `name`). Returns its devices (none when the claim
  // has no device of this driver on this node). Throws Error: bad input for parameters gpumux
  // cannot honour, does-not-fit when gpumuxd refuses the tenant, conflict for a claim whose UID is
  // not `uid` (replaced since).
  std::vector<PreparedDevice> Prepare(const std::string& ns, const std::string& uid,
                                      const std::string& name);
  // Removes claim `uid`'s tenant and CDI spec, and forgets the claim's kept copy (a claim may be
  // allocated again, elsewhere or differently); nothing to remove is no error. Throws Error
  // (conflict) while the tenant's processes run.
  void Unprepare(const std::string& uid);

  const DraDriverConfig& config() const { return config_; }
  std::string CdiPath(const std::string& claim_uid) const;

 private:
  // Claim `uid` as the watch keeps it, if it does and the claim is reserved for a pod; else as the
  // API server answers now. Throws Error.
  nlohmann::json Claim(const std::string& ns, const std::string& uid, const std::string& name);
  // The allocation results of `claim` that are devices of this driver on this node.
  std::vector<const nlohmann::json*> ResultsHere(const nlohmann::json& claim) const;
  // The GPU or instance `device` is; a MIG placement device (dynamic_mig) is made first if it is
  // not. Call with mig_->Lock() held (dynamic_mig). Throws Error naming `where`.
  SlotId SlotOf(const std::string& device, const std::string& where);

  DraDriverConfig config_;
  agent::AgentClient agent_;
  KubeApi api_;
  Informer claims_informer_;
  mutable std::mutex claims_mu_;
  std::map<std::string, nlohmann::json> claims_;  // this node's allocated claims by UID
  std::mutex mu_;
  std::string published_;
  std::vector<std::string> published_names_;
  int64_t generation_ = 0;
  std::optional<MigMaker> mig_;  // with dynamic_mig: <plugin_dir>/mig-instances-made.json
};

}  // namespace gpumux::k8s
