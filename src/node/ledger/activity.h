// A tenant's launch activity under gpumuxd: the one thing its processes publish. A small memory
// file per tenant (memfd "gpumux-activity"), made by gpumuxd and sealed at its size — no one can
// grow it, shrink it or unseal it, so it takes no room on any filesystem and none past its size —
// and handed to each of the tenant's processes with the answer to its registration (SCM_RIGHTS on
// gpumuxd's socket): only processes gpumuxd registered under the tenant hold it. They map it and
// count, once per governor tick and for each of its GPUs, that they launched or are waiting to
// there (and each launch their gates held back); a high-priority tenant's processes also stamp
// their launches and synchronising calls there as they happen, GPU by GPU (burst_rhythm.h).
// gpumuxd reads it with pread, never a mapping, so nothing written there can fault gpumuxd, and it
// counts only for the tenant that wrote it: whether it wants the GPU, as launching a kernel would
// say anyway, and, for a high-priority tenant, when its bursts run (made sane:
// Ledger::SetBurstFrom), as its launches would say anyway.
//
// Thread- and process-safe (atomics in a shared mapping on the tenant's side; whole-word reads on
// gpumuxd's).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "node/ledger/burst_rhythm.h"

namespace gpumux::node {

// The most GPUs (whole, or MIG instances) one tenant spans.
inline constexpr int kMaxTenantGpus = 8;

// What a tenant's processes publish about one of its GPUs: each GPU's governor in gpumuxd sees
// the tenant at work, and a high-priority tenant's bursts, only where they happen.
struct GpuActivity {
  std::atomic<uint64_t> active_ticks;  // governor ticks in which a process launched or waited there
  BurstWords burst;  // a high-priority tenant's bursts there, stamped as they happen
};

// The tenant's k-th GPU is its k-th place (its program's device k).
struct ActivityWords {
  std::atomic<uint64_t> active_ticks;    // its first GPU's (GpuActivity::active_ticks)
  std::atomic<uint64_t> held;            // launches its gates held back, on any of its GPUs
  BurstWords burst;                      // its first GPU's (GpuActivity::burst)
  GpuActivity more[kMaxTenantGpus - 1];  // more[k - 1]: its k-th GPU's, k >= 1
};

// Tenant side: the mapped memory file gpumuxd handed this process.
class ActivityWriter {
 public:
  // Maps the memory file `fd` and keeps `fd` open (a restarted gpumuxd finds the tenant's file
  // among its processes' descriptors). Throws Error (unavailable), closing `fd`, when it is cut
  // short or cannot be mapped.
  explicit ActivityWriter(int fd);
  ActivityWriter(const ActivityWriter&) = delete;
  ActivityWriter& operator=(const ActivityWriter&) = delete;
  ~ActivityWriter();

  // `gpu`: which of the tenant's GPUs (0 to kMaxTenantGpus - 1).
  void Tick(int gpu) {
    (gpu == 0 ? words_->active_ticks : words_->more[gpu - 1].active_ticks)
        .fetch_add(1, std::memory_order_relaxed);
  }
  void CountHeld() { words_->held.fetch_add(1, std::memory_order_relaxed); }
  // Where a high-priority process stamps its bursts on its GPU `gpu` (NoteBurstLaunch,
  // NoteBurstSync).
  BurstWords* burst(int gpu) { return gpu == 0 ? &words_->burst : &words_->more[gpu - 1].burst; }

 private:
  int fd_ = -1;
  ActivityWords* words_ = nullptr;
};

// gpumuxd side: one tenant's memory file, read without mapping. Not thread-safe (gpumuxd's lock).
class ActivityReader {
 public:
  // Makes a new one, sealed at its size. Throws Error (unavailable).
  ActivityReader();
  // After a restart: the tenant's file that process `pid` holds (one gpumuxd made: named so,
  // sealed against growing and shrinking, of its size), found among its descriptors; null if it
  // holds none. Needs root, or the process's user.
  static std::unique_ptr<ActivityReader> FoundIn(pid_t pid);
  ActivityReader(const ActivityReader&) = delete;
  ActivityReader& operator=(const ActivityReader&) = delete;
  ~ActivityReader();

  struct Reading {
    uint64_t active_ticks = 0, held = 0;
    BurstWords burst{};  // as the tenant wrote them: check before use (Ledger::SetBurstFrom)
  };
  // What the file says now of the tenant's GPU `gpu` (and the held launches of all); zeros for a
  // GPU out of range.
  Reading Read(int gpu) const;
  // A new descriptor of the file, for a process of the tenant (the caller owns it); -1 if none
  // could be made.
  int Share() const;

 private:
  explicit ActivityReader(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace gpumux::node
