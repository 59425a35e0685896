// Fleet planning: tenants and a fleet of GPU kinds -> the fewest GPUs that meet every SLO (then the
// lowest $/hour), each GPU with its strategy and layout, beside the one-job-per-GPU baseline.
//
// A tenant whose workload spans several GPUs (tensor_parallel N, each part of it on one) is placed
// as N parts on N distinct GPUs of one kind, all or none; its parts are named "<tenant>.tp<k>".
//
// Exact for up to kExactTenantLimit tenants without such parts (branch and bound over
// assignments); above that, or with them,
// first-fit decreasing over tenant classes under three orderings (largest demand, tightest SLO,
// most memory), keeping the best: fast (10,000 tenants well under a second, bench/) but not
// guaranteed optimal. A tenant that fits no GPU kind alone is reported
// with its reason and the rest is still planned. Pure function; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "core/gpu_kind.h"
#include "share/gpu_choice.h"
#include "share/live_node.h"
#include "share/tenant.h"

namespace gpumux {

inline constexpr size_t kExactTenantLimit = 12;

struct FleetEntry {
  const GpuKind* gpu = nullptr;
  int count = 0;  // GPUs of this kind available
  double price_per_hour = 0;
};

// `count` identical tenants; they are named "<name>" if count is 1, else "<name>#1".."<name>#N".
struct TenantClass {
  Tenant tenant;
  int count = 1;
};

struct PlanInput {
  std::vector<TenantClass> classes;
  std::vector<FleetEntry> fleet;
  StrategySet allowed;
  // The node the plan is for, when it already runs tenants (not owned; may be null). Which
  // tenants share a GPU is planned as without it; then each planned GPU becomes the node GPU
  // (of its kind) where most of its tenants run, or else an idle one (PlannedGpu::node_gpu), each
  // running tenant keeps its name (one of its class's) on the GPU it runs on, and each such GPU
  // keeps its mode and MIG instances wherever that keeps every SLO (ChooseStrategyKeeping).
  const LiveNode* live = nullptr;
};

struct PlannedGpu {
  size_t fleet_index = 0;
  // The node GPU it is for: with a live node (PlanInput::live) the one where its tenants run, or
  // an idle one of its kind; without, -1 (planned GPU i is node GPU i).
  int node_gpu = -1;
  std::vector<std::string> tenant_names;
  StrategyResult chosen;
  std::vector<StrategyResult> considered;
};

struct UnplacedTenant {
  std::string name;
  std::string reason;
};

struct Utilisation {
  int gpus = 0;
  double price_per_hour = 0;
  double memory = 0, bandwidth = 0, flops = 0;  // fractions of the used GPUs' capacity
};

struct Plan {
  std::vector<PlannedGpu> gpus;
  std::vector<UnplacedTenant> unplaced;
  Utilisation shared;    // this plan
  Utilisation baseline;  // one job per GPU, on the first listed kind that holds it
  std::vector<UnplacedTenant> baseline_unplaced;
  bool exact = false;  // true when the search proved the GPU count minimal
};

// Throws Error (bad input) for an empty fleet or a negative count.
Plan PlanFleet(const PlanInput& input);

// For tests: the largest per-dimension lower bound Σ demand / capacity over memory, the bandwidth
// each SLO requires and the compute each SLO requires, on the largest fleet kind of each dimension.
double GpuLowerBound(const PlanInput& input);

}  // namespace gpumux
