// gpumuxd's durable state: the tenants it admitted and each GPU's sharing mode, in SQLite (WAL
// journal, synchronous writes), so a restarted agent finds them, re-attaches to the ledgers and
// loses nothing. The ledgers hold the live usage; the store holds what was granted and to whom.
//
// Thread-safety: one AgentStore per thread (the agent uses it from its serving thread only).
#pragma once

#include <sys/types.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "node/ledger/ledger.h"

struct sqlite3;

namespace gpumux::agent {

// Who a tenant is in the cluster, for its metrics' labels (empty: not given): a Kubernetes
// container's namespace, pod and container; a Slurm job's id.
struct TenantLabels {
  std::string pod_namespace, pod, container, job;

  // Each label: its key in gpumuxd's API, its name on a metric, and where it is kept.
  struct Field {
    const char* api_key;
    const char* metric_label;
    std::string TenantLabels::*value;
  };
  static constexpr Field kFields[] = {{"pod_namespace", "namespace", &TenantLabels::pod_namespace},
                                      {"pod", "pod", &TenantLabels::pod},
                                      {"container", "container", &TenantLabels::container},
                                      {"job", "job", &TenantLabels::job}};
};

// A further GPU or MIG instance a tenant spans, and its memory quota there.
struct TenantPlace {
  int gpu = 0;
  int instance = -1;    // MIG instance of the GPU, or -1 for the whole GPU
  uint64_t memory = 0;  // its quota there; 0: the tenant's (limits.memory)
  bool operator==(const TenantPlace&) const = default;
};

// The owner of a tenant admitted with "owner_uid": "learn", until its first process draws on it.
inline constexpr uid_t kOwnerUnknown = uid_t(-1);

struct TenantRecord {
  std::string id;
  int gpu = 0;
  int instance = -1;  // MIG instance of the GPU, or -1 for the whole GPU
  // Further GPUs or MIG instances the tenant spans (a tensor-parallel job), with the same compute
  // limits on each and a memory quota each; its processes see `gpu` (or its instance), then
  // these, as devices 0, 1, ….
  std::vector<TenantPlace> more;
  node::TenantLimits limits;  // on its first GPU; the compute limits on every one
  // The user whose processes run as this tenant and may read its state; kOwnerUnknown until the
  // first process of its cgroup draws on it (Agent::Grant then sets that process's uid).
  uid_t owner = 0;
  std::string source;         // who asked: "api", "slurm job 12 step 0", ...
  // When set, only processes whose /proc/PID/cgroup names it may draw on the tenant's memory
  // ("pod<UID>" for a Kubernetes pod's containers).
  std::string cgroup;
  TenantLabels labels;

  bool spans_several() const { return !more.empty(); }
  bool owner_unknown() const { return owner == kOwnerUnknown; }
  // Where it is admitted, (GPU, instance), its first GPU first.
  std::vector<std::pair<int, int>> Places() const {
    std::vector<std::pair<int, int>> places = {{gpu, instance}};
    for (const TenantPlace& p : more) places.push_back({p.gpu, p.instance});
    return places;
  }
  // Its limits on `gpu` (and `instance`): `limits` with the quota there.
  node::TenantLimits LimitsAt(int gpu, int instance) const {
    node::TenantLimits at = limits;
    for (const TenantPlace& p : more)
      if (p.gpu == gpu && p.instance == instance && p.memory) at.memory = p.memory;
    return at;
  }
};

// A place as the store keeps it ("3", "3.1", "3.1=21474836480"), and back; ParsePlace throws
// Error (bad input) for anything else. (Defined with the request that names places,
// tenant_request.cc.)
std::string PlaceText(const TenantPlace& place);
TenantPlace ParsePlace(const std::string& text);

class AgentStore {
 public:
  // Opens (creating if needed) the database at `path`. Throws Error (internal).
  explicit AgentStore(const std::string& path);
  ~AgentStore();
  AgentStore(const AgentStore&) = delete;
  AgentStore& operator=(const AgentStore&) = delete;

  // Inserts or replaces the tenant with this id. Durable when it returns. Throws Error (internal).
  void Put(const TenantRecord& t);
  // Removes it; false if there was none. Throws Error (internal).
  bool Remove(const std::string& id);
  std::optional<TenantRecord> Find(const std::string& id) const;
  std::vector<TenantRecord> All() const;

  // Each GPU's sharing mode (ShareMode as an int) and MIG layout (profile names in creation order,
  // empty unless MIG); GPUs never set are absent.
  struct GpuMode {
    int gpu, mode;
    std::vector<std::string> layout;
  };
  void SetGpuMode(const GpuMode& m);
  std::vector<GpuMode> GpuModes() const;

 private:
  void Exec(const std::string& sql);
  sqlite3* db_ = nullptr;
};

}  // namespace gpumux::agent
