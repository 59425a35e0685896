// gpumuxd's memory check of one device at a time: reads what each process holds there as the
// driver counts it (DeviceMeter::ReadMemory), finds whose each one is, checks every tenant against
// its quota (memory_guard.h) and kills, or logs, the processes that put a tenant over it by memory
// the shim never granted (a program that allocates around it), unless the driver holds the
// tenant's cgroup to a limit it is within (DeviceSlot::group_limits). Processes of no tenant are
// logged once and never killed: gpumuxd does not judge other users' work. (docs/threat-model.md)
//
// Not thread-safe: the Agent's lock guards it with the slots.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "node/agent/agent_store.h"
#include "node/agent/device_slot.h"
#include "node/agent/memory_guard.h"

namespace gpumux::agent {

class MemoryWatch {
 public:
  // `allowance`: what a tenant's registered processes may hold beyond their grants. `kill`: false
  // logs a process over its tenant's limit instead of killing it.
  MemoryWatch(ContextAllowance allowance, bool kill) : allowance_(allowance), kill_(kill) {}

  // Checks the tenants of `slot` (`here`: the store's tenants admitted on it) and fills the slot's
  // device_bytes, memory, memory_kills and bypassers (whose GPU time the compute tick then charges
  // to them). Where the device cannot say what processes hold, only bypassers are found.
  void Check(DeviceSlot& slot, const std::vector<const TenantRecord*>& here);
  // Charges to their tenants what processes hold on `slot`'s device that gpumuxd granted them
  // nothing of: its ledger was made anew (an upgrade to another ledger version) while they ran.
  // Only processes started as their tenant (GPUMUX_TENANT) are adopted, at what the driver says
  // they hold (Ledger::Adopt). At start-up.
  void AdoptUngranted(DeviceSlot& slot, const std::vector<const TenantRecord*>& here);
  // Forgets the processes it killed or reported that have exited since (each is judged, or
  // logged, once while it lives).
  void ForgetExited();

 private:
  // Which of `here` a process that holds memory on `slot`'s device, and that gpumuxd granted
  // nothing, counts as. It may be tenant T if it runs as T's owner (any uid while T's is unknown)
  // and, where T has a cgroup, in it; root's processes may be root's tenants only by cgroup or by
  // name. It is the one it was started as (GPUMUX_TENANT) if it may be that one; else the one
  // whose cgroup it is in, or the only one it may be.
  struct Claim {
    std::string tenant;    // empty: none
    bool named = false;    // it was started as that tenant
    bool several = false;  // (no tenant) it may be any of several, and names none of them
    std::string claimed;   // the name it was started with (its own text, bounded)
  };
  Claim ClaimOf(const DeviceSlot& slot, pid_t pid, const std::vector<const TenantRecord*>& here);
  // Kills (or logs) process `pid` (of `check.over`) of tenant `tenant` (empty: several).
  void Enforce(DeviceSlot& slot, const std::string& tenant, const MemoryCheck& check, pid_t pid);

  ContextAllowance allowance_;
  bool kill_;
  // Processes it killed (pid -> start time) until they are gone, so a dying one is not judged
  // again; processes of no tenant that it reported, so each is logged once.
  std::map<pid_t, uint64_t> killed_;
  std::map<pid_t, uint64_t> reported_;
};

}  // namespace gpumux::agent
