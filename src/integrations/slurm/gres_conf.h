// The Slurm configuration lines for a node's GPUs under gpumux: gres.conf (one gpu line and one
// shard line per GPU, shards = GPU memory / shard size, so a job's shard count is its memory
// quota) and the slurm.conf fragments (GresTypes, the node's Gres=). Admins paste them instead of
// computing shard counts by hand; gpumuxd must run with the same --shard-size.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "node/device.h"

namespace gpumux::slurm {

struct GresConfOptions {
  std::string node = "NODE";                  // the node's NodeName
  uint64_t shard_bytes = 1ull << 30;          // memory per shard
  std::string device_file = "/dev/nvidia{}";  // {} is the GPU index
};

// Throws Error (bad input) if a GPU is smaller than one shard or there are no GPUs.
std::string GresConf(const std::vector<node::Device>& gpus, const GresConfOptions& o);

// Slurm's GRES type for a GPU name: "H100-SXM5-80GB (simulated)" -> "h100".
std::string GresType(const std::string& gpu_name);

}  // namespace gpumux::slurm
