// How gpumuxd puts a GPU into a sharing mode, behind one interface: the simulated backend acts on
// the simulated GPU's device state (and makes one simulated device per MIG instance); the NVIDIA
// backend starts or stops an MPS control daemon per GPU with nvidia-cuda-mps-control.
// Time-slicing is the driver's default (no daemon). MIG on real GPUs is not driven by the agent
// yet: the NVIDIA backend refuses it, saying so (`gpumux plan` prints the nvidia-smi commands).
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "node/device.h"
#include "node/ledger/ledger.h"

namespace gpumux::agent {

enum class ShareMode { kTimeSlice = 0, kMps = 1, kMig = 2 };

// "timeslice", "mps" or "mig"; throws std::invalid_argument.
ShareMode ParseShareMode(const std::string& text);
const char* ShareModeName(ShareMode m);

class BackendError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ShareBackend {
 public:
  virtual ~ShareBackend() = default;
  // Readies `device` (a GPU or a MIG instance) for tenants of any user (the simulated backend
  // creates its device state). Throws BackendError.
  virtual void Prepare(const node::Device& device, ShareMode mode) = 0;
  // Puts `gpu` into `mode`; for kMig, `instances` are the MIG instances to make (in creation
  // order). Throws BackendError saying why not.
  virtual void SetMode(const node::Device& gpu, ShareMode mode, const std::vector<node::Device>& instances) = 0;
  // What a tenant's processes on `gpu` in `mode` need besides the shim's environment: under MPS,
  // the daemon's pipe directory and the per-client limits the driver enforces in hardware (active
  // thread percentage = the compute cap, pinned memory limit = the quota).
  virtual std::vector<std::pair<std::string, std::string>> ClientEnvironment(const node::Device& gpu, ShareMode mode,
                                                                             const node::TenantLimits& limits) const = 0;
};

// `runtime_dir` holds the simulated GPUs' state files (sim-gpu<N>.state) or the MPS pipe and log
// directories (mps<N>/).
std::unique_ptr<ShareBackend> MakeSimulatedBackend(const std::string& runtime_dir);
std::unique_ptr<ShareBackend> MakeNvidiaBackend(const std::string& runtime_dir);

}  // namespace gpumux::agent
