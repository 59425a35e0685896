#include "integrations/kubernetes/pod_request.h"

#include <algorithm>
#include <charconv>

#include "base/comma_list.h"
#include "base/error.h"
#include "integrations/kubernetes/json_member.h"
#include "node/ledger/compute_share.h"
#include "node/ledger/ledger.h"

namespace gpumux::k8s {

using nlohmann::json;

std::string SlotId::ToString() const {
  return instance < 0 ? std::to_string(gpu) : std::to_string(gpu) + "." + std::to_string(instance);
}

namespace {

// A non-negative integer of at most 6 digits from `text`; nullopt for anything else.
std::optional<int> SmallInteger(std::string_view text) {
  int value = 0;
  if (text.empty() || text.size() > 6) return std::nullopt;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0) return std::nullopt;
  return value;
}

// An extended resource's quantity: Kubernetes writes quantities as strings ("24"); integers only.
int Quantity(const json& value, const std::string& where) {
  std::optional<int> n;
  if (value.is_string()) n = SmallInteger(value.get<std::string>());
  if (value.is_number_integer() && value.get<int64_t>() >= 0 && value.get<int64_t>() <= 999999)
    n = int(value.get<int64_t>());
  if (!n) throw BadInput(where + ": expected a whole number of units, got " + value.dump());
  return *n;
}

// securityContext.runAsUser of `object` (a container or a pod spec), or `otherwise`.
int64_t RunAsUser(const json& object, int64_t otherwise, const std::string& where) {
  const json& uid = Member(Member(object, "securityContext"), "runAsUser");
  if (uid.is_null()) return otherwise;
  if (!uid.is_number_integer() || uid.get<int64_t>() < 0 || uid.get<int64_t>() > 0xfffffffell)
    throw BadInput(where + ": securityContext.runAsUser: expected a uid, got " + uid.dump());
  return uid.get<int64_t>();
}

}  // namespace

std::string MigResource(const std::string& profile) { return kMigResourcePrefix + profile; }

std::string MigProfileOf(const std::string& resource) {
  const std::string_view prefix = kMigResourcePrefix;
  if (resource.size() > prefix.size() + 24 || resource.rfind(prefix, 0) != 0) return "";
  std::string_view p = std::string_view(resource).substr(prefix.size());
  size_t g = p.find("g."), gb = p.find("gb");
  if (g == std::string_view::npos || gb == std::string_view::npos || gb < g + 3 ||
      !SmallInteger(p.substr(0, g)) || !SmallInteger(p.substr(g + 2, gb - g - 2)))
    return "";
  std::string_view rest = p.substr(gb + 2);
  if (!rest.empty() && rest != "+me") return "";
  return std::string(p);
}

namespace {

// One container's request; `gpus` is the number of GPUs its pod spreads it over.
ContainerRequest ReadContainer(const json& c, int index, int gpus, const std::string& where) {
  ContainerRequest r{MemberText(c, "name"), index};
  const json& resources = Member(c, "resources");
  // Extended resources must have equal requests and limits; limits win, requests alone also count.
  for (const char* part : {"requests", "limits"}) {
    const json& amounts = Member(resources, part);
    if (!amounts.is_object()) continue;
    std::string at = where + ".resources." + part + ".";
    if (amounts.contains(kMemoryResource))
      r.memory_gib = Quantity(amounts[kMemoryResource], at + kMemoryResource);
    if (amounts.contains(kComputeResource))
      r.compute_percent = Quantity(amounts[kComputeResource], at + kComputeResource);
    if (amounts.contains(kGpuResource))
      r.whole_gpus = Quantity(amounts[kGpuResource], at + kGpuResource);
    for (const auto& [name, value] : amounts.items()) {
      if (name.rfind(kMigResourcePrefix, 0) != 0) continue;
      std::string profile = MigProfileOf(name);
      if (profile.empty())
        throw BadInput(at + name + ": not a MIG profile gpumux knows the form of (" +
                       kMigResourcePrefix + "1g.10gb)");
      int n = Quantity(value, at + name);
      if (n == 0) continue;
      if (n > 1)
        throw BadInput(at + name + ": one MIG instance per container, asked " + std::to_string(n));
      if (!r.mig_profile.empty() && r.mig_profile != profile)
        throw BadInput(at + name + ": the container also asks " + MigResource(r.mig_profile) +
                       "; one MIG instance per container");
      r.mig_profile = profile;
    }
  }
  if (!r.mig_profile.empty() && (r.memory_gib || r.compute_percent || r.whole_gpus))
    throw BadInput(where + ": asks " + MigResource(r.mig_profile) +
                   " and another gpumux resource; a MIG instance made for it is all it takes");
  if (r.compute_percent > 100 * gpus)
    throw BadInput(where + ": " + kComputeResource + " is a percent of one GPU, at most 100" +
                   (gpus > 1 ? " on each of the pod's " + std::to_string(gpus) + " GPUs" : ""));
  if (r.compute_percent > 0 && r.memory_gib == 0)
    throw BadInput(where + ": asks " + kComputeResource + " without " + kMemoryResource +
                   " (a tenant needs a memory quota)");
  return r;
}

}  // namespace

SlotId SlotId::Parse(const std::string& text) {
  size_t dot = text.find('.');
  auto gpu = SmallInteger(std::string_view(text).substr(0, dot));
  std::optional<int> instance = -1;
  if (dot != std::string::npos) instance = SmallInteger(std::string_view(text).substr(dot + 1));
  if (!gpu || !instance || *gpu > 1023 || *instance > 63)
    throw BadInput("'" + text + "': expected a GPU index, or GPU.INSTANCE for a MIG instance");
  return {*gpu, *instance};
}

std::string SlotId::ListToString(const std::vector<SlotId>& slots) {
  return JoinCommas(slots, [](const SlotId& s) { return s.ToString(); });
}

std::vector<SlotId> SlotId::ParseList(const std::string& text) {
  std::vector<SlotId> slots;
  for (const std::string& part : SplitCommas(text)) {
    SlotId s = Parse(part);
    if (std::find(slots.begin(), slots.end(), s) != slots.end())
      throw BadInput("'" + text + "': GPU " + part + " is named twice");
    slots.push_back(s);
  }
  if (slots.empty()) throw BadInput("'" + text + "': expected a GPU index or a list of them");
  return slots;
}

int PodRequest::memory_gib_per_gpu() const {
  int sum = 0;
  for (const auto& c : containers) sum += c.memory_gib;
  return sum / gpu_count;
}

int PodRequest::compute_percent_per_gpu() const {
  int sum = 0;
  for (const auto& c : containers) sum += c.compute_percent;
  return sum / gpu_count;
}

bool PodRequest::whole_gpu() const {
  for (const auto& c : containers)
    if (c.whole_gpus > 0) return true;
  return false;
}

PodRequest ParsePod(const json& pod) {
  if (!pod.is_object()) throw BadInput("pod: expected a v1.Pod object");
  const json& meta = Member(pod, "metadata");
  PodRequest p;
  p.uid = MemberText(meta, "uid");
  p.ns = MemberText(meta, "namespace");
  p.name = MemberText(meta, "name");
  p.node = MemberText(Member(pod, "spec"), "nodeName");
  p.phase = MemberText(Member(pod, "status"), "phase");
  std::string where = "pod " + (p.ns.empty() ? "" : p.ns + "/") + p.name;
  const json& annotations = Member(meta, "annotations");
  if (std::string priority = MemberText(annotations, kPriorityAnnotation); !priority.empty()) {
    try {  // the names gpumuxd takes (one list), kept as gpumuxd spells them
      p.priority = node::PriorityName(node::ParsePriority(priority));
    } catch (const Error& e) {
      throw BadInput(where + ": annotation " + kPriorityAnnotation + ": " + e.what());
    }
  }
  if (std::string count = MemberText(annotations, kGpuCountAnnotation); !count.empty()) {
    std::optional<int> n = SmallInteger(count);
    if (!n || *n < 1 || *n > kMaxPodGpus)
      throw BadInput(where + ": annotation " + kGpuCountAnnotation + ": expected 1 to " +
                     std::to_string(kMaxPodGpus) + " GPUs, got '" + count + "'");
    p.gpu_count = *n;
  }
  int index = 0, whole = 0, whole_containers = 0;
  bool shares = false;
  for (const char* list : {"initContainers", "containers"}) {
    const json& containers = Member(Member(pod, "spec"), list);
    if (!containers.is_null() && !containers.is_array())
      throw BadInput(where + ": spec." + list + ": expected a list");
    if (containers.is_null()) continue;
    for (const json& c : containers) {
      std::string at = where + ": spec." + list + "[" + MemberText(c, "name") + "]";
      ContainerRequest r = ReadContainer(c, index++, p.gpu_count, at);
      r.run_as_user = RunAsUser(c, RunAsUser(Member(pod, "spec"), -1, where), at);
      if (r.memory_gib == 0 && r.whole_gpus == 0 && r.mig_profile.empty()) continue;
      if (!r.mig_profile.empty()) {
        if (p.asks_mig())
          throw BadInput(at + ": a second container asks a MIG instance; gpumux makes one per pod");
        p.mig_profile = r.mig_profile;
      }
      whole += r.whole_gpus;
      whole_containers += r.whole_gpus > 0;
      shares = shares || r.memory_gib > 0;
      p.containers.push_back(std::move(r));
    }
  }
  if (whole_containers > 1)
    throw BadInput(where + ": " + std::to_string(whole_containers) + " containers ask " +
                   kGpuResource + "; one container takes the pod's whole GPUs");
  if (whole > 0 && shares)
    throw BadInput(where + ": asks both a whole " + kGpuResource + " and shares of one (" +
                   kMemoryResource + "); ask one or the other");
  if (p.asks_mig() && (whole > 0 || shares))
    throw BadInput(where + ": asks " + MigResource(p.mig_profile) +
                   " and shares or whole GPUs in another container; ask one or the other");
  if (p.asks_mig() && p.gpu_count > 1)
    throw BadInput(where + ": asks " + MigResource(p.mig_profile) + " over " +
                   std::to_string(p.gpu_count) + " GPUs (" + kGpuCountAnnotation +
                   "); a MIG instance is on one GPU");
  if (whole > kMaxPodGpus)
    throw BadInput(where + ": asks " + std::to_string(whole) + " " + kGpuResource +
                   "; gpumux places at most " + std::to_string(kMaxPodGpus) + " GPUs per pod");
  if (whole > 0) {
    if (MemberText(annotations, kGpuCountAnnotation).size() && p.gpu_count != whole)
      throw BadInput(where + ": annotation " + kGpuCountAnnotation + " says " +
                     std::to_string(p.gpu_count) + " GPUs, its container asks " +
                     std::to_string(whole) + " " + kGpuResource);
    p.gpu_count = whole;
  }
  // Shares spread evenly over the pod's GPUs: each container's must divide by their number.
  for (const ContainerRequest& c : p.containers) {
    if (c.memory_gib % p.gpu_count || c.compute_percent % p.gpu_count)
      throw BadInput(where + ": container " + c.name + " asks " + std::to_string(c.memory_gib) +
                     " " + kMemoryResource + " and " + std::to_string(c.compute_percent) + " " +
                     kComputeResource + ", which do not divide evenly over the pod's " +
                     std::to_string(p.gpu_count) + " GPUs (" + kGpuCountAnnotation + ")");
  }
  // What the containers ask together on each GPU, without overflow: all of it lands there.
  int64_t memory = 0, compute = 0;
  for (const ContainerRequest& c : p.containers) {
    memory += c.memory_gib / p.gpu_count;
    compute += c.compute_percent / p.gpu_count;
  }
  if (memory > kMaxPodMemoryGib)
    throw BadInput(where + ": asks " + std::to_string(memory) + " " + kMemoryResource +
                   " on a GPU, more than any GPU holds (" + std::to_string(kMaxPodMemoryGib) + ")");
  if (compute > 100)
    throw BadInput(where + ": asks " + std::to_string(compute) + " " + kComputeResource +
                   " of a GPU in all, more than its 100%");
  // Each container becomes a gpumuxd tenant: the rules gpumuxd admits it by (node::CheckTenant)
  // are checked here, so that the extender never binds a pod the node would refuse.
  for (const ContainerRequest& c : p.containers) {
    node::TenantLimits limits;
    limits.memory = uint64_t(c.memory_gib / p.gpu_count) << 30;
    if (c.compute_percent > 0) limits.cap_permille = uint32_t(c.compute_percent / p.gpu_count) * 10;
    if (!p.priority.empty()) limits.priority = node::ParsePriority(p.priority);
    try {
      node::CheckTenant("k8s-pod", limits);
    } catch (const Error& e) {
      throw e.Within(where + ": container " + std::to_string(c.index));
    }
  }
  if (std::string assigned = MemberText(annotations, kAssignedAnnotation); !assigned.empty()) {
    std::string at = where + ": annotation " + kAssignedAnnotation;
    try {
      p.assigned = SlotId::ParseList(assigned);
    } catch (const Error& e) {
      throw e.Within(at);
    }
    if (int(p.assigned.size()) != p.gpu_count)
      throw BadInput(at + ": names " + std::to_string(p.assigned.size()) +
                     " GPU(s), the pod asks " + std::to_string(p.gpu_count));
    for (const SlotId& s : p.assigned) {
      if (p.gpu_count > 1 && s.instance >= 0)
        throw BadInput(at + ": " + s.ToString() +
                       " is a MIG instance; a pod of several GPUs takes whole GPUs");
      if (std::count_if(p.assigned.begin(), p.assigned.end(),
                        [&](const SlotId& o) { return o.gpu == s.gpu; }) > 1)
        throw BadInput(at + ": GPU " + std::to_string(s.gpu) + " is named twice");
      if (p.asks_mig() && s.instance >= 0)
        throw BadInput(at + ": " + s.ToString() +
                       " is a MIG instance; a pod asking a MIG profile is assigned the GPU its "
                       "instance is made on");
    }
  }
  if (std::string placed = MemberText(annotations, kMigPlacementAnnotation);
      p.asks_mig() && !placed.empty()) {
    size_t at = placed.find('@');
    std::optional<int> start = at == std::string::npos
                                   ? std::nullopt
                                   : SmallInteger(std::string_view(placed).substr(at + 1));
    if (!start || *start > 15 || placed.substr(0, at) != p.mig_profile)
      throw BadInput(where + ": annotation " + kMigPlacementAnnotation + ": expected " +
                     p.mig_profile + "@START, got '" + placed + "'");
    p.mig_start = *start;
  }
  if (p.asks_gpumux() && p.uid.empty()) throw BadInput(where + ": metadata.uid is missing");
  return p;
}

}  // namespace gpumux::k8s
