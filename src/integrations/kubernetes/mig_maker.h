// Dynamic MIG for gpumux's node programs (the DRA driver and the device plugin, each with
// --dynamic-mig): makes the MIG instance a placement device names ("gpu-0-mig-1g-10gb-at-6",
// mig_partitions.h) when a tenant is to be admitted on it, and removes the instances it made once
// they have been idle (no tenant) for a grace period. It records each instance it makes
// (made_mig_instances.h) and removes only those, even after a restart: an instance it did not
// make (an operator's, a plan's) is kept (MigGpu::Instance::kept) and never removed.
//
// Thread-safety: every call may come from any thread. Making an instance and admitting its tenant
// are one step for the caller, who holds Lock() across both (idle removal waits for it).
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "integrations/kubernetes/made_mig_instances.h"
#include "integrations/kubernetes/mig_partitions.h"
#include "node/agent/agent_client.h"

namespace gpumux::k8s {

class MigMaker {
 public:
  // `agent` must outlive it. Reads the record at `record_path` (MadeMigInstances).
  MigMaker(agent::AgentClient* agent, std::string record_path,
           std::chrono::milliseconds idle_grace);

  // GPU `g` of gpumuxd's answer (GET /v1/gpus) as a MIG GPU, null when it is not one; the
  // instances not in `made` (as made() names them) are kept. Throws Error (bad input) for an
  // answer that does not read as gpumuxd's.
  static std::optional<MigGpu> Read(const nlohmann::json& g, const nlohmann::json& tenants,
                                    const std::set<std::string>& made);
  // The instances it made (MadeMigInstances::Key).
  std::set<std::string> made() const;

  // Held across making an instance (Make) and admitting a tenant on it.
  std::unique_lock<std::mutex> Lock() { return std::unique_lock(layout_mu_); }
  // With Lock() held: the instance the placement device `device` stands for, made first when it
  // is not there (gpumuxd changes the GPU instance by instance; idle instances it made that the
  // placement overlaps are removed, busy and kept ones stay). Throws Error naming `where`: not
  // found for a device this node does not offer now (not a placement of a MIG GPU here, or one a
  // busy or kept instance overlaps), or gpumuxd's refusal.
  MigGpu::Instance Make(const std::string& device, const std::string& where);
  // Removes the instances it made that have been idle for the grace period, as seen by the calls
  // before (an instance is first seen idle at one call, removed at a later one). Returns them
  // ("GPU N PROFILE@START"). Throws Error (unavailable) when gpumuxd cannot be asked.
  std::vector<std::string> RemoveIdle();

 private:
  agent::AgentClient* agent_;
  std::chrono::milliseconds idle_grace_;
  std::mutex layout_mu_;
  mutable std::mutex made_mu_;  // guards made_ (read by made() while the layout lock is held)
  MadeMigInstances made_;
  std::map<std::string, std::chrono::steady_clock::time_point> idle_since_;  // by its Key
};

}  // namespace gpumux::k8s
