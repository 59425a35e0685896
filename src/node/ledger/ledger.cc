#include "node/ledger/ledger.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <new>
#include <utility>

#include "base/clock.h"
#include "base/process.h"
#include "base/tenant_id.h"
#include "node/ledger/shared_stamp.h"

namespace gpumux::node {
namespace {

// A slot's id, read within its array whatever bytes another process wrote there.
std::string SlotId(const TenantSlot& s) { return std::string(s.id, strnlen(s.id, sizeof(s.id))); }

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

// Holds an exclusive flock while the launcher changes tenants (not on the allocation path), on a
// ledger that several processes write (`gpumux run`'s, one user's); none on gpumuxd's, which it
// writes alone: a lock there would be one any reader could take.
class FileLock {
 public:
  FileLock(int fd, bool shared) : fd_(shared ? fd : -1) {
    if (fd_ >= 0) flock(fd_, LOCK_EX);
  }
  ~FileLock() {
    if (fd_ >= 0) flock(fd_, LOCK_UN);
  }

 private:
  int fd_;
};

LedgerLayout* Map(int fd, const std::string& path, bool writable = true) {
  void* p = mmap(nullptr, sizeof(LedgerLayout), writable ? PROT_READ | PROT_WRITE : PROT_READ,
                 MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) throw Unavailable(Errno(path + ": cannot map the ledger"));
  return static_cast<LedgerLayout*>(p);
}

void Validate(const LedgerLayout* l, const std::string& path) {
  if (l->header.magic != kLedgerMagic)
    throw BadInput(path + ": not a gpumux ledger (bad magic number)");
  if (l->header.version != kLedgerVersion) {
    throw BadInput(path + ": ledger version " + std::to_string(l->header.version) +
                   ", this gpumux reads version " + std::to_string(kLedgerVersion));
  }
  if (l->header.size != sizeof(LedgerLayout))
    throw BadInput(path + ": ledger layout size differs from this gpumux's");
}

bool Alive(pid_t pid, uint64_t start_time) {
  std::optional<uint64_t> now = ProcessStartTime(pid);
  return now && *now == start_time;
}

}  // namespace

std::string LedgerPath(int gpu_index) {
  const char* dir = std::getenv("GPUMUX_RUNTIME_DIR");
  std::string base = dir && *dir ? dir : "/dev/shm/gpumux-" + std::to_string(getuid());
  return base + "/gpu" + std::to_string(gpu_index) + ".ledger";
}

Ledger::Ledger(int fd, LedgerLayout* layout, bool shared)
    : fd_(fd), layout_(layout), shared_(shared) {}
Ledger::Ledger(Ledger&& o) noexcept : fd_(o.fd_), layout_(o.layout_), shared_(o.shared_) {
  o.fd_ = -1;
  o.layout_ = nullptr;
}
Ledger::~Ledger() {
  if (layout_) munmap(layout_, sizeof(LedgerLayout));
  if (fd_ >= 0) close(fd_);
}

Ledger Ledger::CreateOrOpen(const std::string& path, uint64_t capacity,
                            const std::string& gpu_name) {
  std::string dir = path.substr(0, path.rfind('/'));
  if (!dir.empty()) mkdir(dir.c_str(), 0700);
  // The ledger of one user's tenants: a folder another user made (/dev/shm/gpumux-UID is a name
  // anyone can take first) or may replace files in would let that user read and rewrite its
  // quotas, or put a link there to a file of the user's for this open to write. A sticky folder of
  // root's or the user's (/tmp) is fine: no one else can replace the user's file there.
  if (!dir.empty()) {
    struct stat folder;
    const bool is_folder = lstat(dir.c_str(), &folder) == 0 && S_ISDIR(folder.st_mode);
    const bool only_mine =
        is_folder && folder.st_uid == geteuid() && (folder.st_mode & 022) == 0;
    const bool sticky_of_root_or_mine = is_folder && (folder.st_mode & S_ISVTX) &&
                                        (folder.st_uid == 0 || folder.st_uid == geteuid());
    if (!only_mine && !sticky_of_root_or_mine) {
      throw Unavailable(dir + ": the ledger's folder must be this user's, and no one else's to "
                              "write (or sticky); remove it or set GPUMUX_RUNTIME_DIR to another");
    }
  }
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) throw Unavailable(Errno(path + ": cannot open or create the ledger"));
  // Whose file it is, before the lock: a file another user placed could be one it holds locked.
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
    close(fd);
    throw Unavailable(path + ": the ledger there is not this user's own file");
  }
  FileLock lock(fd, true);
  fstat(fd, &st);  // its size now that no creator is midway
  if (st.st_size == 0) return Stamp(fd, path, capacity, gpu_name, true);
  return MapExisting(fd, path, true, true);
}

Ledger Ledger::Stamp(int fd, const std::string& path, uint64_t capacity,
                     const std::string& gpu_name, bool shared) {
  // Every page allocated now: a full filesystem is an error here, never a SIGBUS in a process that
  // maps the file later.
  if (int e = posix_fallocate(fd, 0, sizeof(LedgerLayout)); e != 0) {
    close(fd);
    errno = e;
    throw Unavailable(Errno(path + ": cannot allocate the ledger"));
  }
  LedgerLayout* l = Map(fd, path);
  new (l) LedgerLayout();  // zeroed by the allocation; atomics start at 0
  std::strncpy(l->header.gpu_name, gpu_name.c_str(), sizeof(l->header.gpu_name) - 1);
  l->header.capacity = capacity;
  l->header.size = sizeof(LedgerLayout);
  l->header.version = kLedgerVersion;
  std::atomic_thread_fence(std::memory_order_release);
  l->header.magic = kLedgerMagic;
  return Ledger(fd, l, shared);
}

Ledger Ledger::MakeSole(const std::string& path, uint64_t capacity, const std::string& gpu_name,
                        mode_t mode) {
  // Made whole under another name and renamed into place, so that no reader ever sees it half
  // made, and readers need no lock to wait for it.
  std::string made = path + ".new";
  unlink(made.c_str());
  int fd = open(made.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) throw Unavailable(Errno(made + ": cannot make the ledger"));
  try {
    Ledger ledger = Stamp(fd, made, capacity, gpu_name, false);
    if (fchmod(ledger.fd_, mode) != 0 || rename(made.c_str(), path.c_str()) != 0)
      throw Unavailable(Errno(path + ": cannot put the ledger in place"));
    return ledger;
  } catch (const Error&) {
    unlink(made.c_str());
    throw;
  }
}

Ledger Ledger::OpenSole(const std::string& path) {
  // No lock, and nothing that waits: O_NONBLOCK for whatever else may sit at the path.
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) throw Unavailable(Errno(path + ": cannot open the ledger"));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    throw BadInput(path + ": not a regular file");
  }
  return MapExisting(fd, path, true, false);
}

Ledger Ledger::Open(const std::string& path) {
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) throw Unavailable(Errno(path + ": cannot open the ledger"));
  // A ledger being created is sized and then stamped under the creator's exclusive lock: wait for
  // it, so that a half-made file is not taken for a foreign one. An empty file is one whose creator
  // has not taken its lock yet (microseconds): look again shortly.
  struct stat st;
  for (int attempt = 0; attempt < 100; ++attempt) {
    flock(fd, LOCK_SH);
    if (fstat(fd, &st) == 0 && st.st_size > 0) break;
    flock(fd, LOCK_UN);
    usleep(1000);
  }
  Ledger ledger = MapExisting(fd, path, true, true);
  flock(fd, LOCK_UN);
  return ledger;
}

Ledger Ledger::OpenReadOnly(const std::string& path) {
  // gpumuxd's view appears whole (MakeSole): nothing to wait for, and no lock that anyone who can
  // read the file could hold against us.
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw Unavailable(Errno(path + ": cannot open the ledger"));
  return MapExisting(fd, path, false, false);
}

Ledger Ledger::MapExisting(int fd, const std::string& path, bool writable, bool shared) {
  struct stat st;
  fstat(fd, &st);
  if (size_t(st.st_size) < sizeof(LedgerLayout)) {
    close(fd);
    throw BadInput(path + ": truncated ledger (" + std::to_string(st.st_size) + " bytes)");
  }
  Ledger ledger(fd, Map(fd, path, writable), shared);  // owns fd from here, also if Validate throws
  Validate(ledger.layout_, path);
  return ledger;
}

std::optional<int> Ledger::FindTenant(const std::string& id) const {
  for (int t = 0; t < kMaxTenants; ++t) {
    const TenantSlot& s = layout_->tenants[t];
    if (s.state.load() == 1 && id == SlotId(s)) return t;
  }
  return std::nullopt;
}

static_assert(kTenantIdSize == kMaxTenantIdLength + 1, "a slot holds the longest id and its NUL");

void CheckTenantId(const std::string& id) {
  if (IsTenantId(id)) return;
  bool printable = std::all_of(id.begin(), id.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
  throw BadInput("tenant id " +
                 (printable && id.size() < 100 ? "'" + id + "'" : std::string("(not shown)")) +
                 ": use 1 to 63 letters, digits, '.', '_' or '-' (not '.' or '..')");
}

void CheckTenant(const std::string& id, const TenantLimits& limits) {
  CheckTenantId(id);
  if (limits.cap_permille == 0 || limits.cap_permille > kNoCap)
    throw BadInput("compute cap must be above 0% and at most 100%");
  if (limits.weight == 0 || limits.weight > kMaxWeight) {
    throw BadInput("compute weight must be 1 to " + std::to_string(kMaxWeight));
  }
  if (limits.priority == Priority::kHigh && limits.cap_permille < kNoCap) {
    throw BadInput(
        "a high-priority tenant's launches never wait, so a compute cap cannot hold; give one or "
        "the other");
  }
}

int Ledger::AddTenant(const std::string& id, const TenantLimits& limits, bool strict) {
  CheckTenant(id, limits);
  FileLock lock(fd_, shared_);
  std::optional<int> existing = FindTenant(id);
  if (strict) {
    uint64_t memory = limits.memory;
    uint32_t caps = limits.cap_permille < kNoCap ? limits.cap_permille : 0;
    for (int t = 0; t < kMaxTenants; ++t) {
      const TenantSlot& s = layout_->tenants[t];
      if (s.state.load() != 1 || (existing && t == *existing)) continue;
      memory += s.quota.load();
      if (s.cap_permille.load() < kNoCap) caps += s.cap_permille.load();
    }
    if (memory > capacity()) {
      throw DoesNotFit("quotas would sum to " + std::to_string(memory) +
                       " bytes, more than the GPU's " + std::to_string(capacity()));
    }
    if (caps > kNoCap) {
      throw DoesNotFit("compute caps would sum to " + std::to_string(caps / 10.0).substr(0, 5) +
                       "%, more than 100%");
    }
  }
  auto set_limits = [&](TenantSlot& s) {
    s.quota.store(limits.memory);
    s.cap_permille.store(limits.cap_permille);
    s.weight.store(limits.weight);
    s.priority.store(int32_t(limits.priority));
  };
  if (existing) {
    set_limits(layout_->tenants[*existing]);
    return *existing;
  }
  for (int t = 0; t < kMaxTenants; ++t) {
    TenantSlot& s = layout_->tenants[t];
    if (s.state.load() == 0) {
      std::memset(s.id, 0, sizeof(s.id));
      std::memcpy(s.id, id.data(), id.size());
      set_limits(s);
      uint64_t now = NowNs();
      for (auto* zero :
           {&s.used, &s.refused, &s.reclaimed, &s.reclaimed_processes, &s.gpu_ns, &s.wanted_ns,
            &s.held, &s.use_gpu_ns, &s.share_held_ns})
        zero->store(0);
      ClearBurst(s.burst);
      s.gate.store(0);
      s.use_ppm.store(0);
      s.share_ppm.store(0);
      s.yield_ppm.store(0);
      s.credit_ns.store(0);
      s.added_ns.store(now);
      s.accrued_ns.store(now);
      s.state.store(1);
      return t;
    }
  }
  throw DoesNotFit("all " + std::to_string(kMaxTenants) + " tenant slots of the ledger are in use");
}

void Ledger::RemoveTenant(int tenant) {
  FileLock lock(fd_, shared_);
  layout_->tenants[tenant].state.store(0);
}

int Ledger::RegisterProcess(int tenant, pid_t pid, uint64_t start_time) {
  if (pid == 0) pid = getpid();
  std::optional<uint64_t> start = ProcessStartTime(pid);
  if (start && start_time && *start != start_time) start.reset();  // that process has exited
  if (!start) throw NotFound("process " + std::to_string(pid) + " does not exist");
  if (LiveProcesses(tenant) >= kMaxProcessesPerTenant) {
    ReclaimDead();
    if (LiveProcesses(tenant) >= kMaxProcessesPerTenant) {
      throw DoesNotFit("the tenant already has " + std::to_string(kMaxProcessesPerTenant) +
                       " processes, the most one tenant may have");
    }
  }
  for (int attempt = 0; attempt < 2; ++attempt) {
    for (int p = 0; p < kMaxProcesses; ++p) {
      ProcessSlot& s = layout_->processes[p];
      int32_t expected = 0;
      if (s.pid.load() == 0 &&
          s.pid.compare_exchange_strong(expected, -1)) {  // -1: being filled in
        s.tenant = tenant;
        s.start_time = *start;
        s.used.store(0);
        s.gpu_ns.store(0);
        s.pid.store(pid);
        return p;
      }
    }
    ReclaimDead();  // free the slots of dead processes, then try once more
  }
  throw DoesNotFit("all " + std::to_string(kMaxProcesses) +
                   " process slots of the ledger are in use");
}

bool Ledger::TryReserve(int process, uint64_t bytes) {
  return ReserveUpTo(process, bytes, bytes) == bytes;
}

uint64_t Ledger::ReserveUpTo(int process, uint64_t want, uint64_t least) {
  // Hot path: no lock, no system call. The compare-and-swap makes check and add one step, so
  // concurrent reservations of one tenant can never pass its quota together.
  ProcessSlot& p = layout_->processes[process];
  TenantSlot* t = TenantOf(p);
  if (!t) return 0;
  uint64_t quota = t->quota.load(std::memory_order_relaxed);
  uint64_t used = t->used.load(std::memory_order_relaxed);
  uint64_t take;
  do {
    uint64_t room = used < quota ? quota - used : 0;
    take = std::min(want, room);
    if (take < least || take == 0) {
      t->refused.fetch_add(1, std::memory_order_relaxed);
      return 0;
    }
  } while (!t->used.compare_exchange_weak(used, used + take, std::memory_order_acq_rel));
  p.used.fetch_add(take, std::memory_order_relaxed);
  return take;
}

void Ledger::Release(int process, uint64_t bytes) {
  ProcessSlot& p = layout_->processes[process];
  TenantSlot* t = TenantOf(p);
  if (!t) return;
  p.used.fetch_sub(bytes, std::memory_order_relaxed);
  t->used.fetch_sub(bytes, std::memory_order_acq_rel);
}

void Ledger::Retire(const std::string& path) {
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return;
  struct stat st;
  const uint64_t none = 0;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && size_t(st.st_size) >= sizeof(LedgerHeader))
    (void)!pwrite(fd, &none, sizeof(none), offsetof(LedgerHeader, magic));
  close(fd);
}

bool Ledger::StillAt(const std::string& path) const {
  struct stat mapped, named;
  return fstat(fd_, &mapped) == 0 && stat(path.c_str(), &named) == 0 &&
         mapped.st_dev == named.st_dev && mapped.st_ino == named.st_ino;
}

void Ledger::Adopt(int process, uint64_t bytes) {
  ProcessSlot& p = layout_->processes[process];
  TenantSlot* t = TenantOf(p);
  if (!t) return;
  p.used.fetch_add(bytes, std::memory_order_relaxed);
  t->used.fetch_add(bytes, std::memory_order_acq_rel);
}

std::optional<int> Ledger::FindProcess(pid_t pid) const {
  std::optional<uint64_t> start = ProcessStartTime(pid);
  if (!start) return std::nullopt;
  for (int p = 0; p < kMaxProcesses; ++p) {
    const ProcessSlot& s = layout_->processes[p];
    if (s.pid.load() == pid && s.start_time == *start) return p;
  }
  return std::nullopt;
}

void Ledger::SetTenantUsed(int tenant, uint64_t bytes) {
  if (tenant >= 0 && tenant < kMaxTenants) layout_->tenants[tenant].used.store(bytes);
}

TenantSlot* Ledger::TenantOf(const ProcessSlot& p) const {
  int32_t t = p.tenant;
  return t >= 0 && t < kMaxTenants ? &layout_->tenants[t] : nullptr;
}

uint64_t Ledger::ReclaimDead() {
  uint64_t total = 0;
  for (int p = 0; p < kMaxProcesses; ++p) {
    ProcessSlot& s = layout_->processes[p];
    int32_t pid = s.pid.load();
    if (pid <= 0 || Alive(pid, s.start_time)) continue;
    // Claim the slot: only one reclaimer wins, and a dead process no longer touches it.
    if (!s.pid.compare_exchange_strong(pid, -1)) continue;
    uint64_t bytes = s.used.exchange(0);
    if (TenantSlot* t = TenantOf(s)) {
      t->used.fetch_sub(bytes);
      t->reclaimed.fetch_add(bytes);
      t->reclaimed_processes.fetch_add(1);
      total += bytes;
    }
    s.pid.store(0);
  }
  return total;
}

void Ledger::UnregisterProcess(int process) {
  ProcessSlot& s = layout_->processes[process];
  uint64_t bytes = s.used.exchange(0);
  if (TenantSlot* t = TenantOf(s)) t->used.fetch_sub(bytes);
  s.pid.store(0);
}

int Ledger::LiveProcesses(int tenant) const {
  int n = 0;
  for (const ProcessSlot& p : layout_->processes) n += p.pid.load() != 0 && p.tenant == tenant;
  return n;
}

namespace {

// Whether normal and low tenants yield now to high-priority tenant `s`: while it has no rhythm
// (once it has one, their launch forecasts keep clear of its bursts), for kYieldHoldNs after its
// last launch, while they have yielded to it lately less than kMostYield of the time (or twice its
// use of the GPU).
bool YieldsTo(const TenantSlot& s, uint64_t now_ns) {
  if (HasRhythm(s.burst, now_ns) ||
      !Within(s.wanted_ns.load(std::memory_order_relaxed), now_ns, kYieldHoldNs))
    return false;
  double most = std::max(kMostYield, 2 * s.use_ppm.load(std::memory_order_relaxed) / 1e6);
  return s.yield_ppm.load(std::memory_order_relaxed) < most * 1e6;
}

}  // namespace

ComputeVerdict Ledger::ComputeTick(int process, uint64_t now_ns, uint64_t gpu_ns, bool wants_gpu,
                                   uint64_t unmeasured_ns) {
  ProcessSlot& p = layout_->processes[process];
  TenantSlot* mine = TenantOf(p);
  if (!mine) return {true, 0};  // its slot was overwritten: hold until it is put back
  if (gpu_ns) p.gpu_ns.fetch_add(gpu_ns, std::memory_order_relaxed);
  // Its shim stamps a high-priority process's launches as they happen, so this does not.
  return TenantComputeTick(int(mine - layout_->tenants), now_ns, gpu_ns, wants_gpu, unmeasured_ns,
                           /*stamp_launch=*/false);
}

void Ledger::SetBurstFrom(int tenant, const BurstWords& from, uint64_t now_ns) {
  if (InRange(tenant)) CopyBurstFrom(layout_->tenants[tenant].burst, from, now_ns);
}

ComputeVerdict Ledger::TenantComputeTick(int my_tenant, uint64_t now_ns, uint64_t gpu_ns,
                                         bool wants_gpu, uint64_t unmeasured_ns,
                                         bool stamp_launch) {
  if (!InRange(my_tenant) || layout_->tenants[my_tenant].state.load() != 1) return {true, 0};
  TenantSlot& me = layout_->tenants[my_tenant];
  if (gpu_ns) me.gpu_ns.fetch_add(gpu_ns, std::memory_order_relaxed);
  if (wants_gpu) {
    StampForward(me.wanted_ns, now_ns);
    if (stamp_launch && Priority(me.priority.load()) == Priority::kHigh)
      NoteBurstLaunch(me.burst, now_ns);
  }
  // Who wants the GPU now, and is a high-priority tenant at work?
  std::vector<ComputeDemand> demand(kMaxTenants);
  auto my_priority = Priority(me.priority.load());
  bool yield = false;
  for (int t = 0; t < kMaxTenants; ++t) {
    const TenantSlot& s = layout_->tenants[t];
    if (s.state.load(std::memory_order_relaxed) != 1) continue;
    uint64_t wanted = s.wanted_ns.load(std::memory_order_relaxed);
    auto priority = Priority(s.priority.load(std::memory_order_relaxed));
    bool held_lately =
        Within(s.share_held_ns.load(std::memory_order_relaxed), now_ns, kUseWindowNs);
    double use = s.use_ppm.load(std::memory_order_relaxed) / 1e6;
    demand[t] = {s.cap_permille.load(std::memory_order_relaxed),
                 s.weight.load(std::memory_order_relaxed),
                 Within(wanted, now_ns, kWantWindowNs),
                 priority == Priority::kLow,
                 DemandOf(use, s.share_ppm.load(std::memory_order_relaxed) / 1e6, held_lately),
                 Within(wanted, now_ns, kAtWorkNs),
                 use};
    // Others yield kYieldHoldNs after a high-priority tenant's last launch while it has no
    // rhythm. Once it has one, their launches keep clear of its bursts by themselves, to the
    // 100 µs rather than to this tick (shim/launch_forecast.h). A rhythm lost (bursts running
    // together, e.g. slowed by others' work) is no rhythm: the long yield applies until bursts
    // come apart again.
    if (priority == Priority::kHigh && YieldsTo(s, now_ns)) yield = true;
  }
  demand[my_tenant].wants_gpu = true;  // a process that asks is at least deciding whether to launch
  double share = FairShares(demand)[my_tenant];
  // The credit grows at the share among the tenants at work now (compute_share.h).
  double share_now = ShareAtWorkNow(std::move(demand), size_t(my_tenant), share);
  // Bring the credit and the use up to now: the process that moves accrued_ns forward adds that
  // interval.
  uint64_t accrued = me.accrued_ns.load();
  if (now_ns > accrued && me.accrued_ns.compare_exchange_strong(accrued, now_ns)) {
    uint64_t elapsed = now_ns - accrued, used = me.gpu_ns.load();
    int64_t credit = me.credit_ns.load();
    int64_t next;
    uint64_t burst = kBurstNs + uint64_t(share_now * double(unmeasured_ns));
    do {
      next = AccrueCredit(credit, used, share_now, elapsed, burst);
    } while (!me.credit_ns.compare_exchange_weak(credit, next));
    // An average over about kUseWindowNs (exponential), of the GPU time measured meanwhile.
    uint64_t before = me.use_gpu_ns.exchange(used);
    double rate = std::min(1.0, double(used - std::min(used, before)) / double(elapsed));
    double keep = std::exp(-double(elapsed) / double(kUseWindowNs));
    double use = me.use_ppm.load() / 1e6;
    me.use_ppm.store(uint32_t(std::lround(1e6 * (use * keep + rate * (1 - keep)))));
    if (my_priority == Priority::kHigh) {
      double yielded = me.yield_ppm.load() / 1e6;
      me.yield_ppm.store(uint32_t(
          std::lround(1e6 * (yielded * keep + (YieldsTo(me, now_ns) ? 1 - keep : 0)))));
    }
  }
  me.share_ppm.store(uint32_t(std::lround(share * 1e6)), std::memory_order_relaxed);
  ComputeVerdict v;
  v.share = share;
  if (my_priority != Priority::kHigh) {
    bool over_share = int64_t(me.gpu_ns.load()) > me.credit_ns.load();
    v.hold = yield || over_share;
    // Held below its cap: it wants more than the division gives it.
    if (over_share && share + 1e-9 < std::min(me.cap_permille.load(), kNoCap) / 1000.0)
      me.share_held_ns.store(now_ns, std::memory_order_relaxed);
  }
  return v;
}

BurstForecast Ledger::HighPriorityForecast(uint64_t now_ns) const {
  BurstForecast f;
  for (const TenantSlot& s : layout_->tenants) {
    if (s.state.load(std::memory_order_relaxed) != 1 ||
        Priority(s.priority.load(std::memory_order_relaxed)) != Priority::kHigh)
      continue;
    if (InBurst(s.burst, now_ns)) f.active = true;
    NextBurst next;
    if (ForecastNextBurst(s.burst, now_ns, &next) &&
        (f.next_start_ns == 0 || next.start_ns < f.next_start_ns))
      f.next_start_ns = next.start_ns, f.period_ns = next.period_ns, f.margin_ns = next.margin_ns;
  }
  return f;
}

void Ledger::CopyRhythm(int tenant, const Ledger& authority, int from) {
  if (!InRange(tenant) || !authority.InRange(from)) return;
  const TenantSlot& a = authority.layout_->tenants[from];
  TenantSlot& v = layout_->tenants[tenant];
  v.wanted_ns.store(a.wanted_ns.load(std::memory_order_relaxed), std::memory_order_relaxed);
  CopyBurst(v.burst, a.burst);
}

std::vector<TenantUsage> Ledger::Snapshot() const {
  const uint64_t now = NowNs();
  std::vector<TenantUsage> out;
  int index_of[kMaxTenants];
  for (int t = 0; t < kMaxTenants; ++t) {
    const TenantSlot& s = layout_->tenants[t];
    index_of[t] = -1;
    if (s.state.load() != 1) continue;
    index_of[t] = int(out.size());
    out.push_back({t,
                   SlotId(s),
                   s.quota.load(),
                   s.used.load(),
                   s.refused.load(),
                   s.reclaimed.load(),
                   s.reclaimed_processes.load(),
                   s.cap_permille.load(),
                   s.weight.load(),
                   Priority(s.priority.load()),
                   s.added_ns.load(),
                   s.gpu_ns.load(),
                   s.held.load(),
                   {}});
    RhythmSummary rhythm;
    if (Priority(s.priority.load()) == Priority::kHigh && SummariseRhythm(s.burst, now, &rhythm))
      out.back().rhythm = rhythm;
  }
  for (const ProcessSlot& ps : layout_->processes) {
    int32_t pid = ps.pid.load();
    int32_t t = ps.tenant;
    if (pid > 0 && InRange(t) && index_of[t] >= 0)
      out[size_t(index_of[t])].processes.push_back({pid, ps.used.load()});
  }
  return out;
}

std::string Ledger::TenantId(int tenant) const {
  return InUse(tenant) ? SlotId(layout_->tenants[tenant]) : std::string();
}

void Ledger::ProcessTenants(std::vector<std::pair<pid_t, int>>* out) const {
  out->clear();
  for (const ProcessSlot& p : layout_->processes) {
    int32_t pid = p.pid.load(std::memory_order_relaxed);
    if (pid > 0 && InRange(p.tenant)) out->push_back({pid, p.tenant});
  }
}

void Ledger::CopyProcessesFrom(const Ledger& authority) {
  int here[kMaxTenants];
  for (int t = 0; t < kMaxTenants; ++t) {
    std::optional<int> found =
        authority.InUse(t) ? FindTenant(authority.TenantId(t)) : std::nullopt;
    here[t] = found.value_or(-1);
  }
  for (int p = 0; p < kMaxProcesses; ++p) {
    const ProcessSlot& from = authority.layout_->processes[p];
    ProcessSlot& to = layout_->processes[p];
    int32_t pid = from.pid.load();
    int32_t t = from.tenant;
    if (pid <= 0 || !InRange(t) || here[t] < 0) {
      to.pid.store(0);
      continue;
    }
    to.tenant = here[t];
    to.start_time = from.start_time;
    to.used.store(from.used.load());
    to.pid.store(pid);
  }
}

}  // namespace gpumux::node
