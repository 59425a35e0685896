#include "integrations/slurm/step_request.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "base/comma_list.h"
#include "base/error.h"
#include "core/units.h"

namespace gpumux::slurm {

std::optional<agent::TenantRequest> StepRequest(const StepGrant& grant, const std::string& id) {
  bool shared = !grant.shards.empty() || !grant.mps_percent.empty() || !grant.mem.empty() ||
                !grant.compute.empty();
  if (grant.step_gpus.empty() || !shared) return std::nullopt;
  agent::TenantRequest request;
  request.id = id, request.join = true;
  std::vector<std::string> gpus = SplitCommas(grant.step_gpus);
  std::vector<std::string> uuids = SplitCommas(grant.visible_devices);
  bool by_uuid =
      !uuids.empty() && (uuids[0].rfind("MIG-", 0) == 0 || uuids[0].rfind("GPU-", 0) == 0);
  if (by_uuid && uuids.size() == 1) {
    request.device = uuids[0];
    gpus.resize(1);
  } else if (by_uuid) {  // MIG devices (or GPUs) Slurm names by UUID: gpumuxd maps each
    request.devices = uuids;
    gpus.resize(uuids.size());
  } else if (gpus.size() > 1) {
    for (const std::string& gpu : gpus) request.gpus.push_back({std::atoi(gpu.c_str()), -1, 0});
  } else {
    request.gpu = std::atoi(grant.step_gpus.c_str());
  }
  if (!grant.shards.empty()) {
    // Shards of several GPUs: Slurm does not say how many are on each; each GPU's quota is an
    // even share, rounded up.
    uint64_t shards = std::strtoull(grant.shards.c_str(), nullptr, 10);
    request.shards = (shards + gpus.size() - 1) / gpus.size();
  }
  if (!grant.mps_percent.empty()) request.mps_percent = std::atof(grant.mps_percent.c_str());
  try {
    if (!grant.mem.empty()) request.memory = {uint64_t(ParseBytes(grant.mem))};
  } catch (const Error& e) {
    throw e.Within("--gpumux-mem");
  }
  try {
    if (!grant.compute.empty()) request.compute_percent = node::ParseComputeCap(grant.compute) / 10.0;
  } catch (const Error& e) {
    throw e.Within("--gpumux-compute");
  }
  try {
    if (!grant.priority.empty()) request.priority = node::ParsePriority(grant.priority);
  } catch (const Error& e) {
    throw e.Within("--gpumux-priority");
  }
  return request;
}

}  // namespace gpumux::slurm
