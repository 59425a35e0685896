// What a Slurm job step asks gpumuxd for, built from what Slurm put in the step's environment and
// the plugin's options. Kept apart from the SPANK plugin (which only reads the environment and
// sends the request) so that it is tested without Slurm.
#pragma once

#include <optional>
#include <string>

#include "node/agent/tenant_request.h"

namespace gpumux::slurm {

struct StepGrant {
  std::string step_gpus;  // SLURM_STEP_GPUS, else SLURM_JOB_GPUS: GPU indexes ("0" or "0,1")
  std::string
      visible_devices;      // CUDA_VISIBLE_DEVICES as Slurm set it: indexes, or UUIDs ("MIG-...")
                            // where Slurm knows them (NVML autodetection of MIG devices)
  std::string shards;       // SLURM_SHARDS_ON_NODE
  std::string mps_percent;  // CUDA_MPS_ACTIVE_THREAD_PERCENTAGE
  std::string mem, compute, priority;  // the plugin's --gpumux-mem/-compute/-priority options
};

// What admits (or joins) tenant `id` for the step, or nothing when the step holds no share of a
// GPU (no GPU, or neither shards, an MPS percentage nor a gpumux option). The device is named by
// UUID when Slurm gave one (a MIG device, which gpumuxd maps to its instance; a UUID also survives
// Slurm and NVML numbering GPUs differently), else by index; a step on several GPUs is one tenant
// over all of them, its shards split evenly (rounded up: Slurm does not say how many are on each).
// Throws Error (bad input) naming the option for a --gpumux-mem, -compute or -priority that does
// not parse.
std::optional<agent::TenantRequest> StepRequest(const StepGrant& grant, const std::string& id);

}  // namespace gpumux::slurm
