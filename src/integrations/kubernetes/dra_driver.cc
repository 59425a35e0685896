#include "integrations/kubernetes/dra_driver.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>

#include "base/error.h"
#include "core/units.h"
#include "integrations/kubernetes/container_edits.h"
#include "integrations/kubernetes/json_member.h"
#include "integrations/kubernetes/mig_partitions.h"
#include "integrations/kubernetes/pod_request.h"
#include "integrations/kubernetes/pod_tenants.h"

namespace gpumux::k8s {

using nlohmann::json;

namespace {

constexpr uint64_t kGiB = 1ull << 30;
// Kubernetes' ResourceSliceMaxCounterSets (resource.k8s.io/v1).
constexpr size_t kMaxCounterSetsPerSlice = 8;

std::string DeviceName(int gpu, int instance) {
  return "gpu-" + std::to_string(gpu) + (instance < 0 ? "" : "-mig-" + std::to_string(instance));
}

// "gpu-3" → 3/-1, "gpu-3-mig-1" → 3/1; nullopt for a name this driver does not publish.
std::optional<SlotId> SlotOfDevice(const std::string& name) {
  if (name.rfind("gpu-", 0) != 0) return std::nullopt;
  std::string rest = name.substr(4);
  size_t mig = rest.find("-mig-");
  try {
    return SlotId::Parse(
        mig == std::string::npos ? rest : rest.substr(0, mig) + "." + rest.substr(mig + 5));
  } catch (const Error&) {
    return std::nullopt;
  }
}

// A memory size as Kubernetes writes quantities ("24Gi", "512Mi") or as gpumux does ("24GiB").
uint64_t QuantityBytes(const json& value, const std::string& where) {
  std::string text = value.is_string() ? value.get<std::string>() : value.dump();
  std::string unit = text.size() >= 2 ? text.substr(text.size() - 2) : "";
  if (unit == "Ki" || unit == "Mi" || unit == "Gi" || unit == "Ti") text += "B";
  try {
    double bytes = ParseBytes(text);
    if (bytes < 1 || bytes > 1.8e19) throw BadInput("out of range");
    return uint64_t(bytes);
  } catch (const Error&) {
    throw BadInput(where + ": expected a memory size such as \"24Gi\", got " + value.dump());
  }
}

// A percent of the GPU's compute: 40, "40" or "40%".
int Percent(const json& value, const std::string& where) {
  std::string text = value.is_string() ? value.get<std::string>() : value.dump();
  if (!text.empty() && text.back() == '%') text.pop_back();
  char* end = nullptr;
  long n = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end || n < 1 || n > 100)
    throw BadInput(where + ": expected a percent of the GPU from 1 to 100, got " + value.dump());
  return int(n);
}

}  // namespace

DraDriver::DraDriver(DraDriverConfig config)
    : config_(std::move(config)),
      agent_(config_.agent_socket),
      api_(config_.apiserver),
      claims_informer_(
          &api_, "/apis/resource.k8s.io/v1/resourceclaims",
          {[this](const json& claim) {
             std::string uid = MemberText(Member(claim, "metadata"), "uid");
             std::lock_guard lock(claims_mu_);
             if (!ResultsHere(claim).empty())
               claims_[uid] = {{"metadata", claim["metadata"]}, {"status", claim["status"]}};
             else
               claims_.erase(uid);
           },
           [this](const json& claim) {
             std::lock_guard lock(claims_mu_);
             claims_.erase(MemberText(Member(claim, "metadata"), "uid"));
           }}) {
  if (config_.node_name.empty()) throw BadInput("node: give this node's name (--node)");
  CheckDnsSubdomain("node", config_.node_name);
  if (config_.dynamic_mig)
    mig_.emplace(&agent_, config_.plugin_dir + "/mig-instances-made.json", config_.mig_idle_grace);
}

void DraDriver::WatchClaims(const std::atomic<bool>& stop) { claims_informer_.Run(stop); }

size_t DraDriver::claims_kept() const {
  std::lock_guard lock(claims_mu_);
  return claims_.size();
}

std::vector<const json*> DraDriver::ResultsHere(const json& claim) const {
  const json& results =
      Member(Member(Member(Member(claim, "status"), "allocation"), "devices"), "results");
  std::vector<const json*> here;
  if (results.is_array())
    for (const json& r : results)
      if (Member(r, "driver") == kDraDriverName && Member(r, "pool") == config_.node_name)
        here.push_back(&r);
  return here;
}

json DraDriver::Claim(const std::string& ns, const std::string& uid, const std::string& name) {
  {
    std::lock_guard lock(claims_mu_);
    auto it = claims_.find(uid);
    // The kubelet prepares a claim reserved for the pod it starts; one kept without a reservation
    // is between pods (perhaps about to be allocated again), so the API server is asked.
    if (it != claims_.end()) {
      const json& meta = it->second["metadata"];
      const json& reserved = Member(it->second["status"], "reservedFor");
      if (Member(meta, "namespace") == ns && Member(meta, "name") == name && reserved.is_array() &&
          !reserved.empty())
        return it->second;
    }
  }
  return api_.GetResourceClaim(ns, name);
}

std::string DraDriver::CdiPath(const std::string& claim_uid) const {
  return config_.cdi_dir + "/gpumux.io-tenant_" + claim_uid + ".json";
}

std::vector<json> DraDriver::ResourceSlices(const std::string& node, const json& gpus,
                                            const json& tenants, bool dynamic_mig,
                                            int64_t generation, const std::set<std::string>& made) {
  json devices = json::array();
  std::vector<MigGpu> partitioned;  // dynamic_mig: its GPUs in MIG mode
  for (const json& g : gpus.at("gpus")) {
    int index = g.at("index").get<int>();
    std::string mode = g.value("mode", "timeslice");
    if (!g.value("healthy", true)) continue;  // a lost GPU is not offered to new claims
    if (dynamic_mig) {
      if (std::optional<MigGpu> mig = MigMaker::Read(g, tenants, made)) {
        partitioned.push_back(std::move(*mig));
        continue;
      }
    }
    auto add = [&](int instance, const json& d) {
      json attributes = {{"index", {{"int", index}}},
                         {"mode", {{"string", mode}}},
                         {"model", {{"string", g.value("name", "")}}}};
      if (instance >= 0) {
        attributes["instance"] = {{"int", instance}};
        // The MIG profile as the layout named it ("3g.40gb"; "3g.40gb@4" when placed explicitly).
        json layout = g.value("layout", json::array());
        std::string profile = size_t(instance) < layout.size() && layout[instance].is_string()
                                  ? layout[instance].get<std::string>()
                                  : "";
        attributes["profile"] = {{"string", profile.substr(0, profile.find('@'))}};
      }
      if (d.contains("uuid")) attributes["uuid"] = {{"string", d["uuid"]}};
      uint64_t gib = d.at("memory_bytes").get<uint64_t>() / kGiB;
      json capacity = {
          {"memory",
           {{"value", std::to_string(gib) + "Gi"},
            {"requestPolicy",
             {{"default", "1Gi"}, {"validRange", {{"min", "1Gi"}, {"step", "1Gi"}}}}}}}};
      if (instance < 0)
        capacity["compute"] = {
            {"value", "100"},
            {"requestPolicy", {{"default", "100"}, {"validRange", {{"min", "1"}, {"step", "1"}}}}}};
      json device = {{"name", DeviceName(index, instance)},
                     {"attributes", attributes},
                     {"capacity", capacity},
                     // Shared by several claims where DRAConsumableCapacity (alpha in 1.34) is on.
                     {"allowMultipleAllocations", true}};
      devices.push_back(device);
    };
    if (mode == "mig") {
      for (const json& i : g.value("instances", json::array())) add(i.at("instance").get<int>(), i);
    } else {
      add(-1, g);
    }
  }
  // Counter sets and devices that consume them go in slices of their own (Kubernetes 1.35+), at
  // most 8 sets in one, and at most 64 devices in one (a GPU's placements: 18 on an H100).
  const std::string base = node + "-" + kDraDriverName;
  std::vector<std::pair<std::string, json>> specs = {{base, {{"devices", devices}}}};
  for (size_t first = 0; first < partitioned.size(); first += kMaxCounterSetsPerSlice) {
    json sets = json::array();
    for (size_t i = first; i < std::min(partitioned.size(), first + kMaxCounterSetsPerSlice); ++i)
      sets.push_back(partitioned[i].CounterSet());
    specs.push_back({base + "-counters" + (first == 0 ? "" : "-" + std::to_string(first / 8)),
                     {{"sharedCounters", sets}}});
  }
  for (const MigGpu& mig : partitioned)
    specs.push_back({base + "-gpu-" + std::to_string(mig.gpu), {{"devices", mig.Devices()}}});
  std::vector<json> slices;
  for (auto& [name, spec] : specs) {
    spec["driver"] = kDraDriverName;
    spec["nodeName"] = node;
    spec["pool"] = {
        {"name", node}, {"generation", generation}, {"resourceSliceCount", specs.size()}};
    slices.push_back({{"apiVersion", "resource.k8s.io/v1"},
                      {"kind", "ResourceSlice"},
                      {"metadata", {{"name", name}}},
                      {"spec", spec}});
  }
  return slices;
}

bool DraDriver::PublishResourceSlice() {
  json gpus = agent_.Gpus();
  json tenants = config_.dynamic_mig ? agent_.Tenants() : json{{"tenants", json::array()}};
  std::set<std::string> made = mig_ ? mig_->made() : std::set<std::string>();
  std::lock_guard lock(mu_);
  std::vector<json> slices =
      ResourceSlices(config_.node_name, gpus, tenants, config_.dynamic_mig, generation_, made);
  std::vector<std::string> names;
  for (const json& s : slices) names.push_back(s["metadata"]["name"]);
  // A pool whose slices change is a new generation, so that the scheduler never mixes the two
  // (a restart too: the generation goes on from the clock).
  if (names != published_names_ || generation_ == 0) {
    generation_ = std::max<int64_t>(generation_ + 1, std::time(nullptr));
    slices =
        ResourceSlices(config_.node_name, gpus, tenants, config_.dynamic_mig, generation_, made);
  }
  std::string text = json(slices).dump();
  if (text == published_) return false;
  for (const json& slice : slices) api_.ApplyResourceSlice(slice);
  for (const std::string& old : published_names_)
    if (std::find(names.begin(), names.end(), old) == names.end()) api_.DeleteResourceSlice(old);
  published_ = text;
  published_names_ = names;
  return true;
}

std::vector<std::string> DraDriver::RemoveIdleMigInstances() {
  return mig_ ? mig_->RemoveIdle() : std::vector<std::string>();
}

SlotId DraDriver::SlotOf(const std::string& device, const std::string& where) {
  if (mig_ && GpuOfMigPlacementDevice(device))
    return {*GpuOfMigPlacementDevice(device), mig_->Make(device, where).index};
  auto slot = SlotOfDevice(device);
  if (!slot) throw BadInput(where + ": device '" + device + "' is not one gpumux publishes");
  return *slot;
}

std::vector<PreparedDevice> DraDriver::Prepare(const std::string& ns, const std::string& uid,
                                               const std::string& name) {
  json claim = Claim(ns, uid, name);
  std::string where = "ResourceClaim " + ns + "/" + name;
  if (Member(Member(claim, "metadata"), "uid") != uid)
    throw Conflict(where + " has UID " + Member(Member(claim, "metadata"), "uid").dump() +
                   ", not " + uid + " (it was replaced)");
  const json& allocation = Member(Member(claim, "status"), "allocation");
  std::vector<const json*> ours = ResultsHere(claim);
  if (ours.empty()) return {};
  // Its devices: one GPU or MIG instance, or several (one tenant over all of them).
  // (A MIG placement not made yet is made now: from here to its tenant's admission, no idle
  // instance is removed.)
  std::unique_lock<std::mutex> layout_lock;
  if (mig_) layout_lock = mig_->Lock();
  std::vector<SlotId> slots;
  std::vector<std::string> requests;
  for (const json* result : ours) {
    slots.push_back(SlotOf(MemberText(*result, "device"), where));
    requests.push_back(MemberText(*result, "request"));
  }

  // The parameters: the claim's (or its class's) opaque config for its requests.
  json parameters = json::object();
  const json& configs = Member(Member(allocation, "devices"), "config");
  if (configs.is_array()) {
    for (const json& c : configs) {  // the class's first, then the claim's, which win
      const json& opaque = Member(c, "opaque");
      if (Member(opaque, "driver") != kDraDriverName) continue;
      const json& only = Member(c, "requests");
      if (only.is_array() && !only.empty() &&
          std::none_of(requests.begin(), requests.end(), [&](const std::string& r) {
            return std::find(only.begin(), only.end(), r) != only.end();
          }))
        continue;
      const json& p = Member(opaque, "parameters");
      if (!p.is_object()) throw BadInput(where + ": opaque parameters must be an object");
      for (auto& [k, v] : p.items()) parameters[k] = v;
    }
  }
  for (auto& [k, v] : parameters.items())
    if (k != "memory" && k != "compute" && k != "priority" && k != "owner_uid")
      throw BadInput(where + ": parameter '" + k +
                     "' is not one of memory, compute, priority, owner_uid");
  // What the allocation consumed of each device: a memory quota each, the same compute on all.
  json consumed = Member(*ours[0], "consumedCapacity");
  for (const json* result : ours)
    if (Member(Member(*result, "consumedCapacity"), "compute") != Member(consumed, "compute"))
      throw BadInput(where +
                     ": its devices consumed different compute; a tenant over several GPUs has "
                     "the same compute limits on each (set parameters.compute)");
  // The devices as gpumuxd describes them now: their memory, and their UUIDs on real GPUs.
  json gpus = agent_.Gpus();
  std::vector<uint64_t> quotas;  // each device's: what it consumed, else all of it
  std::vector<std::string> uuids;
  for (size_t i = 0; i < slots.size(); ++i) {
    json described;
    for (const json& g : gpus["gpus"]) {
      if (g["index"] != slots[i].gpu) continue;
      if (slots[i].instance < 0) described = g;
      for (const json& in : g.value("instances", json::array()))
        if (in["instance"] == slots[i].instance) described = in;
    }
    uint64_t bytes = described.is_object() ? described.value("memory_bytes", uint64_t{0}) : 0;
    if (bytes == 0)
      throw NotFound(where + ": device " + MemberText(*ours[i], "device") +
                     " is not on this node now");
    const json& memory = Member(Member(*ours[i], "consumedCapacity"), "memory");
    quotas.push_back(memory.is_string() ? QuantityBytes(memory, where + ": consumedCapacity.memory")
                                        : bytes);
    if (std::string uuid = MemberText(described, "uuid"); !uuid.empty()) uuids.push_back(uuid);
  }

  agent::TenantRequest admit;
  admit.id = ClaimTenantId(uid);
  admit.source = "kubernetes claim " + ns + "/" + name;
  admit.labels.pod_namespace = ns;
  SetTenantSlots(slots, &admit);
  admit.memory = parameters.contains("memory")
                     ? std::vector<uint64_t>{QuantityBytes(parameters["memory"],
                                                           where + ": parameters.memory")}
                     : quotas;
  admit.memory_per_gpu = !parameters.contains("memory") && quotas.size() > 1;
  if (parameters.contains("compute"))
    admit.compute_percent = Percent(parameters["compute"], where + ": parameters.compute");
  else if (Member(consumed, "compute").is_string())
    admit.compute_percent = Percent(consumed["compute"], where + ": consumedCapacity.compute");
  if (parameters.contains("priority")) {
    const json& priority = parameters["priority"];
    try {
      admit.priority =
          node::ParsePriority(priority.is_string() ? priority.get<std::string>() : priority.dump());
    } catch (const Error& e) {
      throw e.Within(where + ": parameters.priority");
    }
  }
  // A claim reserved for one pod: only that pod's processes may draw on it. (A claim shared by
  // several pods is held to its owner uid.)
  const json& consumers = Member(Member(claim, "status"), "reservedFor");
  if (consumers.is_array() && consumers.size() == 1 && Member(consumers[0], "resource") == "pods" &&
      Member(consumers[0], "uid").is_string()) {
    admit.cgroup = PodCgroup(consumers[0]["uid"]);
    if (Member(consumers[0], "name").is_string()) admit.labels.pod = consumers[0]["name"];
  }
  // Its owner: as the config says, else the uid of the first process of the pod it is reserved
  // for, else root.
  const json& owner = Member(parameters, "owner_uid");
  if (owner.is_number_unsigned() && owner.get<uint64_t>() < uint64_t(uid_t(-1)))
    admit.owner_uid = uid_t(owner.get<uint64_t>());
  else if (owner == "learn" || (owner.is_null() && admit.cgroup))
    admit.learn_owner = true;
  else if (owner.is_null())
    admit.owner_uid = 0;
  else
    throw BadInput(where + ": parameters.owner_uid: expected a uid or \"learn\", got " +
                   owner.dump());

  agent::Admission admitted = agent_.Admit(admit);
  if (layout_lock.owns_lock()) layout_lock.unlock();
  json spec = CdiSpec(uid, EditsForTenant(admitted.answer, uuids));
  // Written beside and renamed over: the runtime never reads half a spec.
  std::filesystem::create_directories(config_.cdi_dir);
  std::string path = CdiPath(uid), tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << spec.dump(2) << "\n";
    if (!out.flush()) throw Unavailable(tmp + ": cannot write the CDI spec");
  }
  std::filesystem::rename(tmp, path);
  // Each device the claim was allocated; the container gets the one CDI device that starts it as
  // the tenant of all of them.
  std::vector<PreparedDevice> prepared;
  for (size_t i = 0; i < ours.size(); ++i) {
    prepared.push_back(
        {requests[i].empty() ? std::vector<std::string>() : std::vector<std::string>{requests[i]},
         config_.node_name,
         MemberText(*ours[i], "device"),
         {std::string(kCdiKind) + "=" + uid},
         MemberText(*ours[i], "shareID")});
  }
  return prepared;
}

void DraDriver::Unprepare(const std::string& uid) {
  agent_.Remove(ClaimTenantId(uid), /*missing_ok=*/true);
  std::filesystem::remove(CdiPath(uid));
  std::lock_guard lock(claims_mu_);
  claims_.erase(uid);
}

}  // namespace gpumux::k8s
