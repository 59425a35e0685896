// gpumuxd's core: owns the ledgers of a node's GPUs, admits tenants (quota, compute share,
// priority) and refuses what does not fit with a reason, keeps what it granted in the tenant store,
// reclaims what dead processes held, and answers the HTTP API and the Prometheus scrape.
//
// API (JSON over the Unix socket; see docs/gpumuxd.md):
//   GET    /v1/health                    anyone
//   GET    /v1/gpus                      anyone
//   PUT    /v1/gpus/N                    operators: {"mode": "timeslice"|"mps"} (refused while
//                                         tenants run there), or {"mode": "mig", "layout":
//                                         ["3g.40gb", ...]}
//                                         ("NAME@START" places one explicitly); its tenants
//                                         then name an instance. Into or out of MIG: refused
//                                         while the GPU has tenants; between layouts, instance by
//                                         instance: those with tenants stay, running
//                                         (KeepBusyInstances)
//   GET    /v1/tenants[/ID]              operators see all; anyone else only tenants they own
//   POST   /v1/tenants                   operators: admit (201) or update (200) a tenant, or with
//                                         "join": true join an existing one as it is; answers its
//                                         environment. Where: "gpu" (and "instance" on a MIG GPU),
//                                         or "device": a GPU's or MIG instance's UUID (real GPUs)
//   PUT    /v1/tenants/ID                operators: change its limits
//   DELETE /v1/tenants/ID                operators: remove it (refused while it has live processes)
//   POST   /v1/grants                    a tenant's process (its owner's uid, or root on the API
//                                         socket; in the tenant's cgroup when it has one; a
//                                         tenant admitted with "owner_uid": "learn" is owned
//                                         by the uid of the first process of its cgroup here):
//                                         {"tenant", "bytes", "least"}: credit for its
//                                         allocations, at least "least" and at most "bytes",
//                                         within the tenant's quota; counted against the calling
//                                         pid (SO_PEERCRED), which is registered under the tenant
//                                         (at most node::kMaxProcessesPerTenant live ones);
//                                         "bytes": 0 registers it and grants nothing, and
//                                         the answer carries the tenant's activity file
//                                         (SCM_RIGHTS)
//   POST   /v1/grants/return             the same process: {"tenant", "bytes"} it no longer needs
//   GET    /metrics                      anyone (also on the TCP metrics address)
// Operators are root and members of the configured operator group, identified by the connection's
// credentials (SO_PEERCRED), never by what the request says, and never on the tenants' socket.
//
// Compute: gpumuxd measures every process's GPU time itself (the backend's DeviceMeter), charges
// it to the tenant that registered the process, reads each tenant's launch activity from its own
// file (node/ledger/activity.h: a sealed memory file handed to each of the tenant's processes with
// the answer to its registration) and ticks every tenant's share in the authority ledger
// (ComputeTick, once a millisecond), writing each tenant's gate into the view its processes map
// read-only (node/agent/compute_ticker.h). Nothing a tenant can write is read as truth about
// another tenant.
//
// Memory: twice a second gpumuxd also reads what each process holds on each device as the driver
// counts it (DeviceMeter::ReadMemory) and checks each tenant against its quota
// (node/agent/memory_watch.h); a tenant over it by memory the shim never granted (a program that
// allocates around it) has the processes holding the most of it killed.
//
// Thread-safety: Handle(), Reclaim() and ComputeTick() may be called from any threads at once (one
// lock inside; GET /v1/health takes none, so it answers while another request holds the agent).
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/calibration.h"
#include "node/agent/agent_store.h"
#include "node/agent/compute_ticker.h"
#include "node/agent/device_slot.h"
#include "node/agent/memory_watch.h"
#include "node/agent/share_backend.h"
#include "node/agent/tenant_request.h"
#include "node/device.h"
#include "node/ledger/activity.h"
#include "node/ledger/ledger.h"
#include "service/http_request.h"

namespace gpumux::agent {

using service::HttpRequest;  // its API's requests and answers (src/service)
using service::HttpResponse;

// Whether `c` was measured on `gpu`: the device name the driver gave, simulated or not.
inline bool MeasuredOn(const GpuCalibration& c, const node::Device& gpu) {
  return gpu.name == c.device_name && gpu.simulated == c.simulated;
}

struct AgentConfig {
  std::vector<node::Device> gpus;
  // Calibrations of this node's GPUs: each belongs to every GPU of the device it was measured on
  // (the same name, simulated or not), at most one a GPU, and GET /v1/gpus serves it with the GPU
  // for planners (`gpumux plan --apply` plans with it when given none).
  std::vector<CalibrationFile> calibrations;
  std::string runtime_dir;     // ledgers (and simulated device state) live here
  std::string state_path;      // SQLite database
  std::string bin_dir;         // where libgpumux.so (and simgpu/) are: node::RuntimeLibraryDir()
  std::string operator_group;  // empty: root only
  std::string socket_path;     // the API socket (operators, and readers)
  // The tenants' socket, which tenant processes are told (GPUMUX_AGENT) and containers get
  // mounted: grants and reads only, no caller an operator there (root in a container included).
  // Empty: tenants are told socket_path.
  std::string tenant_socket_path;
  uint64_t shard_bytes =
      1ull << 30;      // memory per Slurm shard (gpumux slurm gres-conf uses the same)
  bool strict = true;  // refuse tenants whose quotas or caps would oversubscribe a GPU
  // The memory check (MemoryWatch): what a tenant's registered processes may hold on its
  // device beyond their grants (their CUDA contexts and modules), each and all together, and
  // whether the processes that put a tenant over its quota and that allowance are killed (else
  // logged).
  ContextAllowance context_allowance = {1ull << 30, 4ull << 30};
  bool kill_over_quota = true;
};

class Agent {
 public:
  // Opens the store and every GPU's ledger, readies each GPU through the backend (in its stored
  // mode), and re-admits the stored tenants (a restarted agent loses nothing; tenants that kept
  // running meanwhile keep their usage). Throws Error; BadInput for a calibration of no GPU here,
  // or a second one of a GPU.
  // `backend` puts GPUs into their sharing modes (simulated or NVIDIA).
  Agent(AgentConfig config, std::unique_ptr<ShareBackend> backend);

  HttpResponse Handle(const HttpRequest& request);
  // Returns the memory of dead processes to their tenants (returns how many bytes), puts back
  // tenant limits that were changed in a ledger behind the agent's back, and checks what tenants
  // hold on their devices against their quotas (MemoryWatch). gpumuxd calls it twice a second.
  uint64_t Reclaim();
  // Measures the GPU time of every device's processes, ticks every tenant's compute share and
  // sets their gates. gpumuxd calls it once a millisecond; it skips the tick (gates stay as they
  // are) while a request holds the agent.
  void ComputeTick();
  size_t tenant_count();

 private:
  struct Gpu {
    node::Device device;
    ShareMode mode = ShareMode::kTimeSlice;
    std::vector<std::string> layout;               // MIG profiles in creation order (mode kMig)
    std::vector<DeviceSlot> slots;                 // the whole GPU, or one per MIG instance
    const CalibrationFile* calibration = nullptr;  // in config_, if it has one
  };

  // Gives each calibration of config_ to the GPUs it was measured on. Throws BadInput.
  void MatchCalibrations();

  // Opens the ledgers of `g`'s slots, one per device in `devices` (the whole GPU, or its MIG
  // instances). Throws Error.
  void BuildSlots(Gpu& g, const std::vector<node::Device>& devices);
  // The slot a tenant is on; null if there is none such (a GPU or instance that is gone).
  DeviceSlot* SlotOf(int gpu, int instance);
  // Makes a slot's view ledger anew, with its tenants' limits, after something overwrote its
  // header.
  void RebuildSharedLedger(DeviceSlot& slot);
  // The tenants of `tenants` (the store's) admitted on `slot`.
  std::vector<const TenantRecord*> TenantsOn(const DeviceSlot& slot,
                                             const std::vector<TenantRecord>& tenants);
  // The GPU and instance (-1: the whole GPU) of the device with this UUID ("GPU-..." or "MIG-...").
  std::optional<std::pair<int, int>> SlotWithUuid(const std::string& uuid) const;

  bool IsOperator(const HttpRequest& r) const;
  // The handler of each request, under mu_; throws Error, which Handle answers as its HTTP status.
  HttpResponse Route(const HttpRequest& r);
  // POST /v1/tenants and PUT /v1/tenants/ID: the request (node/agent/tenant_request.h) checked
  // against the node and applied on every GPU of the tenant, or on none.
  HttpResponse Admit(const HttpRequest& r, const std::string& id_from_path);
  // Where `q` puts `t` (unchanged where it names no place). Throws Error (bad input) for a GPU,
  // instance or UUID this node does not have, or a tenant over several GPUs on an MPS one.
  void PlaceTenant(const TenantRequest& q, TenantRecord* t);
  // Throws Error unless each quota of `t` fits its GPU or instance (does not fit) and its compute
  // limits can be held there (bad input).
  void CheckFitsItsPlaces(const TenantRecord& t);
  // What an admitted tenant's processes start from: where it is, its limits, and the environment
  // that puts them under gpumux (POST /v1/tenants's answer).
  nlohmann::json AdmissionAnswer(const TenantRecord& t);
  HttpResponse Remove(const std::string& id);
  HttpResponse SetMode(const HttpRequest& r, const std::string& gpu);
  // `layout` (a MIG layout for GPU `g`, in MIG mode, of geometry `geo`) ordered so that each
  // instance of `g` that tenants are admitted on stays at its placement and number
  // (KeepingInstances). Throws Error (conflict) naming an instance that would move or go and its
  // tenants.
  std::vector<std::string> KeepBusyInstances(const Gpu& g, const MigGeometry& geo,
                                             const std::vector<std::string>& layout);
  HttpResponse ListTenants(const HttpRequest& r, const std::string& only_id);
  // POST /v1/grants (take credit) and POST /v1/grants/return: the calling process's memory.
  HttpResponse Grant(const HttpRequest& r, bool give_back);
  // Writes the record's limits into its GPUs' ledgers, the authority first, and readies its
  // activity file. Throws Error; with `strict`, DoesNotFit where the authority's quotas or caps
  // would oversubscribe a GPU (Ledger::AddTenant), having written the places before it.
  void Apply(const TenantRecord& t, bool strict = false);
  // Readies the tenant's activity file: the one its running processes hold (after a restart), or a
  // new one.
  void OpenActivity(const TenantRecord& t);
  // Whether each GPU or instance the tenant names exists now; whether it is on `slot`; whether it
  // is on GPU `gpu` (whole or an instance).
  bool Everywhere(const TenantRecord& t);
  bool IsOn(const TenantRecord& t, const DeviceSlot& slot);
  static bool OnGpu(const TenantRecord& t, int gpu);
  // Where the driver holds quotas on `slot` (QuotaEnforcement::kDriver) and `t` is bound to a
  // cgroup: sets the driver's hard limit of that group, its directory found from the groups of
  // `t`'s process `pid` (or the one set before), to `t`'s quota there plus a tenant's context
  // allowance; again when the quota changed. Where the driver refuses, the shim holds it (logged,
  // not asked again until the quota changes).
  void HoldInDriver(DeviceSlot& slot, const TenantRecord& t, pid_t pid);
  // Clears the limit the driver holds for tenant `id` on `slot`, if gpumuxd set one.
  void ReleaseGroupLimit(DeviceSlot& slot, const std::string& id);
  // Takes tenant `id` out of `slot`'s ledgers and removes its activity file (what Apply made).
  void Unapply(DeviceSlot& slot, const std::string& id);
  std::string MetricsText();  // Prometheus text of every GPU and tenant; with mu_ held

  AgentConfig config_;
  std::unique_ptr<ShareBackend> backend_;
  AgentStore store_;
  std::vector<Gpu> gpus_;
  ActivityFiles activity_;  // by tenant id
  ComputeTicker ticker_;
  MemoryWatch memory_;
  std::mutex mu_;
};

}  // namespace gpumux::agent
