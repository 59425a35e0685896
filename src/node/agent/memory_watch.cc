#include "node/agent/memory_watch.h"

#include <optional>
#include <set>

#include "base/cgroup.h"
#include "base/error.h"
#include "base/process.h"
#include "service/log.h"

namespace gpumux::agent {

MemoryWatch::Claim MemoryWatch::ClaimOf(const DeviceSlot& slot, pid_t pid,
                                        const std::vector<const TenantRecord*>& here) {
  Claim c;
  std::optional<std::string> named = ProcessEnvironment(pid, "GPUMUX_TENANT");
  c.claimed = named.value_or("").substr(0, node::kTenantIdSize);
  std::optional<uid_t> uid = ProcessUid(pid);
  if (!uid) return c;
  const std::vector<CgroupDir> cgroups = CgroupDirsOf(pid);
  std::vector<const TenantRecord*> may_be, in_cgroup;
  for (const TenantRecord* candidate : here) {
    const TenantRecord& t = *candidate;
    if ((t.owner != *uid && !t.owner_unknown()) || !slot.authority->FindTenant(t.id)) continue;
    bool by_name = named && *named == t.id;
    if (!t.cgroup.empty()) {
      if (!InCgroupNamed(cgroups, t.cgroup)) continue;
      in_cgroup.push_back(&t);
    } else if (*uid == 0 && !by_name) {
      continue;  // the administrator's own work is not root's tenants' unless it says so
    }
    if (by_name) {
      c.tenant = t.id;
      c.named = true;
      return c;
    }
    may_be.push_back(&t);
  }
  const std::vector<const TenantRecord*>& pick = in_cgroup.empty() ? may_be : in_cgroup;
  if (pick.size() == 1) c.tenant = pick[0]->id;
  c.several = pick.size() > 1;
  return c;
}

void MemoryWatch::AdoptUngranted(DeviceSlot& slot, const std::vector<const TenantRecord*>& here) {
  std::vector<DeviceMeter::Held> held;
  slot.meter->ReadMemory(&held);
  const std::string device = node::DeviceStem(slot.device);
  for (const DeviceMeter::Held& h : held) {
    if (slot.authority->FindProcess(h.pid)) continue;  // gpumuxd granted what it holds
    Claim c = ClaimOf(slot, h.pid, here);
    if (!c.named) {
      service::Log("info", "a process holds memory on the device that no tenant here accounts for",
                   {{"device", device},
                    {"pid", std::to_string(h.pid)},
                    {"bytes", std::to_string(h.bytes)},
                    {"claims_tenant", c.claimed}});
      continue;
    }
    try {
      slot.authority->Adopt(
          slot.authority->RegisterProcess(*slot.authority->FindTenant(c.tenant), h.pid), h.bytes);
    } catch (const Error& e) {  // it exited meanwhile, or its tenant's table is full
      service::Log("warn", "cannot adopt a tenant process's memory",
                   {{"tenant", c.tenant}, {"pid", std::to_string(h.pid)}, {"reason", e.what()}});
      continue;
    }
    service::Log("warn", "adopted what a running tenant process holds, as the driver counts it",
                 {{"tenant", c.tenant},
                  {"device", device},
                  {"pid", std::to_string(h.pid)},
                  {"bytes", std::to_string(h.bytes)}});
  }
  slot.PublishUsage();
}

void MemoryWatch::Check(DeviceSlot& slot, const std::vector<const TenantRecord*>& here) {
  slot.device_bytes.clear();
  slot.memory.clear();
  // Those the compute tick saw using GPU time unregistered, and those that hold memory here
  // unregistered, are charged their GPU time by their claim.
  std::set<pid_t> unregistered = std::move(slot.unregistered_users);
  slot.unregistered_users.clear();
  for (const auto& [pid, tenant] : slot.bypassers) unregistered.insert(pid);  // still there?
  slot.bypassers.clear();
  std::vector<DeviceMeter::Held> held;
  bool counted = slot.meter->ReadMemory(&held);
  for (pid_t pid : unregistered) {
    if (slot.authority->FindProcess(pid)) continue;
    if (Claim c = ClaimOf(slot, pid, here); !c.tenant.empty()) slot.bypassers[pid] = c.tenant;
  }
  if (!counted) return;  // the device cannot say what they hold
  std::vector<node::TenantUsage> usage = slot.Usage();
  std::map<std::string, std::vector<ProcessMemory>> processes;  // by tenant
  for (const node::TenantUsage& u : usage) {
    for (auto [pid, granted] : u.processes) processes[u.id].push_back({pid, granted, 0, true});
  }
  for (const DeviceMeter::Held& h : held) {
    if (killed_.count(h.pid)) continue;  // killed, and its memory not freed yet
    slot.device_bytes[h.pid] = h.bytes;
    if (slot.authority->FindProcess(h.pid)) continue;  // registered: its holding is filled below
    Claim c = ClaimOf(slot, h.pid, here);
    if (!c.tenant.empty()) {
      processes[c.tenant].push_back({h.pid, 0, h.bytes, false});
      slot.bypassers[h.pid] = c.tenant;
    } else if (c.several) {  // a tenant user's program that bypassed the shim: no quota is its
      MemoryCheck check = CheckTenantMemory(0, {{h.pid, 0, h.bytes, false}}, {});
      for (pid_t pid : check.over) Enforce(slot, "", check, pid);
    } else if (std::optional<uint64_t> start = ProcessStartTime(h.pid);
               start && reported_.emplace(h.pid, *start).second) {
      service::Log("info", "a process holds memory on the device that no tenant here accounts for",
                   {{"device", node::DeviceStem(slot.device)},
                    {"pid", std::to_string(h.pid)},
                    {"bytes", std::to_string(h.bytes)},
                    {"claims_tenant", c.claimed}});
    }
  }
  for (auto& [id, list] : processes) {
    for (ProcessMemory& p : list) {
      auto it = slot.device_bytes.find(p.pid);
      if (p.registered && it != slot.device_bytes.end()) p.held = it->second;
    }
  }
  for (const node::TenantUsage& u : usage) {
    MemoryCheck check = CheckTenantMemory(u.quota, processes[u.id], allowance_);
    // Where the driver holds the tenant's cgroup to a limit, it refused what would pass it: only
    // what it did not hold is this check's to end.
    if (auto g = slot.group_limits.find(u.id); g != slot.group_limits.end() &&
                                               !g->second.group_dir.empty() &&
                                               check.held <= g->second.hard)
      check.over.clear();
    slot.memory[u.id] = check;
    for (pid_t pid : check.over) Enforce(slot, u.id, check, pid);
  }
}

void MemoryWatch::Enforce(DeviceSlot& slot, const std::string& tenant, const MemoryCheck& check,
                          pid_t pid) {
  std::optional<uint64_t> start = ProcessStartTime(pid);
  if (!start || killed_.count(pid)) return;
  std::vector<std::pair<std::string, std::string>> fields = {
      {"tenant", tenant.empty() ? "(one of several of its user's, naming none)" : tenant},
      {"device", node::DeviceStem(slot.device)},
      {"pid", std::to_string(pid)},
      {"held_bytes", std::to_string(check.held)},
      {"outside_grants_bytes", std::to_string(check.outside)},
      {"limit_bytes", std::to_string(check.limit)}};
  if (!kill_) {
    if (reported_.emplace(pid, *start).second)
      service::Log("warn",
                   "a tenant holds device memory past its quota around the shim; not killed "
                   "(--over-quota log)",
                   fields);
    return;
  }
  if (!KillProcess(pid, *start)) return;  // gone meanwhile
  killed_[pid] = *start;
  ++slot.memory_kills[tenant];
  service::Log("warn",
               "killed a process that holds device memory past its tenant's quota around the shim",
               fields);
}

void MemoryWatch::ForgetExited() {
  std::erase_if(killed_, [](const auto& k) { return ProcessStartTime(k.first) != k.second; });
  std::erase_if(reported_, [](const auto& r) { return ProcessStartTime(r.first) != r.second; });
}

}  // namespace gpumux::agent
