// What a producer asks of gpumuxd for one tenant: the body of POST /v1/tenants (admit, or join)
// and PUT /v1/tenants/ID (update). One contract for every producer — `gpumux apply`, the SPANK
// plugin, the device plugin, the DRA driver — and for gpumuxd, which reads it with
// ParseTenantRequest; the keys of the body are spelled in tenant_request.cc and nowhere else.
//
// A field left unset is not sent, and an update keeps what the tenant had. What needs the node
// (which GPUs and UUIDs exist, what fits, what a tenant already has) is gpumuxd's to check; what
// a request says on its own is checked here, on either side.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "node/agent/agent_store.h"
#include "node/ledger/compute_share.h"

namespace gpumux::agent {

struct TenantRequest {
  // Its id (node::CheckTenantId's rule). Empty in a PUT, whose path names it.
  std::string id;

  // Where, by one of: a GPU (`gpu`, with `instance` for a MIG instance of it); a GPU or instance
  // by UUID (`device`, as CUDA_VISIBLE_DEVICES names it); several (`gpus`, a tensor-parallel
  // job: the same compute limits on each, a quota each); several by UUID (`devices`). None: where
  // it is (an update; a tenant does not move).
  std::optional<int> gpu;       // 0 to 1023
  std::optional<int> instance;  // 0 to 63
  std::optional<std::string> device;
  std::vector<TenantPlace> gpus;  // gpu and instance each (memory unused: see `memory`)
  std::vector<std::string> devices;
  // Its processes join the tenant as it is, under the limits it has (a later Slurm step).
  bool join = false;

  // Its memory quota in bytes, above 0: one for each of its GPUs, or one per GPU in the order
  // they are named. Or as Slurm grants it: `shards` of gpumuxd's shard size each, or
  // `mps_percent`, that part of the GPU's memory and of its time (a cap).
  std::vector<uint64_t> memory;
  bool memory_per_gpu = false;  // `memory` lists each GPU's quota (even one), not one for all
  std::optional<uint64_t> shards;    // 1 to 1,000,000
  std::optional<double> mps_percent;  // above 0, at most 100
  // Compute: a cap on its share of GPU time (percent, above 0, at most 100), a weight (1 to
  // node::kMaxWeight) by which busy tenants divide the GPU, a priority.
  std::optional<double> compute_percent;
  std::optional<uint32_t> weight;
  std::optional<node::Priority> priority;

  // The uid whose processes run as it (and may read its state); or, with `learn_owner`, the uid
  // of the first process of its cgroup that draws on it (a pod's, whose spec need not say).
  std::optional<uid_t> owner_uid;
  bool learn_owner = false;
  std::optional<std::string> source;  // who asked: "slurm job 12 step 0", "plan", ...
  // Only processes whose /proc/PID/cgroup names this may draw on its memory: 1 to 128 letters,
  // digits, '.', '_', ':', '/' or '-' ("pod<UID>").
  std::optional<std::string> cgroup;
  TenantLabels labels;  // labels of its metrics: letters, digits, '.', '_' or '-'

  // Read from a body (never sent): keys given in a form gpumuxd reads for one release more
  // (memory as a size string, compute as "40%"), for its log to name.
  std::vector<std::string> old_forms;
};

// Reads a request body (empty is {}). Throws Error (bad input) naming the key and saying what it
// expected, for anything unknown, malformed or out of range, or where-keys given two ways.
TenantRequest ParseTenantRequest(const std::string& body);
// The same, of a body already parsed (a plan file's tenant).
TenantRequest TenantRequestFromJson(const nlohmann::json& body);

// The body that says `r` (memory in bytes, compute as a number): what ParseTenantRequest reads
// back as `r`.
nlohmann::json TenantRequestJson(const TenantRequest& r);

}  // namespace gpumux::agent
