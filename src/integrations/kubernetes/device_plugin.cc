#include "integrations/kubernetes/device_plugin.h"

#include <algorithm>
#include <filesystem>

#include "base/error.h"
#include "integrations/kubernetes/json_member.h"
#include "service/log.h"

namespace gpumux::k8s {

using nlohmann::json;

namespace {

constexpr uint64_t kGiB = 1ull << 30;

std::string SlotPrefix(const SlotId& id) { return "gpu" + id.ToString(); }

// The slot a device id of ours is on: "gpu3-gib17" → 3, "gpu3.1-gib0" → 3.1, "gpu3" → 3.
std::optional<SlotId> SlotOfDevice(const std::string& id) {
  if (id.rfind("gpu", 0) != 0) return std::nullopt;
  try {
    return SlotId::Parse(
        id.substr(3, id.find('-') == std::string::npos ? std::string::npos : id.find('-') - 3));
  } catch (const Error&) {
    return std::nullopt;
  }
}

// The tenant container `c` is admitted as, but for its GPUs and limits.
agent::TenantRequest ContainerTenant(const ContainerToAllocate& c) {
  const PodRequest& pod = c.pod;
  agent::TenantRequest request;
  request.id = c.tenant;
  request.priority = node::ParsePriority(pod.priority);  // checked when the pod was read
  // Its runAsUser, else (the image's user, which the spec does not say) the uid of its first
  // process, which runs in the pod's cgroup.
  if (c.container.run_as_user >= 0)
    request.owner_uid = uid_t(c.container.run_as_user);
  else
    request.learn_owner = true;
  // Only the pod's processes may draw on its memory, not another pod's of the same uid (every
  // root container's, say).
  request.cgroup = PodCgroup(pod.uid);
  request.source = "kubernetes:" + pod.ns + "/" + pod.name + "/" + c.container.name;
  request.labels.pod_namespace = pod.ns;
  request.labels.pod = pod.name;
  request.labels.container = c.container.name;
  return request;
}

// The kubelet's answer for container `c`, admitted as `admitted` on the devices of `uuids`.
ContainerAnswer AnswerFor(const ContainerToAllocate& c, const agent::Admission& admitted,
                          const std::vector<std::string>& uuids) {
  ContainerAnswer answer;
  answer.edits = EditsForTenant(admitted.answer, uuids);
  answer.annotations["gpumux.io/tenant"] = c.tenant;
  return answer;
}

}  // namespace

const std::vector<std::string>& PluginResources() {
  static const std::vector<std::string> kResources = {kMemoryResource, kComputeResource,
                                                      kGpuResource};
  return kResources;
}

DevicePlugin::DevicePlugin(DevicePluginConfig config)
    : config_(std::move(config)),
      agent_(config_.agent_socket),
      api_(config_.apiserver.empty() ? nullptr : std::make_unique<KubeApi>(config_.apiserver)),
      record_((std::filesystem::create_directories(config_.state_dir),
               config_.state_dir + "/allocations.json")) {
  if (config_.node_name.empty()) throw BadInput("node: give this node's name (--node)");
  if (config_.dynamic_mig)
    mig_.emplace(&agent_, config_.state_dir + "/mig-instances-made.json", config_.mig_idle_grace);
  if (api_) {
    CheckDnsSubdomain("node", config_.node_name);
    auto uid = [](const json& pod) {
      return pod.value("/metadata/uid"_json_pointer, std::string());
    };
    pods_informer_ = std::make_unique<Informer>(
        api_.get(), "/api/v1/pods?fieldSelector=spec.nodeName%3D" + config_.node_name,
        Informer::Handlers{[this, uid](const json& pod) {
                             std::lock_guard lock(pods_mu_);
                             pods_[uid(pod)] = pod;
                           },
                           [this, uid](const json& pod) {
                             std::lock_guard lock(pods_mu_);
                             pods_.erase(uid(pod));
                           }});
  }
}

void DevicePlugin::WatchPods(const std::atomic<bool>& stop) {
  if (pods_informer_) pods_informer_->Run(stop);
}

bool DevicePlugin::Refresh() {
  json gpus = agent_.Gpus()["gpus"];
  json tenants = mig_ ? agent_.Tenants() : json();
  const std::set<std::string> made = mig_ ? mig_->made() : std::set<std::string>();
  std::vector<Slot> slots;
  std::vector<MigRoom> rooms;
  std::map<std::string, std::vector<PluginDevice>> devices;
  for (const json& g : gpus) {
    int index = g["index"].get<int>();
    bool healthy = g.value("healthy", true);
    auto add_slot = [&](int instance, uint64_t bytes, const std::string& uuid) {
      Slot s;
      s.id = {index, instance};
      s.memory_gib = int(bytes / kGiB);
      s.healthy = healthy;
      s.mps = g.value("mode", "") == "mps";
      s.uuid = uuid;
      slots.push_back(s);
      for (int k = 0; k < s.memory_gib; ++k)
        devices[kMemoryResource].push_back(
            {SlotPrefix(s.id) + "-gib" + std::to_string(k), healthy});
      if (instance >= 0) return;
      for (int k = 0; k < 100; ++k)
        devices[kComputeResource].push_back(
            {SlotPrefix(s.id) + "-pct" + std::to_string(k), healthy});
      devices[kGpuResource].push_back({SlotPrefix(s.id), healthy});
    };
    std::optional<MigGpu> dynamic = mig_ ? MigMaker::Read(g, tenants, made) : std::nullopt;
    if (dynamic) {
      // The instances it did not make are slots as ever; the GPU is a room for the rest.
      MigRoom room;
      room.gpu = index;
      room.healthy = healthy;
      room.slices = dynamic->slots;
      for (const MigGpu::Instance& i : dynamic->instances) {
        if (i.kept) add_slot(i.index, i.placement.memory_bytes, i.uuid);
        if (!i.kept && i.idle()) continue;
        for (int s = i.placement.start; s < i.placement.start + i.placement.memory_slices; ++s)
          room.held |= 1u << s;
      }
      for (const MigPlacement& p : dynamic->placements) {
        room.placements.push_back({p.profile, p.start, p.memory_slices});
        devices[MigResource(p.profile)].push_back(
            {MigPlacementDevice(index, p), room.Free(room.placements.back())});
      }
      rooms.push_back(std::move(room));
    } else if (g.value("mode", "") == "mig") {
      for (const json& i : g.value("instances", json::array()))
        add_slot(i["instance"].get<int>(), i["memory_bytes"].get<uint64_t>(),
                 MemberText(i, "uuid"));
    } else {
      add_slot(-1, g["memory_bytes"].get<uint64_t>(), MemberText(g, "uuid"));
    }
  }
  NodeGpus fresh(std::move(slots), std::move(rooms));
  std::map<std::string, std::string> annotations = {{kNodeGpusAnnotation, fresh.Annotation()}};
  if (mig_) annotations[kMigRoomsAnnotation] = fresh.MigRoomsAnnotation();
  const std::string annotation = json(annotations).dump();
  bool changed;
  {
    std::lock_guard lock(mu_);
    for (const auto& [resource, list] : devices)
      if (std::find(resources_.begin(), resources_.end(), resource) == resources_.end())
        resources_.push_back(resource);
    changed = devices != devices_ || version_ == 0;
    if (changed) {
      devices_ = std::move(devices);
      slots_ = std::move(fresh);
      ++version_;
      changed_.notify_all();
    }
  }
  // The extender places pods by these slots; written again until the API server has taken it.
  // Registration with the kubelet never waits on the API server: a failure here is logged, and
  // retried at the next refresh.
  if (api_ && annotation != published_) {
    try {
      api_->AnnotateNode(config_.node_name, annotations);
      published_ = annotation;
    } catch (const Error& e) {
      if (annotate_error_ != e.what())
        service::Log("warn", "cannot annotate the node; will retry", {{"reason", e.what()}});
      annotate_error_ = e.what();
    }
  }
  return changed;
}

std::vector<std::string> DevicePlugin::Resources() {
  std::lock_guard lock(mu_);
  return resources_;
}

std::vector<std::string> DevicePlugin::RemoveIdleMigInstances() {
  return mig_ ? mig_->RemoveIdle() : std::vector<std::string>();
}

std::vector<PluginDevice> DevicePlugin::Devices(const std::string& resource, uint64_t* version) {
  std::lock_guard lock(mu_);
  if (version) *version = version_;
  auto it = devices_.find(resource);
  return it == devices_.end() ? std::vector<PluginDevice>() : it->second;
}

bool DevicePlugin::WaitForChange(uint64_t seen, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return changed_.wait_for(lock, timeout, [&] { return version_ != seen; });
}

void DevicePlugin::WakeAll() {
  std::lock_guard lock(mu_);
  changed_.notify_all();
}

json DevicePlugin::NodePodItems(bool fresh) const {
  if (!api_) throw Unavailable("no API server to find the pod by (--apiserver)");
  if (fresh || !pods_informer_->synced()) return api_->ListPods(config_.node_name);
  json items = json::array();
  std::lock_guard lock(pods_mu_);
  for (const auto& [uid, pod] : pods_) items.push_back(pod);
  return items;
}

std::vector<PodRequest> DevicePlugin::NodePods(bool fresh) const {
  json items = NodePodItems(fresh);
  // Oldest first: the kubelet admits pods in the order they came.
  std::stable_sort(items.begin(), items.end(), [](const json& a, const json& b) {
    return a.value("/metadata/creationTimestamp"_json_pointer, std::string()) <
           b.value("/metadata/creationTimestamp"_json_pointer, std::string());
  });
  std::vector<PodRequest> pods;
  for (const json& item : items) {
    try {
      PodRequest pod = ParsePod(item);
      if (pod.asks_gpumux()) pods.push_back(std::move(pod));
    } catch (const Error&) {
      // The extender refuses such a pod at filter; it never reaches this node through gpumux.
    }
  }
  return pods;
}

ContainerAnswer DevicePlugin::Allocate(const std::string& resource,
                                       const std::vector<std::string>& ids) {
  std::vector<PodRequest> pods = NodePods();
  {
    // The kubelet allocates once the pod is bound here, which the watch may not have shown yet.
    std::lock_guard lock(mu_);
    if (!record_.Find(pods, resource, int(ids.size()))) pods.clear();
  }
  if (pods.empty()) pods = NodePods(/*fresh=*/true);
  std::lock_guard lock(mu_);  // finding the container and recording it are one step
  auto c = record_.Find(pods, resource, int(ids.size()));
  if (!c) {
    throw NotFound("no pod bound to node " + config_.node_name + " waits for " +
                   std::to_string(ids.size()) + " " + resource +
                   " (pods that ask gpumux resources must be scheduled by gpumux-k8s-scheduler, "
                   "which assigns them a GPU)");
  }
  if (!MigProfileOf(resource).empty()) return AllocateMig(*c, resource, ids);
  const PodRequest& pod = c->pod;
  std::vector<const Slot*> slots;
  for (const SlotId& where : pod.assigned) {
    const Slot* slot = slots_.Find(where);
    if (!slot)
      throw NotFound("pod " + pod.ns + "/" + pod.name + " is assigned GPU " + where.ToString() +
                     ", which node " + config_.node_name + " does not have");
    slots.push_back(slot);
  }
  agent::TenantRequest request = ContainerTenant(*c);
  SetTenantSlots(pod.assigned, &request);  // over several: the same limits on each
  if (c->container.whole_gpus > 0) {
    int smallest = slots[0]->memory_gib;
    for (const Slot* slot : slots) smallest = std::min(smallest, slot->memory_gib);
    request.memory = {uint64_t(smallest) * kGiB};
  } else {
    request.memory = {uint64_t(c->container.memory_gib / pod.gpu_count) * kGiB};
    if (c->container.compute_percent > 0)
      request.compute_percent = c->container.compute_percent / pod.gpu_count;
  }
  // The container's other resource, allocated before this one, admitted the same tenant with the
  // same limits: admitting again updates it to what it is.
  agent::Admission admitted = agent_.Admit(request);
  record_.Answered(*c, resource);

  std::vector<std::string> uuids;
  for (const Slot* slot : slots)
    if (!slot->uuid.empty()) uuids.push_back(slot->uuid);
  return AnswerFor(*c, admitted, uuids);
}

ContainerAnswer DevicePlugin::AllocateMig(const ContainerToAllocate& c, const std::string& resource,
                                          const std::vector<std::string>& ids) {
  const PodRequest& pod = c.pod;
  std::string where = "pod " + pod.ns + "/" + pod.name + " container " + c.container.name;
  if (!mig_)
    throw NotFound(where + ": asks " + resource +
                   ", which this plugin makes only with --dynamic-mig");
  if (ids.size() != 1) throw BadInput(where + ": one MIG instance per container");
  // Where the extender placed it (and counted it): the instance the kubelet allocated must be it.
  MigPlacement placed{pod.mig_profile, pod.mig_start};
  std::string device = MigPlacementDevice(pod.assigned[0].gpu, placed);
  if (pod.mig_start < 0 || ids[0] != device)
    throw Conflict(where + ": the kubelet allocated " + ids[0] + ", the scheduler placed it at " +
                   (pod.mig_start < 0
                        ? "no placement (annotation " + std::string(kMigPlacementAnnotation) + ")"
                        : device));
  std::unique_lock layout = mig_->Lock();  // from the instance made to its tenant admitted
  MigGpu::Instance instance = mig_->Make(device, where);
  agent::TenantRequest request = ContainerTenant(c);
  SetTenantSlots({{pod.assigned[0].gpu, instance.index}}, &request);
  request.memory = {instance.placement.memory_bytes};  // the instance is the pod's alone
  agent::Admission admitted = agent_.Admit(request);
  layout.unlock();
  record_.Answered(c, resource);
  return AnswerFor(
      c, admitted,
      instance.uuid.empty() ? std::vector<std::string>() : std::vector<std::string>{instance.uuid});
}

std::vector<std::string> DevicePlugin::Preferred(const std::string& resource,
                                                 const std::vector<std::string>& available,
                                                 const std::vector<std::string>& must_include,
                                                 int size) {
  std::vector<SlotId> want;  // the pod's GPUs; `size` is spread evenly over them
  std::string mig_device;    // a MIG placement: where the extender placed the pod
  try {
    // From the watched pods, else from a list made now (the pod was bound a moment ago).
    for (bool fresh : {false, true}) {
      std::vector<PodRequest> pods = NodePods(fresh);
      std::lock_guard lock(mu_);
      if (auto c = record_.Find(pods, resource, size)) {
        want = c->pod.assigned;
        if (c->pod.asks_mig() && c->pod.mig_start >= 0)
          mig_device = MigPlacementDevice(want[0].gpu, {c->pod.mig_profile, c->pod.mig_start});
        break;
      }
    }
  } catch (const Error&) {
    // Only a hint: without the pod, the kubelet's own choice.
  }
  if (!mig_device.empty() && must_include.empty() && size == 1 &&
      std::find(available.begin(), available.end(), mig_device) != available.end())
    return {mig_device};
  std::map<SlotId, int> taken;
  auto wanted = [&](const std::optional<SlotId>& slot) {
    return slot && std::find(want.begin(), want.end(), *slot) != want.end() &&
           taken[*slot] < size / int(want.size());
  };
  std::vector<std::string> chosen = must_include;
  for (const std::string& id : chosen)
    if (auto slot = SlotOfDevice(id)) ++taken[*slot];
  for (int pass = 0; pass < 2 && int(chosen.size()) < size; ++pass) {
    for (const std::string& id : available) {
      if (int(chosen.size()) >= size) break;
      std::optional<SlotId> slot = SlotOfDevice(id);
      if (pass == 0 && !wanted(slot)) continue;
      if (std::find(chosen.begin(), chosen.end(), id) != chosen.end()) continue;
      chosen.push_back(id);
      if (slot) ++taken[*slot];
    }
  }
  return chosen;
}

std::vector<std::string> DevicePlugin::RemoveTenantsOfGonePods() {
  if (!api_) return {};
  auto live_pods = [&](bool fresh) {
    std::set<std::string> live;
    for (const json& item : NodePodItems(fresh)) {
      std::string phase = item.value("/status/phase"_json_pointer, std::string());
      if (phase != "Succeeded" && phase != "Failed")
        live.insert(item.value("/metadata/uid"_json_pointer, std::string()));
    }
    return live;
  };
  json tenants = agent_.Tenants()["tenants"];  // a copy: the range must outlive the loop
  auto gone = [&](const std::set<std::string>& live) {
    for (const json& t : tenants) {
      auto owner = OwnerOfTenant(MemberText(t, "id"));
      if (owner && owner->kind == TenantOwner::kPodContainer && !live.count(owner->uid))
        return true;
    }
    return false;
  };
  // The watched pods say which may be gone; a tenant is removed only when a list made now agrees
  // (the watch may not have shown a pod admitted a moment ago).
  if (!gone(live_pods(/*fresh=*/false))) return {};
  std::set<std::string> live = live_pods(/*fresh=*/true);
  std::vector<std::string> removed;
  for (const json& t : tenants) {
    std::string id = MemberText(t, "id");
    auto owner = OwnerOfTenant(id);
    if (!owner || owner->kind != TenantOwner::kPodContainer || live.count(owner->uid)) continue;
    try {
      agent_.Remove(id, /*missing_ok=*/true);
      removed.push_back(id);
    } catch (const Error& e) {
      // Processes still run (a container being torn down): the next poll tries again.
      service::Log("debug", "tenant of a pod that is gone kept for now",
                   {{"tenant", id}, {"reason", e.what()}});
    }
  }
  std::lock_guard lock(mu_);
  record_.KeepOnly(live);
  return removed;
}

}  // namespace gpumux::k8s
