#include "share/node_plan.h"

#include <cmath>
#include <map>
#include <set>

#include "base/error.h"
#include "base/tenant_id.h"

namespace gpumux {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

uint64_t MiBUp(double bytes) { return uint64_t(std::ceil(bytes / double(kMiB))); }

// The plan's tenant behind each planned name ("chat-13b#2" is an instance of class "chat-13b").
std::map<std::string, const Tenant*> TenantsByPlannedName(const PlanInput& input) {
  std::map<std::string, const Tenant*> by_name;
  for (const TenantClass& c : input.classes) {
    if (c.count == 1) by_name[c.tenant.name] = &c.tenant;
    for (int i = 0; c.count > 1 && i < c.count; ++i) {
      by_name[c.tenant.name + "#" + std::to_string(i + 1)] = &c.tenant;
    }
  }
  return by_name;
}

// The plan's tenant an outcome named `name` is: a tensor-parallel job's part ("<job>.tp<k>",
// fleet_planner.cc) is its job's. Null for a name the plan does not hold.
const Tenant* TenantNamed(const std::map<std::string, const Tenant*>& tenants,
                          const std::string& name) {
  auto t = tenants.find(name);
  if (t != tenants.end()) return t->second;
  size_t tp = name.rfind(".tp");
  if (tp == std::string::npos || tp + 3 == name.size() ||
      name.find_first_not_of("0123456789", tp + 3) != std::string::npos)
    return nullptr;
  t = tenants.find(name.substr(0, tp));
  return t != tenants.end() ? t->second : nullptr;
}

}  // namespace

std::string TenantIdFor(const std::string& name) {
  std::string id;
  for (char c : name.substr(0, kMaxTenantIdLength)) id += IsTenantIdChar(c) ? c : '-';
  if (id.empty() || id == "." || id == "..") id = "tenant" + id;
  return id;
}

std::vector<uint64_t> ShareOutMemory(const std::vector<uint64_t>& needs, uint64_t capacity) {
  std::vector<uint64_t> mib;
  uint64_t needed = 0, total_need = 0;
  for (uint64_t n : needs) {
    mib.push_back(MiBUp(double(n)));
    needed += mib.back();
    total_need += n;
  }
  uint64_t capacity_mib = capacity / kMiB;
  if (needed <= capacity_mib && !needs.empty()) {
    uint64_t spare = capacity_mib - needed;
    for (size_t i = 0; i < needs.size(); ++i) {
      // In proportion to need (evenly when nothing is needed); rounding down keeps the sum in.
      double share =
          total_need > 0 ? double(needs[i]) / double(total_need) : 1.0 / double(needs.size());
      mib[i] += uint64_t(std::floor(double(spare) * share));
    }
  }
  std::vector<uint64_t> quotas;
  for (uint64_t m : mib) quotas.push_back(m * kMiB);
  return quotas;
}

bool ShareOutQuotas(const std::vector<NodeTenantPlan*>& on_device, uint64_t capacity) {
  std::vector<uint64_t> needs;
  for (const NodeTenantPlan* t : on_device) needs.push_back(t->need_bytes);
  std::vector<uint64_t> quotas = ShareOutMemory(needs, capacity);
  uint64_t sum = 0;
  bool fits = true;
  for (size_t i = 0; i < on_device.size(); ++i) {
    on_device[i]->memory_bytes = quotas[i];
    fits = fits && !__builtin_add_overflow(sum, quotas[i], &sum) && sum <= capacity;
  }
  return fits;
}

namespace {

// Whether a tenant's SLO bounds the speed its users see (a time per token, or a model's tokens per
// second per sequence: they wait on each step), not its throughput (a generic job's steps per
// second) or its slowdown against running alone (a batch or training job's).
bool KeepsItsOwnSpeed(const Tenant& t) {
  return t.slo.max_ms_per_token || (t.slo.min_rate && t.work.kind != "generic");
}

// Whether a GPU's tenants include one whose SLO does not bound its own speed.
bool SharesWithThroughput(const StrategyResult& chosen,
                          const std::map<std::string, const Tenant*>& tenants) {
  for (const TenantOutcome& o : chosen.tenants) {
    const Tenant* t = TenantNamed(tenants, o.name);
    if (t && !KeepsItsOwnSpeed(*t)) return true;
  }
  return false;
}

}  // namespace

NodePlan MakeNodePlan(const PlanInput& input, const Plan& plan) {
  std::map<std::string, const Tenant*> tenants = TenantsByPlannedName(input);
  NodePlan node;
  std::set<std::string> ids;
  for (size_t i = 0; i < plan.gpus.size(); ++i) {
    const PlannedGpu& planned = plan.gpus[i];
    const StrategyResult& chosen = planned.chosen;
    const GpuKind& kind = *input.fleet[planned.fleet_index].gpu;
    const int index = planned.node_gpu >= 0 ? planned.node_gpu : int(i);
    NodeGpuPlan gpu{index, kind.name, uint64_t(kind.memory_bytes), chosen.kind, {}};
    if (gpu.mode == ShareMode::kWhole)
      gpu.mode = ShareMode::kTimeSlice;  // one tenant, nothing to share
    if (chosen.layout) {
      for (const MigInstance& inst : chosen.layout->instances) {
        gpu.layout.push_back(inst.Entry());
      }
    }
    node.gpus.push_back(gpu);

    std::vector<NodeTenantPlan> on_gpu;
    for (size_t k = 0; k < chosen.tenants.size(); ++k) {
      const TenantOutcome& o = chosen.tenants[k];
      NodeTenantPlan t{TenantIdFor(o.name),           o.name,      index, -1, 0,
                       uint64_t(std::ceil(o.memory)), std::nullopt};
      if (chosen.layout) t.instance = int(k);  // outcome k holds instance k, alone
      const Tenant* tenant = TenantNamed(tenants, o.name);
      if (gpu.mode == ShareMode::kMps && tenant && tenant->mps_thread_cap < 1)
        t.compute_percent = tenant->mps_thread_cap * 100;
      if (tenant && gpu.mode != ShareMode::kMig && !t.compute_percent &&
          KeepsItsOwnSpeed(*tenant) && SharesWithThroughput(chosen, tenants))
        t.priority = Priority::kHigh;
      if (!ids.insert(t.id).second) {
        throw BadInput("tenants '" + o.name + "' and another both become gpumuxd tenant '" + t.id +
                       "' (ids keep letters, digits and ._-); rename one");
      }
      on_gpu.push_back(std::move(t));
    }
    if (chosen.layout) {
      for (size_t k = 0; k < on_gpu.size(); ++k)
        ShareOutQuotas({&on_gpu[k]}, uint64_t(chosen.layout->instances[k].profile->memory_bytes));
    } else {
      std::vector<NodeTenantPlan*> all;
      for (NodeTenantPlan& t : on_gpu) all.push_back(&t);
      ShareOutQuotas(all, gpu.memory_bytes);
    }
    for (NodeTenantPlan& t : on_gpu) node.tenants.push_back(std::move(t));
  }
  return node;
}

}  // namespace gpumux
