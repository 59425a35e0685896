#include "integrations/slurm/step_request.h"

#include <cstdlib>

namespace gpumux::slurm {

std::optional<nlohmann::json> StepRequest(const StepGrant& grant, const std::string& id) {
  bool shared = !grant.shards.empty() || !grant.mps_percent.empty() || !grant.mem.empty() ||
                !grant.compute.empty();
  if (grant.step_gpus.empty() || !shared) return std::nullopt;
  nlohmann::json request = {{"id", id}, {"join", true}};
  std::string first = grant.visible_devices.substr(0, grant.visible_devices.find(','));
  if (first.rfind("MIG-", 0) == 0 || first.rfind("GPU-", 0) == 0) {
    request["device"] = first;
  } else {
    request["gpu"] = std::atoi(grant.step_gpus.c_str());
  }
  if (!grant.shards.empty()) request["shards"] = std::strtoull(grant.shards.c_str(), nullptr, 10);
  if (!grant.mps_percent.empty()) request["mps_percent"] = std::atof(grant.mps_percent.c_str());
  if (!grant.mem.empty()) request["memory"] = grant.mem;
  if (!grant.compute.empty()) request["compute"] = grant.compute;
  if (!grant.priority.empty()) request["priority"] = grant.priority;
  return request;
}

}  // namespace gpumux::slurm
