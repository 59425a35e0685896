#include "node/agent/tenant_request.h"

#include <algorithm>
#include <cstdio>

#include "base/error.h"
#include "node/agent/request_body.h"
#include "node/ledger/activity.h"

namespace gpumux::agent {
namespace {

constexpr int64_t kMaxUid = 4'294'967'294;  // uid_t, less (uid_t)-1
constexpr size_t kMostPlaces = node::kMaxTenantGpus;

// "3" → GPU 3, "3.1" → MIG instance 1 of GPU 3; throws naming `key` for anything else.
TenantPlace ParseGpuPlace(const std::string& text, const char* key) {
  TenantPlace p;
  try {
    p = ParsePlace(text);
  } catch (const Error&) {
    p.gpu = -1;
  }
  if (p.gpu < 0 || p.gpu > 1023 || p.instance > 63 || p.memory || text.find('=') != text.npos)
    throw BadInput(std::string(key) + ": expected GPU indices (3) or MIG instances (\"3.1\"), got '" +
                   text + "'");
  return p;
}

// Letters, digits and `also`, throwing `what` otherwise.
void CheckName(const std::string& value, const char* also, const std::string& what) {
  for (char c : value) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    for (const char* a = also; !ok && *a; ++a) ok = c == *a;
    if (!ok) throw BadInput(what);
  }
}

}  // namespace

std::string PlaceText(const TenantPlace& p) {
  std::string text = std::to_string(p.gpu);
  if (p.instance >= 0) text += "." + std::to_string(p.instance);
  if (p.memory) text += "=" + std::to_string(p.memory);
  return text;
}

TenantPlace ParsePlace(const std::string& text) {
  TenantPlace p;
  unsigned long long memory = 0;
  int end = 0;
  bool ok = std::sscanf(text.c_str(), "%d%n", &p.gpu, &end) == 1;
  if (ok && text[size_t(end)] == '.') {
    int more = 0;
    ok = std::sscanf(text.c_str() + end + 1, "%d%n", &p.instance, &more) == 1;
    end += 1 + more;
  }
  if (ok && text[size_t(end)] == '=') {
    int more = 0;
    ok = std::sscanf(text.c_str() + end + 1, "%llu%n", &memory, &more) == 1;
    end += 1 + more;
    p.memory = memory;
  }
  if (!ok || size_t(end) != text.size() || p.gpu < 0 || p.instance < -1)
    throw BadInput("tenant place '" + text + "': expected GPU[.INSTANCE][=BYTES]");
  return p;
}

namespace {

TenantRequest Read(const RequestBody& body) {
  body.AllowOnly({"id",      "gpu",           "gpus",     "instance",    "device",
                  "devices", "join",          "shards",   "mps_percent", "memory",
                  "compute", "weight",        "priority", "owner_uid",   "source",
                  "cgroup",  "pod_namespace", "pod",      "container",   "job"});
  TenantRequest r;
  r.id = body.Text("id", 63).value_or("");

  if (auto gpu = body.Integer("gpu", 0, 1023)) r.gpu = int(*gpu);
  if (auto instance = body.Integer("instance", 0, 63)) r.instance = int(*instance);
  r.device = body.Text("device", 96);
  for (const std::string& place : body.NumberOrTextList("gpus", kMostPlaces).value_or(std::vector<std::string>{}))
    r.gpus.push_back(ParseGpuPlace(place, "gpus"));
  r.devices = body.TextList("devices", kMostPlaces).value_or(std::vector<std::string>{});
  if (body.Has("devices") && r.devices.empty()) throw BadInput("devices: expected 1 or more UUIDs");
  const char* list = body.Has("gpus") ? "gpus" : "devices";
  if (body.Has("gpus") && body.Has("devices"))
    throw BadInput("devices: give either gpus or devices, not both");
  if ((body.Has("gpus") || body.Has("devices")) &&
      (body.Has("gpu") || body.Has("instance") || body.Has("device")))
    throw BadInput(std::string(list) + ": give either a list or gpu (instance, device), not both");
  if (r.device && (r.gpu || r.instance))
    throw BadInput("device: give either a UUID or gpu (and instance), not both");
  for (size_t i = 0; i < r.gpus.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (r.gpus[i].gpu == r.gpus[j].gpu && r.gpus[i].instance == r.gpus[j].instance)
        throw BadInput("gpus: a GPU or instance is named twice");
  for (size_t i = 0; i < r.devices.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (r.devices[i] == r.devices[j]) throw BadInput("devices: a UUID is named twice");
  r.join = body.Flag("join").value_or(false);

  if (body.IsList("memory")) {
    r.memory = body.BytesList("memory", kMostPlaces);
    r.memory_per_gpu = true;
  } else if (auto memory = body.Bytes("memory")) {
    r.memory = {*memory};
  }
  for (size_t i = 0; i < r.memory.size(); ++i) {
    if (r.memory[i] == 0)
      throw BadInput(!r.memory_per_gpu
                         ? std::string("memory: a quota of 0 bytes")
                         : "memory: a quota of 0 bytes for GPU " + std::to_string(i + 1) +
                               " of the list; give each GPU's quota");
  }
  if (body.HoldsText("memory")) r.old_forms.push_back("memory");
  if (auto shards = body.Integer("shards", 1, 1'000'000)) r.shards = uint64_t(*shards);
  if (auto percent = body.Number("mps_percent", 0, 100)) {
    if (*percent <= 0) throw BadInput("mps_percent: expected above 0 and at most 100");
    r.mps_percent = *percent;
  }

  if (body.IsText("compute")) {
    r.compute_percent = node::ParseComputeCap(*body.Text("compute", 16)) / 10.0;
    r.old_forms.push_back("compute");
  } else if (auto percent = body.Number("compute", 0, 100)) {
    if (*percent <= 0) throw BadInput("compute: expected a percentage above 0 and at most 100");
    r.compute_percent = *percent;
  }
  if (auto weight = body.Integer("weight", 1, node::kMaxWeight)) r.weight = uint32_t(*weight);
  if (auto priority = body.Text("priority", 16)) r.priority = node::ParsePriority(*priority);

  if (body.IsText("owner_uid")) {
    if (body.Text("owner_uid", 16) != "learn")
      throw BadInput("owner_uid: expected a uid (0 to " + std::to_string(kMaxUid) +
                     ") or \"learn\"");
    r.learn_owner = true;
  } else if (auto owner = body.Integer("owner_uid", 0, kMaxUid)) {
    r.owner_uid = uid_t(*owner);
  }
  r.source = body.Text("source");
  if ((r.cgroup = body.Text("cgroup", 128)))
    CheckName(*r.cgroup, "._:/-",
              "cgroup: expected 1 to 128 letters, digits, '.', '_', ':', '/' or '-'");
  for (const TenantLabels::Field& f : TenantLabels::kFields) {
    if (auto value = body.Text(f.api_key, 253)) {
      CheckName(*value, "._-",
                std::string(f.api_key) + ": expected letters, digits, '.', '_' or '-'");
      r.labels.*f.value = *value;
    }
  }
  return r;
}

}  // namespace

TenantRequest ParseTenantRequest(const std::string& text) { return Read(RequestBody(text)); }

TenantRequest TenantRequestFromJson(const nlohmann::json& body) { return Read(RequestBody(body)); }

nlohmann::json TenantRequestJson(const TenantRequest& r) {
  nlohmann::json j = nlohmann::json::object();
  if (!r.id.empty()) j["id"] = r.id;
  if (r.gpu) j["gpu"] = *r.gpu;
  if (r.instance) j["instance"] = *r.instance;
  if (r.device) j["device"] = *r.device;
  if (!r.gpus.empty()) {
    j["gpus"] = nlohmann::json::array();
    for (const TenantPlace& p : r.gpus)
      j["gpus"].push_back(p.instance < 0 ? nlohmann::json(p.gpu) : nlohmann::json(PlaceText(p)));
  }
  if (!r.devices.empty()) j["devices"] = r.devices;
  if (r.join) j["join"] = true;
  if (r.memory.size() == 1 && !r.memory_per_gpu) j["memory"] = r.memory[0];
  if (r.memory.size() > 1 || (r.memory_per_gpu && !r.memory.empty())) j["memory"] = r.memory;
  if (r.shards) j["shards"] = *r.shards;
  if (r.mps_percent) j["mps_percent"] = *r.mps_percent;
  if (r.compute_percent) j["compute"] = *r.compute_percent;
  if (r.weight) j["weight"] = *r.weight;
  if (r.priority) j["priority"] = node::PriorityName(*r.priority);
  if (r.learn_owner) j["owner_uid"] = "learn";
  if (r.owner_uid && !r.learn_owner) j["owner_uid"] = *r.owner_uid;
  if (r.source) j["source"] = *r.source;
  if (r.cgroup) j["cgroup"] = *r.cgroup;
  for (const TenantLabels::Field& f : TenantLabels::kFields)
    if (!(r.labels.*f.value).empty()) j[f.api_key] = r.labels.*f.value;
  return j;
}

}  // namespace gpumux::agent
