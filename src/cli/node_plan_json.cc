#include "cli/node_plan_json.h"

#include <fmt/format.h>

#include "base/error.h"

namespace gpumux {
namespace {

using nlohmann::json;

// A field of a JSON object, checked for presence and type; errors name `where`.key.
class Fields {
 public:
  Fields(const json& object, std::string where) : j_(object), where_(std::move(where)) {
    if (!j_.is_object()) throw BadInput(where_ + ": expected an object");
  }
  bool Has(const char* key) const { return j_.contains(key); }
  int Int(const char* key, int min, int max) const {
    const json& v = At(key);
    if (!v.is_number_integer() || v.get<int64_t>() < min || v.get<int64_t>() > max) {
      Fail(key, fmt::format("expected a whole number from {} to {}", min, max));
    }
    return int(v.get<int64_t>());
  }
  uint64_t Bytes(const char* key) const {
    const json& v = At(key);
    if (!v.is_number_unsigned()) Fail(key, "expected a number of bytes");
    return v.get<uint64_t>();
  }
  std::string String(const char* key) const {
    const json& v = At(key);
    if (!v.is_string() || v.get<std::string>().empty()) Fail(key, "expected a non-empty string");
    return v.get<std::string>();
  }
  const json& Array(const char* key) const {
    const json& v = At(key);
    if (!v.is_array()) Fail(key, "expected an array");
    return v;
  }
  std::string Where(const char* key) const { return where_ + "." + key; }
  const std::string& where() const { return where_; }

 private:
  const json& At(const char* key) const {
    if (!j_.contains(key)) throw BadInput(Where(key) + ": missing");
    return j_.at(key);
  }
  [[noreturn]] void Fail(const char* key, const std::string& why) const {
    throw BadInput(Where(key) + ": " + why);
  }
  const json& j_;
  std::string where_;
};

}  // namespace

json ModeRequest(const NodeGpuPlan& gpu) {
  json body = {{"mode", std::string(ShareModeName(gpu.mode))}};
  if (gpu.mode == ShareMode::kMig) body["layout"] = gpu.layout;
  return body;
}

agent::TenantRequest AdmitRequest(const NodeTenantPlan& t) {
  agent::TenantRequest r;
  r.id = t.id, r.gpu = t.gpu, r.memory = {t.memory_bytes}, r.source = "plan";
  if (t.instance >= 0) r.instance = t.instance;
  r.compute_percent = t.compute_percent;
  r.priority = t.priority;
  r.weight = t.weight;
  return r;
}

json ToJson(const NodePlan& plan) {
  json gpus = json::array(), tenants = json::array();
  for (const NodeGpuPlan& g : plan.gpus) {
    json j = ModeRequest(g);
    j.update({{"gpu", g.gpu}, {"kind", g.kind}, {"memory_bytes", g.memory_bytes}});
    gpus.push_back(j);
  }
  for (const NodeTenantPlan& t : plan.tenants) {
    json j = agent::TenantRequestJson(AdmitRequest(t));
    j.update({{"name", t.name}, {"need_bytes", t.need_bytes}});
    tenants.push_back(j);
  }
  return {{"gpus", gpus}, {"tenants", tenants}};
}

NodePlan NodePlanFromJson(const json& j, const std::string& where) {
  Fields top(j, where);
  NodePlan plan;
  const json& gpus = top.Array("gpus");
  for (size_t i = 0; i < gpus.size(); ++i) {
    Fields f(gpus[i], top.Where("gpus") + "[" + std::to_string(i) + "]");
    NodeGpuPlan g;
    g.gpu = f.Int("gpu", 0, 1023);
    g.kind = f.String("kind");
    g.memory_bytes = f.Bytes("memory_bytes");
    std::optional<ShareMode> mode = ParseShareMode(f.String("mode"));
    if (!mode || *mode == ShareMode::kWhole)
      throw BadInput(f.Where("mode") + ": expected timeslice, mps or mig");
    g.mode = *mode;
    if (g.mode == ShareMode::kMig) {
      for (const json& p : f.Array("layout")) {
        if (!p.is_string()) throw BadInput(f.Where("layout") + ": expected MIG profile names");
        g.layout.push_back(p.get<std::string>());
      }
    }
    plan.gpus.push_back(std::move(g));
  }
  const json& tenants = top.Array("tenants");
  for (size_t i = 0; i < tenants.size(); ++i) {
    Fields f(tenants[i], top.Where("tenants") + "[" + std::to_string(i) + "]");
    // Each tenant is the request that admits it (node/agent/tenant_request.h), read as gpumuxd
    // reads it, with the name the plan gave it and what it needs.
    json request = tenants[i];
    request.erase("name"), request.erase("need_bytes");
    agent::TenantRequest q;
    try {
      q = agent::TenantRequestFromJson(request);
      if (q.id.empty()) throw BadInput("id: missing");
      if (!q.gpu) throw BadInput("gpu: missing");
      if (q.memory.size() != 1 || q.memory_per_gpu)
        throw BadInput("memory: expected the quota in bytes");
      if (q.device || !q.gpus.empty() || !q.devices.empty())
        throw BadInput("a tenant of a plan is on one GPU (gpu, and instance)");
    } catch (const Error& e) {
      throw e.Within(f.where());
    }
    NodeTenantPlan t;
    t.id = q.id;
    t.name = f.Has("name") ? f.String("name") : t.id;
    t.gpu = *q.gpu;
    t.instance = q.instance.value_or(-1);
    t.memory_bytes = q.memory[0];
    t.compute_percent = q.compute_percent;
    t.priority = q.priority.value_or(Priority::kNormal);
    t.weight = q.weight.value_or(1);
    t.need_bytes = f.Has("need_bytes") ? f.Bytes("need_bytes") : t.memory_bytes;
    if (t.need_bytes > t.memory_bytes)
      throw BadInput(f.Where("need_bytes") + ": more than the quota (memory)");
    bool planned_gpu = false;
    for (const NodeGpuPlan& g : plan.gpus) planned_gpu |= g.gpu == t.gpu;
    if (!planned_gpu)
      throw BadInput(f.Where("gpu") + ": GPU " + std::to_string(t.gpu) +
                     " is not in the plan's gpus");
    plan.tenants.push_back(std::move(t));
  }
  return plan;
}

}  // namespace gpumux
