#include "cli/node_apply.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "base/error.h"
#include "cli/node_plan_json.h"
#include "core/units.h"

namespace gpumux {
namespace {

using nlohmann::json;

// A tenant gpumuxd already has, as `GET /v1/tenants` lists it.
struct NodeTenant {
  std::string id;
  int gpu = 0, instance = -1;
  uint64_t quota = 0;
  double compute_cap_percent = 100;
  size_t processes = 0;
};

std::vector<NodeTenant> ReadTenants(const json& answer) {
  std::vector<NodeTenant> out;
  for (const json& t : answer.at("tenants")) {
    out.push_back({t.at("id").get<std::string>(), t.at("gpu").get<int>(), t.value("instance", -1),
                   t.at("quota_bytes").get<uint64_t>(), t.value("compute_cap_percent", 100.0),
                   t.contains("processes") ? t["processes"].size() : 0});
  }
  return out;
}

std::string Where(int gpu, int instance) {
  return instance < 0 ? fmt::format("GPU {}", gpu)
                      : fmt::format("GPU {} instance {}", gpu, instance);
}

// Quotas of the plan's tenants on one device, fitted to what the node's device holds: as planned
// when they fit, else each need plus its share of what the node's device has to spare.
void FitQuotas(std::vector<NodeTenantPlan*>& on_device, uint64_t capacity,
               const std::string& where) {
  uint64_t planned = 0, needed = 0;
  std::vector<uint64_t> needs;
  for (const NodeTenantPlan* t : on_device) {
    planned += t->memory_bytes;
    needed += t->need_bytes;
    needs.push_back(t->need_bytes);
  }
  if (planned <= capacity) return;
  std::vector<uint64_t> quotas = ShareOutMemory(needs, capacity);
  uint64_t sum = 0;
  for (uint64_t q : quotas) sum += q;
  if (sum > capacity) {
    throw DoesNotFit(fmt::format("{} holds {}; the plan's tenants there need {}", where,
                                 FormatBytes(double(capacity)), FormatBytes(double(needed))));
  }
  for (size_t i = 0; i < on_device.size(); ++i) on_device[i]->memory_bytes = quotas[i];
}

}  // namespace

std::vector<AgentCall> CallsToApply(const NodePlan& input, const json& gpus_answer,
                                    const json& tenants_answer) {
  NodePlan plan = input;  // quotas may be fitted to the node's GPUs
  const json& gpus = gpus_answer.at("gpus");
  std::vector<NodeTenant> present = ReadTenants(tenants_answer);
  std::set<int> planned_gpus;
  for (const NodeGpuPlan& g : plan.gpus) planned_gpus.insert(g.gpu);
  std::map<std::string, const NodeTenantPlan*> planned;
  for (const NodeTenantPlan& t : plan.tenants) planned[t.id] = &t;

  // Tenants that are there: on a GPU the plan owns they must be the plan's, where the plan puts
  // them.
  for (const NodeTenant& t : present) {
    auto p = planned.find(t.id);
    if (p == planned.end()) {
      if (planned_gpus.count(t.gpu)) {
        throw Conflict(
            fmt::format("GPU {} has tenant '{}', which the plan does not name; remove it first "
                        "(DELETE /v1/tenants/{})",
                        t.gpu, t.id, t.id));
      }
      continue;
    }
    if (p->second->gpu != t.gpu || p->second->instance != t.instance) {
      throw Conflict(fmt::format("tenant '{}' is on {}; the plan puts it on {}; remove it first",
                                 t.id, Where(t.gpu, t.instance),
                                 Where(p->second->gpu, p->second->instance)));
    }
  }

  std::vector<AgentCall> calls;
  for (const NodeGpuPlan& g : plan.gpus) {
    if (size_t(g.gpu) >= gpus.size()) {
      throw DoesNotFit(fmt::format("the plan needs GPU {} ({}); this node has {} GPU{}", g.gpu,
                                   g.kind, gpus.size(), gpus.size() == 1 ? "" : "s"));
    }
    const json& node = gpus[size_t(g.gpu)];
    uint64_t memory = node.at("memory_bytes").get<uint64_t>();
    // Real GPUs show a little less than their catalog kind (an 80 GiB H100 shows 79.6 GiB); another
    // size is another kind of GPU.
    if (std::fabs(double(memory) - double(g.memory_bytes)) > 0.02 * double(g.memory_bytes)) {
      throw DoesNotFit(fmt::format("GPU {} is a {} with {}; the plan was made for a {} with {}",
                                   g.gpu, node.at("name").get<std::string>(),
                                   FormatBytes(double(memory)), g.kind,
                                   FormatBytes(double(g.memory_bytes))));
    }
    std::vector<NodeTenantPlan*> whole;
    for (NodeTenantPlan& t : plan.tenants) {
      if (t.gpu == g.gpu && t.instance < 0) whole.push_back(&t);
    }
    if (g.mode != ShareMode::kMig) FitQuotas(whole, memory, fmt::format("GPU {}", g.gpu));
    double caps = 0;
    std::map<int, double> instance_caps;
    for (const NodeTenantPlan& t : plan.tenants) {
      if (t.gpu == g.gpu && t.compute_percent) instance_caps[t.instance] += *t.compute_percent;
    }
    for (auto [instance, sum] : instance_caps) caps = std::max(caps, sum);
    if (caps > 100 + 1e-9) {
      throw DoesNotFit(fmt::format("GPU {}: the plan's compute caps sum to {:.0f}%, more than 100%",
                                   g.gpu, caps));
    }

    std::string mode = node.at("mode").get<std::string>();
    std::vector<std::string> layout = node.value("layout", std::vector<std::string>{});
    bool same = mode == ShareModeName(g.mode) && (g.mode != ShareMode::kMig || layout == g.layout);
    if (same) continue;
    bool reslice = g.mode == ShareMode::kMig || mode == "mig";
    for (const NodeTenant& t : present) {
      if (t.gpu != g.gpu) continue;
      if (reslice || t.processes > 0) {
        throw Conflict(fmt::format(
            "GPU {} must change from {} to {}, and tenant '{}' {} there; stop and remove it "
            "first",
            g.gpu, mode, ShareModeName(g.mode), t.id, t.processes > 0 ? "runs" : "is admitted"));
      }
    }
    std::string what = fmt::format("GPU {}: {} -> {}", g.gpu, mode, ShareModeName(g.mode));
    if (g.mode == ShareMode::kMig) what += " " + fmt::format("{}", fmt::join(g.layout, " "));
    calls.push_back({"PUT", fmt::format("/v1/gpus/{}", g.gpu), ModeRequest(g), what});
  }

  // Tenants: quotas that shrink first, so that the room they leave is there for those that grow.
  std::vector<AgentCall> shrinking, growing;
  for (const NodeTenantPlan& t : plan.tenants) {
    auto there = std::find_if(present.begin(), present.end(),
                              [&](const NodeTenant& n) { return n.id == t.id; });
    double cap = t.compute_percent.value_or(100);
    std::string limits =
        FormatBytes(double(t.memory_bytes)) +
        (t.compute_percent ? fmt::format(", compute {}%", *t.compute_percent) : "");
    if (there == present.end()) {
      growing.push_back(
          {"POST", "/v1/tenants", AdmitRequest(t),
           fmt::format("admit {} on {}: {}", t.id, Where(t.gpu, t.instance), limits)});
    } else if (there->quota != t.memory_bytes ||
               std::fabs(there->compute_cap_percent - cap) > 0.05) {
      json body = AdmitRequest(t);
      // An update is a PUT without the placement (a tenant does not move).
      body.erase("id"), body.erase("gpu"), body.erase("instance"), body.erase("source");
      if (!t.compute_percent) body["compute"] = "100%";
      (t.memory_bytes < there->quota ? shrinking : growing)
          .push_back({"PUT", "/v1/tenants/" + t.id, body,
                      fmt::format("update {} on {}: {}", t.id, Where(t.gpu, t.instance), limits)});
    }
  }
  calls.insert(calls.end(), shrinking.begin(), shrinking.end());
  calls.insert(calls.end(), growing.begin(), growing.end());
  return calls;
}

std::vector<AgentCall> ApplyNodePlan(const agent::AgentClient& agent, const NodePlan& plan,
                                     bool dry_run) {
  std::vector<AgentCall> calls = CallsToApply(plan, agent.Gpus(), agent.Tenants());
  if (dry_run) return calls;
  for (size_t i = 0; i < calls.size(); ++i) {
    const AgentCall& c = calls[i];
    try {
      if (c.method == "PUT" && c.path.rfind("/v1/gpus/", 0) == 0) {
        agent.SetMode(std::stoi(c.path.substr(9)), c.body);
      } else if (c.method == "POST") {
        agent.Admit(c.body);
      } else {
        agent.Update(c.path.substr(c.path.rfind('/') + 1), c.body);
      }
    } catch (const Error& e) {
      throw e.Within(fmt::format("{} of {} calls made, then {} ({})", i, calls.size(), c.what,
                                 c.method + " " + c.path));
    }
  }
  return calls;
}

}  // namespace gpumux
