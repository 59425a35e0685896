// The core of gpumux's Kubernetes device plugin, without its gRPC transport (device_plugin_server.h
// speaks the kubelet's API v1beta1 around it). It advertises three resources on a node whose GPUs
// gpumuxd owns:
//   gpumux.io/gpu-memory   one device per GiB of each GPU (or MIG instance): "gpu3-gib17",
//   "gpu3.1-gib0" gpumux.io/gpu-compute  one device per percent of each whole GPU: "gpu3-pct42"
//   gpumux.io/gpu          one device per whole GPU: "gpu3"
// and admits each container that the kubelet allocates them to as a gpumuxd tenant (pod_tenants.h)
// on the GPU (or GPUs) the scheduler extender assigned its pod: quota = its GiB (per GPU), cap =
// its percent, priority from the pod's annotation. The answer starts the container under the shim
// (container_edits.h).
//
// With `dynamic_mig`, a GPU in MIG mode is offered as the instances it could still make, one
// resource per profile: gpumux.io/mig-1g.10gb, one device per placement ("gpu-0-mig-1g-10gb-at-6",
// healthy while no busy instance, nor one it did not make, overlaps it), and published as a MIG
// room for the extender (annotation gpumux.io/mig-rooms, node_gpus.h). A container allocated a
// placement gets the instance made there (mig_maker.h; idle instances it made that overlap it are
// removed, busy ones stay) and is admitted on it, its quota the instance's memory; an instance it
// made left idle for `mig_idle_grace` is removed (RemoveIdleMigInstances). Instances it did not
// make stay slots as without it.
//
// A tenant goes when its pod does: every poll the plugin lists the node's pods (the API server;
// the kubelet's pod-resources API names no pod UID, and gpumuxd's dead-process reclaim frees memory
// but cannot tell a restarting container from a pod that is gone) and removes the tenants of pods
// that are gone or finished (gpumuxd refuses while processes still run; the next poll retries).
//
// Thread-safety: every call may come from any thread (one lock inside).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "integrations/kubernetes/container_edits.h"
#include "integrations/kubernetes/informer.h"
#include "integrations/kubernetes/kube_api.h"
#include "integrations/kubernetes/mig_maker.h"
#include "integrations/kubernetes/node_gpus.h"
#include "integrations/kubernetes/pod_tenants.h"
#include "node/agent/agent_client.h"

namespace gpumux::k8s {

struct DevicePluginConfig {
  std::string agent_socket = "/run/gpumux/gpumuxd.sock";
  std::string kubelet_dir = "/var/lib/kubelet/device-plugins";
  std::string node_name;
  std::string apiserver = "in-cluster";  // see ResolveApiServer
  std::string state_dir = "/var/lib/gpumux/kubernetes";
  bool dynamic_mig = false;  // see above; what it made is kept in state_dir
  std::chrono::milliseconds mig_idle_grace = std::chrono::minutes(5);
};

struct PluginDevice {
  std::string id;
  bool healthy = true;
  bool operator==(const PluginDevice&) const = default;
};

struct ContainerAnswer {
  ContainerEdits edits;
  std::map<std::string, std::string> annotations;
};

// The resources every plugin registers, in order.
const std::vector<std::string>& PluginResources();

class DevicePlugin {
 public:
  // Reads the allocation record in `state_dir` (created if missing). Throws Error.
  explicit DevicePlugin(DevicePluginConfig config);

  // Reads gpumuxd's GPUs; when the devices changed (a re-layout, a GPU lost or back), counts a new
  // version, wakes ListAndWatch streams and publishes the node's slots (annotation gpumux.io/gpus)
  // for the extender. Returns whether they changed. Throws Error (unavailable).
  bool Refresh();
  // The resources to register: PluginResources(), then with dynamic_mig each MIG profile a GPU of
  // this node has offered since the plugin started (the list only grows).
  std::vector<std::string> Resources();
  // With dynamic_mig: removes the MIG instances it made that have been idle for mig_idle_grace.
  // Returns them ("GPU N PROFILE@START"). Throws Error (unavailable).
  std::vector<std::string> RemoveIdleMigInstances();
  // Removes the tenants of this node's pods that are gone or finished. Returns their ids.
  std::vector<std::string> RemoveTenantsOfGonePods();
  // Keeps this node's pods (fieldSelector spec.nodeName) from a list and a watch (informer.h)
  // until `stop`; Allocate and RemoveTenantsOfGonePods then read them instead of listing (Allocate
  // still lists when the pod it looks for has not reached the watch yet). Blocks.
  void WatchPods(const std::atomic<bool>& stop);

  // The devices of `resource` now and their version (bumped by every change).
  std::vector<PluginDevice> Devices(const std::string& resource, uint64_t* version);
  // Waits until the version passes `seen` or `timeout` passes; returns whether it changed.
  bool WaitForChange(uint64_t seen, std::chrono::milliseconds timeout);
  // Wakes every waiter (on shutdown).
  void WakeAll();

  // The answer to an Allocate of `device_ids` of `resource` for one container. Throws Error:
  // not found when no pod bound here waits for it, does-not-fit when gpumuxd refuses it.
  ContainerAnswer Allocate(const std::string& resource, const std::vector<std::string>& device_ids);
  // GetPreferredAllocation: `size` of `available` (with all of `must_include`), on the GPU the
  // extender assigned to the pod being admitted, when that pod is found.
  std::vector<std::string> Preferred(const std::string& resource,
                                     const std::vector<std::string>& available,
                                     const std::vector<std::string>& must_include, int size);

  const DevicePluginConfig& config() const { return config_; }

 private:
  // This node's pods as the API server has them: from the watch once it has listed them, unless
  // `fresh` (or no watch runs), else listed now. Throws Error (unavailable).
  nlohmann::json NodePodItems(bool fresh) const;
  // Those that ask gpumux, oldest first.
  std::vector<PodRequest> NodePods(bool fresh = false) const;
  // Allocate for a MIG profile's resource: makes the instance, admits the container on it. With
  // mu_ held.
  ContainerAnswer AllocateMig(const ContainerToAllocate& c, const std::string& resource,
                              const std::vector<std::string>& device_ids);

  DevicePluginConfig config_;
  agent::AgentClient agent_;
  std::unique_ptr<KubeApi> api_;
  std::unique_ptr<Informer> pods_informer_;  // when there is an API server
  mutable std::mutex pods_mu_;
  std::map<std::string, nlohmann::json> pods_;  // this node's pods by UID, from the informer
  std::mutex mu_;
  std::condition_variable changed_;
  uint64_t version_ = 0;
  std::string published_;       // the annotation last written
  std::string annotate_error_;  // why the last write failed (logged once per reason)
  NodeGpus slots_;
  std::vector<std::string> resources_ = PluginResources();
  std::map<std::string, std::vector<PluginDevice>> devices_;
  AllocationRecord record_;
  std::optional<MigMaker> mig_;  // with dynamic_mig
};

}  // namespace gpumux::k8s
