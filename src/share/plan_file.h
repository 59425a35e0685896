// Reads a plan file (`gpumux plan FILE.yaml`): the fleet, the tenants with their workloads and
// SLOs, and which strategies may be used. The format is in the README and examples/. Strict: an
// unknown field, a missing one, a bad unit or an unknown GPU/model name throws Error (bad input)
// with file and line.
#pragma once

#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "core/catalog.h"
#include "share/fleet_planner.h"

namespace gpumux {

// Applied to a tenant that states no SLO, and said so in the output.
inline constexpr double kDefaultMaxSlowdown = 1.5;
// The most GPUs a plan file's fleet, and tenants its classes, may count in all.
inline constexpr int kMaxPlannedGpus = 100'000;
inline constexpr int kMaxPlannedTenants = 100'000;

struct PlanFile {
  PlanInput input;
  std::vector<std::string> notes;  // defaults that were applied, for the output
};

// `catalog` must outlive the result (fleet entries point into it). Throws Error (bad input) naming
// file, line and field; also for counts past kMaxPlannedGpus or kMaxPlannedTenants.
PlanFile LoadPlanFile(const std::string& path, const Catalog& catalog);

// Parses one workload mapping ({kind: llm-decode, model: ..., ...}); shared with tests.
Workload ReadWorkload(const std::string& path, const YAML::Node& node, const Catalog& catalog,
                      const std::string& where);

}  // namespace gpumux
