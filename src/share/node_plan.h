// What a plan asks of one node's gpumuxd: per GPU its sharing mode (and MIG layout), per tenant its
// limits (memory quota, compute cap, priority, weight). It is the plan's "agent" section (`gpumux
// plan --json`) and what `gpumux apply` sends: each GPU is the body of `PUT /v1/gpus/N`, each
// tenant the body of `POST /v1/tenants`.
//
// Planned GPU i is node GPU i, unless the plan was made for a live node (PlannedGpu::node_gpu).
// A tenant's memory quota is its planned need plus a share, in
// proportion to that need, of what its GPU (or MIG instance) has left over: the quotas of a GPU sum
// to at most its memory, so no tenant can take what another was planned to hold, and none is held
// to the bare model of its working set. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/priority.h"
#include "base/share_mode.h"
#include "share/fleet_planner.h"

namespace gpumux {

struct NodeGpuPlan {
  int gpu = 0;
  std::string kind;                        // the catalog's GPU kind the plan was made for
  uint64_t memory_bytes = 0;               // that kind's memory
  ShareMode mode = ShareMode::kTimeSlice;  // kTimeSlice, kMps or kMig (a whole GPU is time-sliced)
  std::vector<std::string> layout;         // kMig: "PROFILE@START", instance k is layout[k]
};

struct NodeTenantPlan {
  std::string id;    // gpumuxd's tenant id: the plan's name in its safe alphabet
  std::string name;  // the plan's name ("chat-13b#1")
  int gpu = 0;
  int instance = -1;                      // MIG instance index, -1 for the whole GPU
  uint64_t memory_bytes = 0;              // the quota
  uint64_t need_bytes = 0;                // what the plan models it to hold (<= memory_bytes)
  std::optional<double> compute_percent;  // MPS thread cap, when the plan sets one
  // High for a tenant whose SLO bounds the speed its users see (a model's tokens per second per
  // sequence, ms per token) on a GPU it shares, by time or MPS, with tenants whose SLO does not (a
  // slowdown, none, or a generic job's steps per second); else normal.
  // (A capped tenant stays normal: gpumuxd runs a high-priority one uncapped.)
  Priority priority = Priority::kNormal;
  uint32_t weight = 1;  // its share when busy tenants divide the GPU
};

struct NodePlan {
  std::vector<NodeGpuPlan> gpus;
  std::vector<NodeTenantPlan> tenants;
};

// The node's share of `plan`, made from `input`. Throws Error (bad input) when two tenant names map
// to one id.
NodePlan MakeNodePlan(const PlanInput& input, const Plan& plan);

// gpumuxd's id for a plan's tenant name: letters, digits and "._-" kept, anything else ('#', a
// space) becomes '-', cut to 63 characters.
std::string TenantIdFor(const std::string& name);

// Quotas for tenants needing `needs` bytes on a device of `capacity` bytes: each need plus its
// proportional share of the spare, rounded down to whole MiB but never below the need (rounded up
// to MiB). Their sum is at most `capacity` whenever the needs rounded up to MiB fit in it.
std::vector<uint64_t> ShareOutMemory(const std::vector<uint64_t>& needs, uint64_t capacity);

// The one place a plan's quotas are made: sets the quota of each tenant of `on_device` (those on
// one GPU, or one MIG instance, of `capacity` bytes) from its need_bytes (ShareOutMemory). Returns
// false where their needs, rounded up to MiB, do not fit in `capacity` (each then gets its need).
bool ShareOutQuotas(const std::vector<NodeTenantPlan*>& on_device, uint64_t capacity);

}  // namespace gpumux
