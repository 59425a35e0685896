// gpumuxd's Prometheus metrics, in the text exposition format (version 0.0.4): per GPU (or MIG
// instance) its memory and tenant count; per tenant (labels gpu, tenant, and where they were given
// at admission namespace, pod and container of a Kubernetes container, job of a Slurm job) its
// quota, memory used, compute cap, GPU time and its share of wall time since admission, launches
// held by its share, allocations refused for its quota, and memory and processes reclaimed from
// dead processes, memory it holds on the device as the driver counts it and processes killed for
// holding it past the quota; per GPU given a calibration, its measured bandwidth and math rate.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "node/agent/agent_store.h"
#include "node/agent/memory_guard.h"
#include "node/ledger/ledger.h"

namespace gpumux::agent {

struct GpuMetrics {
  std::string id;  // the `gpu` label: "0", or "0-mig1" for a MIG instance
  std::string name;
  uint64_t capacity;
  std::vector<node::TenantUsage> tenants;
  std::map<std::string, TenantLabels> labels;  // by tenant id; each left out when empty
  // What `gpumux calibrate` measured on the GPU, where gpumuxd was given it (0: not given; never
  // for a MIG instance, which was not what was measured).
  double calibrated_bandwidth = 0, calibrated_flops = 0;
  // What its tenants hold as the driver counts it, by tenant id (none where the device cannot
  // say), and how many of their processes were killed for it (node/agent/memory_guard.h).
  std::map<std::string, MemoryCheck> memory{};
  std::map<std::string, uint64_t> memory_kills{};
  std::string enforcement = "shim";  // what holds its quotas (EnforcementName)
};

// `now_ns` on the node's monotonic clock (for the GPU-time share).
std::string FormatMetrics(const std::vector<GpuMetrics>& gpus, uint64_t now_ns);

}  // namespace gpumux::agent
