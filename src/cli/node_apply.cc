#include "cli/node_apply.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "base/error.h"
#include "cli/node_plan_json.h"
#include "core/catalog.h"
#include "core/mig_layout.h"
#include "core/units.h"
#include "node/ledger/ledger.h"

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
  Priority priority = Priority::kNormal;
  uint32_t weight = 1;
};

std::vector<NodeTenant> ReadTenants(const json& answer) {
  std::vector<NodeTenant> out;
  for (const json& t : answer.at("tenants")) {
    out.push_back({t.at("id").get<std::string>(), t.at("gpu").get<int>(), t.value("instance", -1),
                   t.at("quota_bytes").get<uint64_t>(), t.value("compute_cap_percent", 100.0),
                   t.contains("processes") ? t["processes"].size() : 0,
                   ParsePriority(t.value("priority", "normal")), t.value("weight", 1u)});
  }
  return out;
}

std::string Where(int gpu, int instance) {
  return instance < 0 ? fmt::format("GPU {}", gpu)
                      : fmt::format("GPU {} instance {}", gpu, instance);
}

// `a + b`, or Error (does not fit) naming `where` when the sum passes 2^64 bytes.
uint64_t AddBytes(uint64_t a, uint64_t b, const std::string& where) {
  uint64_t sum;
  if (__builtin_add_overflow(a, b, &sum))
    throw DoesNotFit(where + ": the quotas sum past 2^64 bytes");
  return sum;
}

// Quotas of the plan's tenants on one device, fitted to what the node's device holds (a little
// less, on a real GPU, than the catalog kind the plan shared out): as planned where they fit, else
// shared out again (ShareOutQuotas) from their needs over what the node's device holds.
void FitQuotas(std::vector<NodeTenantPlan*>& on_device, uint64_t capacity,
               const std::string& where) {
  uint64_t planned = 0, needed = 0;
  for (const NodeTenantPlan* t : on_device) {
    planned = AddBytes(planned, t->memory_bytes, where);
    needed = AddBytes(needed, t->need_bytes, where);
  }
  if (planned <= capacity) return;
  if (!ShareOutQuotas(on_device, capacity)) {
    throw DoesNotFit(fmt::format("{} holds {}; the plan's tenants there need {}", where,
                                 FormatBytes(double(capacity)), FormatBytes(double(needed))));
  }
}

// The catalog's MIG geometry of GPU kind `kind` (the kind a plan was made for); none for a kind
// it does not know (gpumuxd then checks with the driver's) or without MIG.
std::optional<MigGeometry> MigGeometryOf(const Catalog& catalog, const std::string& kind) {
  try {
    return catalog.FindGpu(kind).mig;
  } catch (const Error&) {
    return std::nullopt;
  }
}

// Every request the plan would send, checked with the rules gpumuxd applies to it, so that no
// call is refused midway for what was wrong from the start: ids, compute caps and priorities
// (node::CheckTenant), one tenant per id, quotas above 0, and each MIG layout, and each quota
// within its instance, against the geometry the catalog gives the plan's GPU kind (where it knows
// it).
void CheckAsGpumuxdWould(const NodePlan& plan, const json& gpus, const Catalog& catalog) {
  std::set<std::string> ids;
  for (size_t i = 0; i < plan.tenants.size(); ++i) {
    const NodeTenantPlan& t = plan.tenants[i];
    std::string where = fmt::format("tenants[{}] ('{}')", i, t.name);
    try {
      node::TenantLimits limits{t.memory_bytes};
      if (t.compute_percent) limits.cap_permille = uint32_t(std::lround(*t.compute_percent * 10));
      limits.weight = t.weight, limits.priority = t.priority;
      node::CheckTenant(t.id, limits);
      agent::TenantRequestFromJson(
          agent::TenantRequestJson(AdmitRequest(t)));  // as gpumuxd reads it
    } catch (const Error& e) {
      throw e.Within(where);
    }
    if (!ids.insert(t.id).second) throw BadInput(where + ": id '" + t.id + "' appears twice");
    if (t.memory_bytes == 0) throw BadInput(where + ": memory: a quota of 0 bytes");
  }
  for (const NodeGpuPlan& g : plan.gpus) {
    if (g.mode != ShareMode::kMig || size_t(g.gpu) >= gpus.size()) continue;
    std::optional<MigGeometry> geometry = MigGeometryOf(catalog, g.kind);
    if (!geometry) continue;
    try {
      MigLayout placed = PlaceInCreationOrder(*geometry, g.layout);
      for (const NodeTenantPlan& t : plan.tenants) {
        if (t.gpu != g.gpu) continue;
        if (t.instance < 0 || size_t(t.instance) >= placed.instances.size())
          throw BadInput(fmt::format("tenant '{}' names instance {} of {}", t.id, t.instance,
                                     placed.instances.size()));
        auto holds = uint64_t(placed.instances[size_t(t.instance)].profile->memory_bytes);
        if (t.memory_bytes > holds)
          throw DoesNotFit(fmt::format("tenant '{}': {} is more than the {} of instance {} ({})",
                                       t.id, FormatBytes(double(t.memory_bytes)),
                                       FormatBytes(double(holds)), t.instance,
                                       placed.instances[size_t(t.instance)].profile->name));
      }
    } catch (const Error& e) {
      throw e.Within(fmt::format("GPU {} MIG layout", g.gpu));
    }
  }
}

// Re-lays the plan's MIG GPU `g` out, where it can, so that each instance tenants in `present` are
// on (in the node's `layout`) stays where it is: a planned tenant that runs there on an instance
// of the profile the plan gives it keeps that instance, its number and placement, and the plan's
// other instances are placed around the kept ones (the driver's default placement, kept ones
// first) and numbered in the plan's order; `tenants`' instance numbers follow. Leaves the plan as
// it is where no such layout exists (CheckBusyInstancesKept then names what must drain).
void LayOutAroundBusyInstances(NodeGpuPlan& g, const MigGeometry& geo,
                               const std::vector<std::string>& layout,
                               const std::vector<NodeTenant>& present,
                               std::vector<NodeTenantPlan>* tenants) {
  try {
    MigLayout now = PlaceInCreationOrder(geo, layout), next = PlaceInCreationOrder(geo, g.layout);
    const size_t n = next.instances.size();
    std::map<int, int> number;          // plan instance -> its number in the new layout
    std::map<int, std::string> pinned;  // new number -> "NAME@START" kept where it is
    for (const NodeTenant& t : present) {
      if (t.gpu != g.gpu || t.instance < 0 || size_t(t.instance) >= now.instances.size()) continue;
      auto p = std::find_if(tenants->begin(), tenants->end(),
                            [&](const NodeTenantPlan& q) { return q.id == t.id; });
      if (p == tenants->end() || p->gpu != g.gpu || p->instance < 0 || size_t(p->instance) >= n)
        continue;
      const MigInstance& was = now.instances[size_t(t.instance)];
      if (next.instances[size_t(p->instance)].profile->name != was.profile->name)
        return;  // it cannot keep its instance in this plan
      if (auto known = number.find(p->instance); known != number.end()) {
        if (known->second != t.instance) return;
        continue;  // a second tenant of the same instance
      }
      if (size_t(t.instance) >= n || pinned.count(t.instance)) return;
      number[p->instance] = t.instance;
      pinned[t.instance] = was.Entry();
    }
    if (pinned.empty()) return;
    // Placed with the kept instances first, so that the others find room around them.
    std::vector<std::string> order;
    for (const auto& [k, entry] : pinned) order.push_back(entry);
    std::vector<int> others;  // plan instances not kept, in the plan's order
    for (size_t j = 0; j < n; ++j) {
      if (number.count(int(j))) continue;
      others.push_back(int(j));
      order.push_back(next.instances[j].profile->name);
    }
    MigLayout placed = PlaceInCreationOrder(geo, order);
    std::vector<std::string> result(n);
    for (const auto& [k, entry] : pinned) result[size_t(k)] = entry;
    size_t free = 0;
    for (size_t o = 0; o < others.size(); ++o) {
      while (!result[free].empty()) ++free;
      const MigInstance& m = placed.instances[pinned.size() + o];
      result[free] = m.Entry();
      number[others[o]] = int(free);
    }
    PlaceInCreationOrder(geo, result);  // the driver takes it as numbered
    g.layout = result;
    for (NodeTenantPlan& t : *tenants)
      if (t.gpu == g.gpu && number.count(t.instance)) t.instance = number[t.instance];
  } catch (const Error&) {
    // No layout keeps them all: the plan stays, and the apply names what must drain.
  }
}

// Throws Error (conflict) naming every instance of GPU `g` that tenants in `present` are on
// (in the node's `layout`) and that the plan's layout moves or removes: they would have to drain
// (their tenants removed) first. Placed with the catalog's geometry of the plan's kind.
void CheckBusyInstancesKept(const NodeGpuPlan& g, const MigGeometry& geo,
                            const std::vector<std::string>& layout,
                            const std::vector<NodeTenant>& present) {
  MigLayout now = PlaceInCreationOrder(geo, layout), next = PlaceInCreationOrder(geo, g.layout);
  std::map<int, std::string> drain;  // instance -> its tenants
  for (const NodeTenant& t : present) {
    if (t.gpu != g.gpu || t.instance < 0) continue;
    const size_t k = size_t(t.instance);
    bool kept = k < now.instances.size() && k < next.instances.size() &&
                now.instances[k] == next.instances[k];
    if (!kept) drain[t.instance] += (drain[t.instance].empty() ? "'" : ", '") + t.id + "'";
  }
  if (drain.empty()) return;
  std::string list;
  for (const auto& [instance, tenants] : drain) {
    const MigInstance& m = now.instances.at(size_t(instance));
    list += fmt::format("{}instance {} ({} at {}: {})", list.empty() ? "" : "; ", instance,
                        m.profile->name, m.start, tenants);
  }
  throw Conflict(fmt::format(
      "GPU {}: the plan's MIG layout moves or removes instances that tenants are on, which must "
      "drain first (remove their tenants): {}",
      g.gpu, list));
}

}  // namespace

LiveNode ReadLiveNode(const json& gpus_answer, const json& tenants_answer) {
  LiveNode live;
  try {
    for (const json& g : gpus_answer.at("gpus")) {
      std::string mode = g.at("mode").get<std::string>();
      std::optional<ShareMode> parsed = ParseShareMode(mode);
      if (!parsed)
        throw BadInput("GPU " + g.value("index", json()).dump() + ": mode '" + mode + "'");
      live.gpus.push_back({*parsed, g.value("layout", std::vector<std::string>{}),
                           g.value("memory_bytes", uint64_t{0})});
    }
    for (const NodeTenant& t : ReadTenants(tenants_answer))
      live.tenants[t.id] = {t.gpu, t.instance};
  } catch (const json::exception& e) {
    throw BadInput(std::string("gpumuxd's answer: ") + e.what());
  }
  return live;
}

std::vector<AgentCall> CallsToApply(const NodePlan& input, const json& gpus_answer,
                                    const json& tenants_answer) {
  NodePlan plan = input;  // quotas may be fitted to the node's GPUs
  const json& gpus = gpus_answer.at("gpus");
  const Catalog catalog = Catalog::LoadBundled();
  CheckAsGpumuxdWould(plan, gpus, catalog);
  std::vector<NodeTenant> present = ReadTenants(tenants_answer);
  std::map<int, MigGeometry> geometries;  // of the plan's MIG GPUs, where the catalog has it
  for (NodeGpuPlan& g : plan.gpus) {
    std::optional<MigGeometry> geo = MigGeometryOf(catalog, g.kind);
    if (g.mode != ShareMode::kMig || !geo || size_t(g.gpu) >= gpus.size()) continue;
    const MigGeometry& kept = geometries[g.gpu] = *geo;
    const json& node = gpus[size_t(g.gpu)];
    if (node.value("mode", "") == "mig")
      LayOutAroundBusyInstances(g, kept, node.value("layout", std::vector<std::string>{}), present,
                                &plan.tenants);
  }
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
    if (!SameKindOfGpu(memory, g.memory_bytes)) {
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
    // From one MIG layout to another gpumuxd goes instance by instance: the instances tenants are
    // on stay, running, where the plan keeps them at their placement; else they must drain.
    if (auto geo = geometries.find(g.gpu); mode == "mig" && geo != geometries.end()) {
      CheckBusyInstancesKept(g, geo->second, layout, present);
      std::string what = fmt::format("GPU {}: MIG {} -> {}", g.gpu, fmt::join(layout, " "),
                                     fmt::join(g.layout, " "));
      calls.push_back({"PUT", fmt::format("/v1/gpus/{}", g.gpu), ModeRequest(g), what});
      continue;
    }
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
        (t.compute_percent ? fmt::format(", compute {}%", *t.compute_percent) : "") +
        (t.priority != Priority::kNormal ? fmt::format(", {} priority", PriorityName(t.priority))
                                         : "") +
        (t.weight != 1 ? fmt::format(", weight {}", t.weight) : "");
    if (there == present.end()) {
      growing.push_back(AgentCall::OnTenant(
          "POST", "/v1/tenants", AdmitRequest(t),
          fmt::format("admit {} on {}: {}", t.id, Where(t.gpu, t.instance), limits)));
    } else if (there->quota != t.memory_bytes ||
               std::fabs(there->compute_cap_percent - cap) > 0.05 ||
               there->priority != t.priority || there->weight != t.weight) {
      // An update names no place (a tenant does not move): its limits only.
      agent::TenantRequest update;
      update.memory = {t.memory_bytes};
      update.compute_percent = cap;
      update.priority = t.priority;
      update.weight = t.weight;
      (t.memory_bytes < there->quota ? shrinking : growing)
          .push_back(AgentCall::OnTenant(
              "PUT", "/v1/tenants/" + t.id, update,
              fmt::format("update {} on {}: {}", t.id, Where(t.gpu, t.instance), limits)));
    }
  }
  calls.insert(calls.end(), shrinking.begin(), shrinking.end());
  calls.insert(calls.end(), growing.begin(), growing.end());
  return calls;
}

namespace {

// The call that undoes `c` on a node whose state before it was `gpus` and `tenants`.
AgentCall Undo(const AgentCall& c, const json& gpus, const std::vector<NodeTenant>& tenants) {
  if (c.path.rfind("/v1/gpus/", 0) == 0) {
    const json& before = gpus.at("gpus").at(size_t(std::stoi(c.path.substr(9))));
    json body = {{"mode", before.at("mode")}};
    if (before.at("mode") == "mig") body["layout"] = before.value("layout", json::array());
    return {"PUT", c.path, body, "put GPU " + c.path.substr(9) + " back"};
  }
  if (c.method == "POST") {
    std::string id = c.tenant.id;
    return {"DELETE", "/v1/tenants/" + id, json(), "remove " + id};
  }
  std::string id = c.path.substr(c.path.rfind('/') + 1);
  for (const NodeTenant& t : tenants) {
    if (t.id == id) {
      agent::TenantRequest before;
      before.memory = {t.quota};
      before.compute_percent = t.compute_cap_percent;
      before.priority = t.priority;
      before.weight = t.weight;
      return AgentCall::OnTenant("PUT", c.path, before, "put " + id + "'s limits back");
    }
  }
  throw Internal("no earlier state of tenant '" + id + "'");
}

void Make(const agent::AgentClient& agent, const AgentCall& c) {
  if (c.method == "PUT" && c.path.rfind("/v1/gpus/", 0) == 0) {
    agent.SetMode(std::stoi(c.path.substr(9)), c.body);
  } else if (c.method == "POST") {
    agent.Admit(c.tenant);
  } else if (c.method == "DELETE") {
    agent.Remove(c.path.substr(c.path.rfind('/') + 1), /*missing_ok=*/true);
  } else {
    agent.Update(c.path.substr(c.path.rfind('/') + 1), c.tenant);
  }
}

}  // namespace

std::vector<AgentCall> ApplyNodePlan(const agent::AgentClient& agent, const NodePlan& plan,
                                     bool dry_run) {
  json gpus = agent.Gpus(), tenants = agent.Tenants();
  std::vector<AgentCall> calls = CallsToApply(plan, gpus, tenants);
  if (dry_run) return calls;
  std::vector<NodeTenant> before = ReadTenants(tenants);
  for (size_t i = 0; i < calls.size(); ++i) {
    try {
      Make(agent, calls[i]);
    } catch (const Error& e) {
      // All or nothing: what was done is undone, last first.
      std::string undone = fmt::format("the {} made before it undone", i);
      for (size_t k = i; k-- > 0;) {
        try {
          Make(agent, Undo(calls[k], gpus, before));
        } catch (const Error& u) {
          undone = fmt::format("undoing '{}' failed too ({}); the node holds calls 1 to {}",
                               calls[k].what, u.what(), k + 1);
          break;
        }
      }
      throw e.Within(fmt::format("call {} of {}, {} ({} {}), was refused; {}", i + 1, calls.size(),
                                 calls[i].what, calls[i].method, calls[i].path, undone));
    }
  }
  return calls;
}

std::vector<CalibrationFile> NodeCalibrations(const nlohmann::json& gpus,
                                              const std::string& where) {
  std::vector<CalibrationFile> found;
  if (!gpus.is_object() || !gpus.contains("gpus") || !gpus["gpus"].is_array()) return found;
  for (const nlohmann::json& g : gpus["gpus"]) {
    if (!g.is_object() || !g.contains("calibration")) continue;
    std::string gpu = where + ": GPU " + g.value("index", nlohmann::json(-1)).dump();
    std::string file = g.contains("calibration_file") && g["calibration_file"].is_string()
                           ? g["calibration_file"].get<std::string>()
                           : "calibration";
    CalibrationFile c{file + " (" + where + ")",
                      CalibrationFromJson(g["calibration"], gpu + ": calibration")};
    bool seen = false;
    for (const CalibrationFile& f : found) seen = seen || f.path == c.path;
    if (!seen) found.push_back(std::move(c));
  }
  return found;
}

}  // namespace gpumux
