// A GPU a tenant runs on, real or simulated, and the environment that starts a tenant on it under
// the shim. Shared by `gpumux run` and gpumuxd so both start tenants the same way.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/gpu_kind.h"
#include "core/mig_layout.h"
#include "node/ledger/ledger.h"

namespace gpumux::node {

struct Device {
  int index = 0;
  std::string name;
  uint64_t memory = 0;
  int sms = 0;
  double bandwidth = 0, flops = 0;  // simulated only: what its kernels run at
  bool simulated = false;
  int mig_instance = -1;           // a MIG instance of GPU `index`, or -1 for the whole GPU
  std::optional<MigGeometry> mig;  // the GPU's MIG geometry, when known (catalog or driver)
  std::string uuid;  // real devices: "GPU-..." or "MIG-..." (what CUDA_VISIBLE_DEVICES takes)
};

// How the device's files are named: "gpu0", or "gpu0-mig1" for a MIG instance (ledger
// <stem>.ledger, simulated state sim-<stem>.state).
std::string DeviceStem(const Device& d);

// MIG instance `k` of `gpu` made by `layout`, as a device of its own: the profile's memory and
// SMs, and the share of the GPU's bandwidth and FLOP/s its memory and compute slices hold.
Device MigInstanceDevice(const Device& gpu, const MigLayout& layout, int k);

// The simulated GPU `index` of kind `kind` (memory, SMs, bandwidth, bf16 FLOP/s from the catalog).
Device SimulatedDevice(const GpuKind& kind, int index);

// Real GPU `index` as NVML describes it, opened at run time (no NVIDIA header or library is needed
// to build gpumux). Throws Error (unavailable) naming what is missing.
Device RealDevice(int index);
// How many real GPUs NVML sees; throws Error (unavailable) without a driver.
int RealDeviceCount();

// The ledger at `path` for `device`, opened or created (Ledger::CreateOrOpen; with `sole_mode`,
// gpumuxd's, Ledger::OpenSole or MakeSole with that mode); nullopt when the file there cannot be
// used for it (cut short, foreign, of another version, of another GPU, not a regular file), with
// why in `*problem`. Throws Error (unavailable) when the file cannot be opened or made.
std::optional<Ledger> OpenDeviceLedger(const std::string& path, const Device& device,
                                       std::string* problem, mode_t sole_mode = 0);

// Where libgpumux.so and simgpu/ are: beside the running executable (a build tree), else in
// <prefix>/lib/gpumux next to <prefix>/bin (an installed tree).
std::string RuntimeLibraryDir();

// Environment variables that run a program as `tenant` of `devices` under the shim found in
// `bin_dir` (libgpumux.so, and simgpu/ for simulated devices), with device i's ledger at
// `ledger_paths[i]`; LD_PRELOAD and LD_LIBRARY_PATH are prepended to `inherited_*`. The program
// sees exactly `devices`, as ordinals 0, 1, … in that order (real ones through
// CUDA_VISIBLE_DEVICES, their UUIDs; simulated ones of one kind, each with its state file beside
// its ledger). Throws Error (bad input) for no device, a ledger path with a comma (the shim reads a
// comma-separated list), or simulated devices of different kinds.
std::vector<std::pair<std::string, std::string>> TenantEnvironment(
    const std::vector<Device>& devices, const std::vector<std::string>& ledger_paths,
    const std::string& tenant, const std::string& bin_dir,
    const std::string& inherited_preload = "", const std::string& inherited_library_path = "");

// Environment variables that make the simulated libraries in `bin_dir`/simgpu stand for devices of
// `device`'s kind, with their state files at `state_paths` (comma-separated, one per device): its
// size and speed, and its MIG geometry when it has one (simgpu/sim_nvml_mig.cc reads it).
std::vector<std::pair<std::string, std::string>> SimulatedGpuEnvironment(
    const Device& device, const std::string& state_paths, const std::string& bin_dir,
    const std::string& inherited_library_path = "");

}  // namespace gpumux::node
