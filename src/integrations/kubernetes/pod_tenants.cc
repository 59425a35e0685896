#include "integrations/kubernetes/pod_tenants.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/error.h"

namespace gpumux::k8s {

using nlohmann::json;

std::string TenantId(const std::string& pod_uid, int container_index) {
  return kTenantPrefix + pod_uid + "-" + std::to_string(container_index);
}

void SetTenantSlots(const std::vector<SlotId>& slots, agent::TenantRequest* request) {
  if (slots.size() == 1) {
    request->gpu = slots[0].gpu;
    if (slots[0].instance >= 0) request->instance = slots[0].instance;
    return;
  }
  for (const SlotId& s : slots) request->gpus.push_back({s.gpu, s.instance, 0});
}

std::string PodCgroup(const std::string& pod_uid) { return "pod" + pod_uid; }

std::string ClaimTenantId(const std::string& claim_uid) {
  return std::string(kTenantPrefix) + "claim-" + claim_uid;
}

std::optional<TenantOwner> OwnerOfTenant(const std::string& id) {
  const std::string prefix = kTenantPrefix, claim = prefix + "claim-";
  if (id.rfind(prefix, 0) != 0) return std::nullopt;
  if (id.rfind(claim, 0) == 0) {
    if (id.size() == claim.size()) return std::nullopt;
    return TenantOwner{TenantOwner::kClaim, id.substr(claim.size())};
  }
  size_t dash = id.rfind('-');
  if (dash == std::string::npos || dash <= prefix.size() || dash + 1 == id.size() ||
      id.find_first_not_of("0123456789", dash + 1) != std::string::npos)
    return std::nullopt;
  return TenantOwner{TenantOwner::kPodContainer, id.substr(prefix.size(), dash - prefix.size()),
                     std::atoi(id.c_str() + dash + 1)};
}

AllocationRecord::AllocationRecord(std::string path) : path_(std::move(path)) {
  std::ifstream in(path_);
  if (!in) return;
  std::stringstream text;
  text << in.rdbuf();
  json j = json::parse(text.str(), nullptr, false);
  if (!j.is_object()) throw BadInput(path_ + ": not a gpumux allocation record (a JSON object)");
  for (auto& [uid, containers] : j.items()) {
    if (!containers.is_object()) throw BadInput(path_ + ": pod " + uid + ": expected an object");
    for (auto& [index, resources] : containers.items()) {
      if (!resources.is_array()) throw BadInput(path_ + ": pod " + uid + ": expected lists");
      for (const json& r : resources) {
        if (!r.is_string()) throw BadInput(path_ + ": pod " + uid + ": expected resource names");
        answered_[uid][std::atoi(index.c_str())].insert(r.get<std::string>());
      }
    }
  }
}

void AllocationRecord::Save() const {
  json j = json::object();
  for (const auto& [uid, containers] : answered_)
    for (const auto& [index, resources] : containers) j[uid][std::to_string(index)] = resources;
  // Written beside and renamed over, so that a crash leaves the old record or the new one.
  std::string tmp = path_ + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << j.dump() << "\n";
    if (!out.flush()) throw Unavailable(tmp + ": cannot write the allocation record");
  }
  std::filesystem::rename(tmp, path_);
}

std::optional<ContainerToAllocate> AllocationRecord::Find(const std::vector<PodRequest>& pods,
                                                          const std::string& resource,
                                                          int units) const {
  for (const PodRequest& pod : pods) {
    if (pod.assigned.empty() || pod.finished()) continue;
    auto done = answered_.find(pod.uid);
    for (const ContainerRequest& c : pod.containers) {
      int asked = resource == kMemoryResource    ? c.memory_gib
                  : resource == kComputeResource ? c.compute_percent
                  : resource == kGpuResource     ? c.whole_gpus
                  : !c.mig_profile.empty() && MigProfileOf(resource) == c.mig_profile ? 1
                                                                                      : 0;
      if (asked == 0) continue;
      bool answered = done != answered_.end() && done->second.count(c.index) &&
                      done->second.at(c.index).count(resource);
      if (answered) continue;
      // The kubelet allocates a pod's containers in order: the first unanswered one is next.
      if (asked != units) break;
      return ContainerToAllocate{pod, c, TenantId(pod.uid, c.index)};
    }
  }
  return std::nullopt;
}

void AllocationRecord::Answered(const ContainerToAllocate& c, const std::string& resource) {
  answered_[c.pod.uid][c.container.index].insert(resource);
  Save();
}

std::vector<std::string> AllocationRecord::KeepOnly(const std::set<std::string>& live_uids) {
  std::vector<std::string> gone;
  for (auto it = answered_.begin(); it != answered_.end();) {
    if (live_uids.count(it->first)) {
      ++it;
      continue;
    }
    gone.push_back(it->first);
    it = answered_.erase(it);
  }
  if (!gone.empty()) Save();
  return gone;
}

}  // namespace gpumux::k8s
