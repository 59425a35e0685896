// Multi-Instance GPU on a real GPU, through NVML: gpumuxd's NVIDIA backend lays out the instances a
// GPU's MIG mode asks for. Needs root (the driver refuses MIG changes to others). The simulated
// NVML implements the same calls (simgpu/sim_nvml_mig.cc), so this runs in tests without a GPU.
// Not thread-safe: one caller at a time per GPU.
#pragma once

#include <string>
#include <vector>

#include "core/gpu_kind.h"
#include "core/mig_layout.h"

namespace gpumux::node {

// Turns MIG mode on or off for GPU `gpu` (a no-op if it already is). Turning it off destroys the
// GPU's instances first. Throws Error (unavailable) with the driver's reason, and says so when the
// change waits for a GPU reset (some GPUs apply it only after `nvidia-smi -i N -r` with no process
// on them).
void SetMigMode(int gpu, bool on);

// The GPU's MIG geometry as its driver lists it: each profile's name, ID, compute slices, memory,
// SMs, instance limit and allowed placements. Needs MIG mode on. Throws Error (unavailable).
MigGeometry ReadMigGeometry(int gpu);

// Makes GPU `gpu` (MIG mode on) hold exactly `layout`, placed on `geo` (what ReadMigGeometry
// read; the layout's profiles point into it), instance by instance: a GPU instance of the
// layout's profile at the layout's placement is kept, with its processes; the others are
// destroyed (the driver refuses while a process uses one) and the layout's new instances made at
// their placements, each with one compute instance spanning it. All or nothing: a step that fails
// undoes the steps before it, last first. Returns the MIG device UUID of each instance
// ("MIG-..."), in the layout's order. Throws Error (unavailable).
std::vector<std::string> ApplyMigLayout(int gpu, const MigGeometry& geo, const MigLayout& layout);

}  // namespace gpumux::node
