// One device that tenants are admitted on: a whole GPU, or one MIG instance of it (a device of its
// own). It holds gpumuxd's two ledgers of the device (the view every tenant maps read-only, and the
// authority only gpumuxd maps), the device's meter, and what the compute tick and the memory check
// learnt about its processes.
//
// Not thread-safe: the Agent's lock guards every slot.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "node/agent/device_meter.h"
#include "node/agent/memory_guard.h"
#include "node/agent/share_backend.h"
#include "node/device.h"
#include "node/ledger/ledger.h"

namespace gpumux::agent {

struct DeviceSlot {
  node::Device device;
  // The view tenants map read-only (mode 0644): each tenant's limits, usage and launch gate, and
  // its processes; written by gpumuxd alone.
  std::string ledger_path;
  std::unique_ptr<node::Ledger> ledger;
  // gpumuxd's alone (mode 0600 in <runtime-dir>/private): each tenant's quota, the memory granted
  // to each of its processes, and its compute state.
  std::string authority_path;
  std::unique_ptr<node::Ledger> authority;
  std::unique_ptr<DeviceMeter> meter;
  uint64_t next_meter_read_ns = 0;
  // What holds its tenants' quotas besides the shim (ShareBackend::Enforcement), and, where the
  // driver does, the limit gpumuxd set for each tenant bound to a cgroup, by tenant id: the
  // group's directory (learnt from the first of its processes to draw on the tenant) and the hard
  // limit (its quota plus the context allowance of a tenant).
  QuotaEnforcement enforcement = QuotaEnforcement::kShim;
  struct GroupLimit {
    std::string group_dir;
    uint64_t hard = 0;
  };
  std::map<std::string, GroupLimit> group_limits{};
  // Each tenant here: which of its GPUs this is (its activity file keeps a record per GPU), and its
  // activity count there as the compute tick last read it.
  struct Seen {
    int gpu = 0;
    uint64_t active_ticks = 0;
    // A high-priority tenant's rhythm is its processes' claim. How much of the time lately it had
    // others keep clear of its bursts (an average over about kUseWindowNs, as of ticked_ns), and
    // whether that is past what the device measured it using (node::kMostYield of the time, or
    // twice its use): then its rhythm is not published to them until it is back under.
    uint64_t ticked_ns = 0;
    double kept_clear = 0;
    bool muted = false;
  };
  std::map<std::string, Seen> seen{};
  // What the driver last said each process here holds, and the memory check of each tenant by id
  // (MemoryWatch); both empty where the device cannot say. Processes killed for each tenant.
  std::map<pid_t, uint64_t> device_bytes{};
  std::map<std::string, MemoryCheck> memory{};
  std::map<std::string, uint64_t> memory_kills{};
  // Processes that use the device without having registered (they bypass the shim): those the
  // compute tick saw using GPU time, for the memory check to look at, and those the memory check
  // found to be a tenant's, whose GPU time the tick then charges to that tenant, by pid.
  std::set<pid_t> unregistered_users{};
  std::map<pid_t, std::string> bypassers{};

  // Opens the two ledgers of `d` in `runtime_dir` (the view) and `runtime_dir`/private (the
  // authority), or makes each anew, saying why in the log, where what is there is not one of this
  // device: gpumuxd never refuses to start over a file. Throws Error where it cannot write them.
  static DeviceSlot Open(const node::Device& d, const std::string& runtime_dir,
                         std::unique_ptr<DeviceMeter> meter);

  // Every tenant's figures, from the authority.
  std::vector<node::TenantUsage> Usage() const { return authority->Snapshot(); }
  // Returns to their tenants what dead processes held; returns the bytes. Updates the view.
  uint64_t ReclaimDead();
  // Copies the authority's processes and each tenant's usage into the view (what tenants read).
  void PublishUsage();
  // Makes the view anew and empty, after something outside gpumuxd overwrote its header; the
  // caller adds its tenants back. The processes that map the old one keep it (Ledger::Retire).
  void RemakeView();
  // Takes tenant `id` out of both ledgers and forgets what was learnt about it here.
  void Forget(const std::string& id);
  // Removes both ledgers' files (a GPU whose MIG layout changes, its slots empty of tenants).
  void RemoveFiles() const;
};

}  // namespace gpumux::agent
