// The per-GPU ledger: one shared, memory-mapped file per GPU that every tenant process and the
// launcher map, holding each tenant's memory quota and usage, its compute share (cap, weight,
// priority) and GPU time, and each process's usage.
//
// Reservations are lock-free: a process reserves bytes with a compare-and-swap on its tenant's
// usage *before* calling the driver and releases them if the driver fails, so concurrent processes
// of one tenant can never overshoot the quota together. A process that dies without freeing
// (SIGKILL, the OOM killer) is found by pid plus start time (a reused pid is not mistaken for it)
// and its usage is returned to the pool by whoever reclaims first; live processes are never stalled
// or moved.
//
// Compute: every tenant process runs a governor (in the shim) that calls ComputeTick about once a
// millisecond with the GPU time its process used since the last call; the ledger keeps each
// tenant's GPU time and a token bucket of the time it may use (compute_share.h), and answers
// whether the process must hold its launches. See ComputeTick for the algorithm and its accuracy.
//
// Layout: a header with a magic number and a version, then fixed arrays of tenant and process
// slots; a truncated, foreign or newer-version file is refused with Error (bad input). Thread- and
// process-safe.
//
// Threat model. `gpumux run` creates the file mode 0600: one user, whose processes reserve and
// govern in it. gpumuxd keeps two per device and writes both alone: an authority ledger only it
// opens (quotas, the memory it grants each process — node/shim/memory_grant.h — and every
// tenant's compute state, ticked by gpumuxd from the GPU time it measures itself), and a view,
// mode 0644, that tenant processes map read-only (OpenReadOnly): each tenant's quota and usage for
// cuMemGetInfo, and its launch gate. What a tenant publishes (its launch activity) lives in a file
// of its own (node/ledger/activity.h) that can affect nobody else. gpumuxd's ledgers are made
// whole before they appear (MakeSole) and never locked: anyone who can open a file can hold a
// flock on it. Every index read from a file is still checked before use. A process can still bypass the shim (unset LD_PRELOAD, static linking,
// raw ioctls); only MIG (hardware partitions) and MPS limits (enforced in the driver) stop that.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "node/ledger/burst_rhythm.h"
#include "node/ledger/compute_share.h"

namespace gpumux::node {

inline constexpr uint64_t kLedgerMagic = 0x4c58554d55504725ull;  // "%GPUMUXL"
inline constexpr uint32_t kLedgerVersion = 12;
inline constexpr int kMaxTenants = 64;
// Every tenant may hold kMaxProcessesPerTenant processes at once however many tenants there are,
// so that one tenant's full table is never its neighbour's problem.
inline constexpr int kMaxProcessesPerTenant = 64;
inline constexpr int kMaxProcesses = kMaxTenants * kMaxProcessesPerTenant;
inline constexpr int kTenantIdSize = 64;

struct TenantSlot {
  std::atomic<uint32_t> state;  // 0 free, 1 active
  char id[kTenantIdSize];
  std::atomic<uint64_t> quota;                // bytes; written by the launcher only
  std::atomic<uint64_t> used;                 // bytes reserved by all its processes
  std::atomic<uint64_t> refused;              // allocations refused for quota
  std::atomic<uint64_t> reclaimed;            // bytes returned from dead processes
  std::atomic<uint64_t> reclaimed_processes;  // dead processes whose slots were reclaimed
  // Compute share; the first three are written by the launcher only.
  std::atomic<uint32_t> cap_permille;  // of GPU time; kNoCap = none
  std::atomic<uint32_t> weight;
  std::atomic<int32_t> priority;     // Priority
  std::atomic<uint64_t> added_ns;    // when the launcher added it (NowNs)
  std::atomic<uint64_t> gpu_ns;      // GPU time its processes used, as measured
  std::atomic<int64_t> credit_ns;    // GPU time it may have used by now (token bucket)
  std::atomic<uint64_t> accrued_ns;  // when credit_ns was last brought up to date
  std::atomic<uint64_t> wanted_ns;   // last time one of its processes launched or wanted to
  std::atomic<uint64_t> held;        // launches held back by its share
  std::atomic<uint32_t> gate;        // 1: its processes hold new launches (gpumuxd's verdict)
  // For its demand (compute_share.h): what it used lately (GPU time per wall time, in millionths,
  // averaged over about kUseWindowNs), its last share, gpu_ns when the use was last brought up to
  // date, and the last time a verdict held it for its share (not its cap, nor a higher priority).
  std::atomic<uint32_t> use_ppm;
  std::atomic<uint32_t> share_ppm;  // the share the last verdict gave it, in millionths
  // A high-priority tenant without a rhythm: how much of the time lately others yielded to it
  // (millionths, averaged over about kUseWindowNs; its own ticks keep it).
  std::atomic<uint32_t> yield_ppm;
  std::atomic<uint64_t> use_gpu_ns;
  std::atomic<uint64_t> share_held_ns;
  // A high-priority tenant's bursts (burst_rhythm.h).
  BurstWords burst;
};

// When the high-priority tenants of a GPU will launch next, as their rhythm says (Ledger::
// HighPriorityForecast).
struct BurstForecast {
  bool active = false;         // one is in a burst (Ledger::HighPriorityForecast says when)
  uint64_t next_start_ns = 0;  // the earliest predicted start of a burst after now; 0: none known
  uint64_t period_ns = 0;      // that tenant's time between bursts
  uint64_t margin_ns = 0;      // how long before next_start_ns others' work should be done: what
                               // the rhythm's starts missed its beat by lately (ForecastNextBurst)
};

struct ProcessSlot {
  std::atomic<int32_t> pid;  // 0 = free
  int32_t tenant;
  uint64_t start_time;  // /proc/<pid>/stat field 22, to tell a reused pid apart
  std::atomic<uint64_t> used;
  std::atomic<uint64_t> gpu_ns;  // GPU time it used, as measured
};

struct LedgerHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t size;      // bytes of the whole layout
  uint64_t capacity;  // device memory bytes
  char gpu_name[64];
};

struct LedgerLayout {
  LedgerHeader header;
  TenantSlot tenants[kMaxTenants];
  ProcessSlot processes[kMaxProcesses];
};

// What the launcher asks for a tenant.
struct TenantLimits {
  uint64_t memory = 0;             // bytes
  uint32_t cap_permille = kNoCap;  // most GPU time it may use
  uint32_t weight = 1;             // its share when contended
  Priority priority = Priority::kNormal;
};

// The largest compute weight: enough to express any useful ratio, small enough that sums of
// weights never overflow.
inline constexpr uint32_t kMaxWeight = 1000;

// Throws Error (bad input) unless `id` is 1 to 63 letters, digits, '.', '_' or '-' and neither "."
// nor ".." (ids appear in file names, log lines and metric labels).
void CheckTenantId(const std::string& id);
// Throws Error (bad input) unless the id passes CheckTenantId, the cap is above 0% and at most
// 100%, the weight 1 to kMaxWeight, and a high-priority tenant has no cap (its launches never
// wait, so a cap could not hold).
void CheckTenant(const std::string& id, const TenantLimits& limits);

struct TenantUsage {
  int slot;
  std::string id;
  uint64_t quota, used, refused, reclaimed, reclaimed_processes;
  uint32_t cap_permille, weight;
  Priority priority;
  uint64_t added_ns, gpu_ns, held;
  std::vector<std::pair<pid_t, uint64_t>> processes;  // live (pid, bytes)
  std::optional<RhythmSummary> rhythm{};  // a high-priority tenant's, once learnt
};

// What a process's governor must do until its next tick.
struct ComputeVerdict {
  bool hold = false;  // hold new launches (over its share, or yielding to a higher priority)
  double share = 0;   // fraction of GPU time its tenant may use now
};

// Timing of the governor (see ComputeTick).
inline constexpr uint64_t kWantWindowNs =
    100'000'000;  // a tenant wants the GPU if it launched within this
inline constexpr uint64_t kAtWorkNs =
    3'000'000;  // a tenant is at work now if it launched or waited within this (three ticks)
inline constexpr uint64_t kYieldHoldNs =
    10'000'000;  // others yield this long after a high-priority launch, when it has no rhythm
inline constexpr uint64_t kUseWindowNs = 100'000'000;  // what a tenant used "lately"
// Others yield to a high-priority tenant without a rhythm at most this much of the time lately, or
// twice what it uses of the GPU if that is more: one that launches a little all the time cannot
// hold its neighbours off the GPU for good.
inline constexpr double kMostYield = 0.5;
inline constexpr uint64_t kBurstNs = 10'000'000;       // GPU time an idle tenant may bank

class Ledger {
 public:
  // Creates the file if absent (mode 0600) for a device of `capacity` bytes, or opens it if it
  // exists and matches. Throws Error (bad input for a foreign file, unavailable when it cannot be
  // opened).
  static Ledger CreateOrOpen(const std::string& path, uint64_t capacity,
                             const std::string& gpu_name);
  // Opens an existing ledger; throws Error if missing (unavailable), truncated, foreign or of
  // another version (bad input).
  static Ledger Open(const std::string& path);
  // Opens an existing ledger to read only (a tenant process under gpumuxd's view, which MakeSole
  // made whole): only the const readers and Gate may be called on it. Takes no lock and waits for
  // nothing. Throws as Open.
  static Ledger OpenReadOnly(const std::string& path);
  // gpumuxd's own ledgers, which it alone writes (its calls serialised by itself) and others at
  // most read: no flock is ever taken on them, since anyone who can open a file can hold one.
  // MakeSole makes a new ledger (mode `mode`, every page allocated up front) under another name
  // and renames it over `path`, so that it appears whole; OpenSole opens the one at `path`, never
  // waiting (a FIFO or a lease there is refused, not waited on). Both throw as CreateOrOpen; a full
  // filesystem is Error (unavailable), not a fault later.
  static Ledger MakeSole(const std::string& path, uint64_t capacity, const std::string& gpu_name,
                         mode_t mode);
  static Ledger OpenSole(const std::string& path);
  // Marks the ledger file at `path`, of any version, as one nobody writes any more (its magic
  // number zeroed), so that processes still mapping it see it no longer Intact() even where their
  // path to it still names it (a container's bind mount). gpumuxd calls it before making a view
  // anew. Does nothing to a file it cannot open or one too short to be a ledger.
  static void Retire(const std::string& path);

  Ledger(Ledger&&) noexcept;
  Ledger& operator=(Ledger&&) = delete;
  ~Ledger();

  uint64_t capacity() const { return layout_->header.capacity; }
  // Whether the header still says what it said when the file was made (magic number, version,
  // layout size): a shared ledger someone overwrote is not.
  bool Intact() const {
    return layout_->header.magic == kLedgerMagic && layout_->header.version == kLedgerVersion &&
           layout_->header.size == sizeof(LedgerLayout);
  }
  // Whether `path` still names the file this ledger maps: false once it was removed or made anew
  // (a gpumuxd of another ledger version makes its view anew and no longer writes this one).
  bool StillAt(const std::string& path) const;
  std::string gpu_name() const {
    return std::string(layout_->header.gpu_name,
                       strnlen(layout_->header.gpu_name, sizeof(layout_->header.gpu_name)));
  }

  // Launcher side. Adds a tenant (or updates the limits of one with this id); returns its slot.
  // Throws Error (bad input) for what CheckTenant refuses; Error (does not fit) when slots run out
  // or, with `strict`, when the memory quotas would sum past the device or the compute caps past
  // 100%.
  int AddTenant(const std::string& id, const TenantLimits& limits, bool strict = false);
  void RemoveTenant(int tenant);
  std::optional<int> FindTenant(const std::string& id) const;

  // Process side. Registers `pid` (this process by default) under a tenant; returns its slot.
  // `start_time`: the process's (ProcessStartTime) where the caller knows it, 0 to read it now.
  // Throws Error (not found) when no such process lives (one with another start time holds the
  // pid), Error (does not fit) when the tenant already has kMaxProcessesPerTenant live processes
  // (dead ones are reclaimed first): its own table is full, never a neighbour's.
  int RegisterProcess(int tenant, pid_t pid = 0, uint64_t start_time = 0);
  // Hot path of every allocation: reserves `bytes` for the process's tenant if the quota allows.
  // Lock-free, no system call. Returns false (and counts a refusal) when over quota.
  bool TryReserve(int process, uint64_t bytes);
  // Reserves as much of `want` as the quota leaves, if that is at least `least`; returns what it
  // reserved (0, counting a refusal, when not even `least` fits). gpumuxd grants credit with it.
  uint64_t ReserveUpTo(int process, uint64_t want, uint64_t least);
  // Returns bytes reserved earlier (after a free, or when the driver refused the allocation).
  void Release(int process, uint64_t bytes);
  // gpumuxd: charges `bytes` that process slot `process` already holds on the device (found there
  // by the driver, not reserved through this ledger: one that lost its ledger) to it and its
  // tenant, whatever the quota; the tenant may then be over it, and its reservations are refused
  // until it is back under.
  void Adopt(int process, uint64_t bytes);
  // The slot of live process `pid` (same pid and start time); nullopt if it has none.
  std::optional<int> FindProcess(pid_t pid) const;
  // Agent side, for tenants whose memory gpumuxd grants: writes the tenant's usage as gpumuxd
  // counts it, for the shim's cuMemGetInfo and `gpumux status` to read.
  void SetTenantUsed(int tenant, uint64_t bytes);
  // 0 for a slot out of range.
  uint64_t TenantUsed(int tenant) const {
    return InRange(tenant) ? layout_->tenants[tenant].used.load() : 0;
  }
  Priority TenantPriority(int tenant) const {
    return InRange(tenant) ? Priority(layout_->tenants[tenant].priority.load()) : Priority::kNormal;
  }
  uint64_t TenantQuota(int tenant) const {
    return InRange(tenant) ? layout_->tenants[tenant].quota.load() : 0;
  }
  uint64_t ProcessUsed(int process) const { return layout_->processes[process].used.load(); }
  // The tenant slot of process slot `process` (-1 if what is written there is out of range).
  int ProcessTenant(int process) const {
    int t = layout_->processes[process].tenant;
    return InRange(t) ? t : -1;
  }

  // Returns the usage of every process that is no longer alive to its tenant and frees the slot.
  // Safe to call from any process at any time; each dead slot is reclaimed exactly once.
  uint64_t ReclaimDead();
  // Frees a live process's slot (at exit), returning what it still held.
  void UnregisterProcess(int process);

  // Compute governor, called by each tenant process about once a millisecond (not on the launch
  // path). Adds `gpu_ns` (GPU time the process used since its last call) to its tenant, notes that
  // the tenant wants the GPU if `wants_gpu` (it launched, or a launch is waiting), brings the
  // tenant's credit up to `now_ns` at its fair share among the tenants at work now (launched or
  // waited within kAtWorkNs: time a neighbour between its bursts leaves is not kept idle for it,
  // nor a clearly light neighbour's room to grow: ShareAtWorkNow, compute_share.h; each interval
  // is accrued by exactly one process, claimed with a compare-and-swap), and tells the process
  // to hold launches
  // while the tenant's GPU time exceeds its credit or a high-priority tenant without a rhythm
  // launched within kYieldHoldNs (once it has one, each process's launch forecast keeps clear of
  // its bursts instead: shim/launch_forecast.h). High-priority tenants are never held; their
  // launches are stamped by the shim as they happen (BurstOf), not here.
  // Accuracy: a tenant overshoots by at most
  // the work it had queued when it was held plus one tick; the overshoot is repaid from later
  // credit, so long-run shares converge to the target (error shrinks as 1 / window).
  // `unmeasured_ns`: how far the process's measurement lags now (a real GPU's NVML samples arrive
  // once per sampling period, up to a second late). The credit may run that much further ahead of
  // the measured time at the tenant's share, beyond kBurstNs, so that time used but not reported
  // yet is not mistaken for banked idle time: without it, a busy tenant alone on the GPU would be
  // held for most of each sampling period whenever the period's GPU time arrives in one lump.
  ComputeVerdict ComputeTick(int process, uint64_t now_ns, uint64_t gpu_ns, bool wants_gpu,
                             uint64_t unmeasured_ns = 0);
  // The same for a whole tenant (gpumuxd ticks every tenant from the GPU time it measures): adds
  // `gpu_ns` to tenant slot `tenant`, and, with `stamp_launch`, stamps a high-priority tenant's
  // launch at `now_ns` when `wants_gpu` (for a tenant whose processes stamp none themselves).
  // {true, 0} for a slot out of range or not in use.
  ComputeVerdict TenantComputeTick(int tenant, uint64_t now_ns, uint64_t gpu_ns, bool wants_gpu,
                                   uint64_t unmeasured_ns = 0, bool stamp_launch = true);
  // The bursts of tenant slot `tenant` (null for a slot out of range), for a high-priority
  // process under `gpumux run` to stamp its launches and synchronising calls into as they happen
  // (NoteBurstLaunch, NoteBurstSync: the shim's hot path). Not on a read-only ledger.
  BurstWords* BurstOf(int tenant) {
    return InRange(tenant) ? &layout_->tenants[tenant].burst : nullptr;
  }
  // gpumuxd: takes tenant slot `tenant`'s bursts as its processes learnt them (`from`, read from
  // its activity file), made sane as of `now_ns` (CopyBurstFrom).
  void SetBurstFrom(int tenant, const BurstWords& from, uint64_t now_ns);
  // The high-priority tenants' rhythm as of `now_ns`: whether one is in a burst (InBurst), and
  // when the next burst is due (ForecastNextBurst; bursts stamped by its processes, or by
  // TenantComputeTick). For lower-priority processes, which keep their work off the GPU meanwhile.
  BurstForecast HighPriorityForecast(uint64_t now_ns) const;
  // gpumuxd: copies tenant slot `from` of `authority`'s rhythm into slot `tenant` of this view.
  void CopyRhythm(int tenant, const Ledger& authority, int from);
  // gpumuxd: publishes no rhythm for slot `tenant` of this view (its claims are not believed).
  void ClearRhythm(int tenant) {
    if (InRange(tenant)) ClearBurst(layout_->tenants[tenant].burst);
  }
  // What tenant slot `tenant` used of the GPU lately, as measured (0 to 1; 0 out of range).
  double TenantUse(int tenant) const {
    return InRange(tenant) ? layout_->tenants[tenant].use_ppm.load() / 1e6 : 0;
  }

  // gpumuxd's verdict for a tenant's processes, written into the view they read (SetGate), and
  // read by them on every governor tick (Gate; false for a slot out of range).
  void SetGate(int tenant, bool hold) {
    if (InRange(tenant)) layout_->tenants[tenant].gate.store(hold, std::memory_order_relaxed);
  }
  bool Gate(int tenant) const {
    return InRange(tenant) && layout_->tenants[tenant].gate.load(std::memory_order_relaxed) != 0;
  }
  // Sets the count of a tenant's held launches (gpumuxd copies it from the tenant's activity).
  void SetHeld(int tenant, uint64_t held) {
    if (InRange(tenant)) layout_->tenants[tenant].held.store(held, std::memory_order_relaxed);
  }
  // Counts a launch held back by the governor.
  void CountHeld(int process) {
    if (TenantSlot* t = TenantOf(layout_->processes[process]))
      t->held.fetch_add(1, std::memory_order_relaxed);
  }

  std::vector<TenantUsage> Snapshot() const;

  // gpumuxd: makes this view's process slots those of `authority` (its tenants found here by id),
  // so that a tenant's `nvidia-smi` lists its processes.
  void CopyProcessesFrom(const Ledger& authority);
  // Whether tenant slot `tenant` is in use, and its id ("" if not).
  bool InUse(int tenant) const {
    return InRange(tenant) && layout_->tenants[tenant].state.load() == 1;
  }
  std::string TenantId(int tenant) const;
  // The tenant slot of each live process, as (pid, tenant) pairs; replaces `*out`.
  void ProcessTenants(std::vector<std::pair<pid_t, int>>* out) const;

 private:
  Ledger(int fd, LedgerLayout* layout, bool shared);
  // Sizes (allocating every page) and stamps a new ledger in `fd`, which it owns from here.
  static Ledger Stamp(int fd, const std::string& path, uint64_t capacity,
                      const std::string& gpu_name, bool shared);
  // Maps an existing ledger file after checking its size, magic number, version and layout; takes
  // ownership of `fd` (closed on error too). `shared`: several processes write it (FileLock).
  static Ledger MapExisting(int fd, const std::string& path, bool writable, bool shared);
  // Live (registered) processes of tenant slot `tenant`.
  int LiveProcesses(int tenant) const;
  // The tenant slot a process slot names; null when another process wrote an index out of range
  // there (the file is shared: every index read from it is checked before use).
  TenantSlot* TenantOf(const ProcessSlot& p) const;
  static bool InRange(int tenant) { return tenant >= 0 && tenant < kMaxTenants; }
  int fd_;
  LedgerLayout* layout_;
  bool shared_;  // several processes write it: tenant changes take a flock (FileLock)
};

// Default ledger path for GPU `index`: $GPUMUX_RUNTIME_DIR (else
// /dev/shm/gpumux-<uid>)/gpu<index>.ledger
std::string LedgerPath(int gpu_index);

}  // namespace gpumux::node
