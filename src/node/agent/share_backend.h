// How gpumuxd puts a GPU into a sharing mode, behind one interface: the simulated backend acts on
// the simulated GPU's device state (and makes one simulated device per MIG instance, from the
// catalog's geometry); the NVIDIA backend starts or stops an MPS control daemon per GPU with
// nvidia-cuda-mps-control, and lays out MIG instances through NVML (node/mig_control.h), with the
// geometry the driver lists. Time-slicing is the driver's default (no daemon).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/share_mode.h"
#include "node/agent/device_meter.h"
#include "node/device.h"
#include "node/ledger/ledger.h"

namespace gpumux::agent {

// Adds to `env` what makes a best-effort tenant a below-normal MPS client
// (CUDA_MPS_CLIENT_PRIORITY=1): the hardware schedules normal clients' work first (NVIDIA: a hint,
// not a guarantee of order; ignored without an MPS daemon). Normal and high-priority tenants are
// normal clients; gpumux's own priorities tell them apart. For gpumuxd and `gpumux run`.
void AddMpsClientPriority(const node::TenantLimits& limits,
                          std::vector<std::pair<std::string, std::string>>* env);

// What holds a tenant's memory quota on a device, besides gpumuxd's memory check: the shim alone
// (it grants each allocation); the driver too, for a tenant bound to a cgroup (NVIDIA's memory
// limits per cgroup, driver R615+, cgroup v2; the shim still grants, so that cuMemGetInfo and the
// plan agree); or MIG, whose instance holds its memory in hardware.
enum class QuotaEnforcement { kShim, kDriver, kMig };
const char* EnforcementName(QuotaEnforcement e);  // "shim", "driver", "mig"

class ShareBackend {
 public:
  virtual ~ShareBackend() = default;
  // Readies whole GPU `device` for tenants of any user in `mode` (not kMig; the simulated backend
  // creates its device state). Throws Error (unavailable).
  virtual void Prepare(const node::Device& device, ShareMode mode) = 0;
  // Puts `gpu` into `mode`. For kMig it lays out `layout` (MIG profile names in creation order) and
  // returns the instances as devices of their own, in that order; a GPU that already holds that
  // layout keeps it, and the processes on it. Leaving kMig removes the instances. Throws
  // Error (bad input) for a layout the GPU cannot hold, (unavailable) for what the driver refuses.
  virtual std::vector<node::Device> SetMode(const node::Device& gpu, ShareMode mode,
                                            const std::vector<std::string>& layout) = 0;
  // What a tenant's processes on `gpu` in `mode` need besides the shim's environment: under MPS,
  // the daemon's pipe directory and the per-client limits the driver enforces in hardware (active
  // thread percentage = the compute cap, pinned memory limit = the quota).
  virtual std::vector<std::pair<std::string, std::string>> ClientEnvironment(
      const node::Device& gpu, ShareMode mode, const node::TenantLimits& limits) const = 0;
  // Whether whole GPU `gpu` answers: false for one NVML reports lost (fallen off the bus, Xid 79)
  // or cannot read. A simulated GPU is lost while a file STATE.lost lies beside its state file.
  virtual bool Healthy(const node::Device& gpu) const = 0;
  // The MIG geometry of whole GPU `gpu`: the driver's (MIG mode on), or the catalog's for a
  // simulated GPU. Throws Error (bad input) for a GPU without MIG, (unavailable) from the driver.
  virtual MigGeometry MigGeometryOf(const node::Device& gpu) const = 0;
  // What holds quotas on `device` (a whole GPU or a MIG instance): kMig on an instance; kDriver
  // where the driver limits memory per cgroup there and cgroup v2 is mounted; else kShim.
  virtual QuotaEnforcement Enforcement(const node::Device& device) const = 0;
  // Sets the driver's hard limit on whole GPU `gpu` of the cgroup whose directory is `group_dir`
  // to `hard` bytes (the soft limit 0), or clears both (nullopt), as NVIDIA's documentation asks
  // before a group is removed. Only where Enforcement() is kDriver. Throws Error (unavailable)
  // with the driver's answer.
  virtual void SetGroupLimit(const node::Device& gpu, const std::string& group_dir,
                             std::optional<uint64_t> hard) = 0;
  // What measures the GPU time of the processes on `device` (a whole GPU or a MIG instance).
  virtual std::unique_ptr<DeviceMeter> Meter(const node::Device& device) const = 0;
};

// `runtime_dir` holds the simulated GPUs' state files (sim-gpu<N>.state) or the MPS pipe and log
// directories (mps<N>/).
std::unique_ptr<ShareBackend> MakeSimulatedBackend(const std::string& runtime_dir);
std::unique_ptr<ShareBackend> MakeNvidiaBackend(const std::string& runtime_dir);

}  // namespace gpumux::agent
