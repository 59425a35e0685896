// A tenant's launch activity under gpumuxd: the one thing its processes publish. A small file per
// tenant, <runtime-dir>/activity/<id>, made by gpumuxd in a directory only gpumuxd may write,
// owned by the tenant's user (mode 0600): the tenant's processes map it and count, once per
// governor tick and for each of its GPUs, that they launched or are waiting to there (and each
// launch their gates held back); a high-priority tenant's processes also stamp their launches and
// synchronising calls there as they happen, GPU by GPU (burst_rhythm.h). gpumuxd reads it with
// pread, never a mapping, so nothing done to the file (truncation, garbage) can fault gpumuxd, and
// what is written there counts only for the tenant that wrote it: whether it wants the GPU, as
// launching a kernel would say anyway, and, for a high-priority tenant, when its bursts run (made
// sane: Ledger::SetBurstFrom), as its launches would say anyway.
//
// Thread- and process-safe (atomics in a shared mapping on the tenant's side; whole-word reads on
// gpumuxd's).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

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

// The tenant's k-th GPU is its k-th place (its program's device k). Laid out so that a file of the
// layout before GPUs had records of their own (one count, the held launches, one rhythm) is this
// one cut short: gpumuxd extends such a file in place, and processes started before, which map the
// shorter file, go on publishing into their first GPU's record.
struct ActivityWords {
  std::atomic<uint64_t> active_ticks;    // its first GPU's (GpuActivity::active_ticks)
  std::atomic<uint64_t> held;            // launches its gates held back, on any of its GPUs
  BurstWords burst;                      // its first GPU's (GpuActivity::burst)
  GpuActivity more[kMaxTenantGpus - 1];  // more[k - 1]: its k-th GPU's, k >= 1
};
// The size of a file of the layout before (ActivityReader extends one).
inline constexpr size_t kActivityBytesOfOneGpu = offsetof(ActivityWords, more);

// Tenant side: the mapped file (GPUMUX_ACTIVITY). Null words when it could not be opened.
class ActivityWriter {
 public:
  // Maps the file at `path`; throws Error (unavailable) when it cannot be opened or is too short.
  explicit ActivityWriter(const std::string& path);
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
  ActivityWords* words_ = nullptr;
};

// gpumuxd side: one tenant's file, made (every page allocated up front) or, after a restart,
// reopened when it is still a regular file of the right owner, without ever waiting on it (a lease
// its owner holds makes it anew), and read without mapping.
class ActivityReader {
 public:
  // Makes `path` (the directory must be gpumuxd's) owned by `owner`, mode 0600, or keeps the one
  // there if it is a regular file owned by `owner` (extended in place if it has the layout before
  // records per GPU). Throws Error (unavailable).
  ActivityReader(const std::string& path, uid_t owner);
  ActivityReader(const ActivityReader&) = delete;
  ActivityReader& operator=(const ActivityReader&) = delete;
  ~ActivityReader();

  struct Reading {
    uint64_t active_ticks = 0, held = 0;
    BurstWords burst{};  // as the tenant wrote them: check before use (Ledger::SetBurstFrom)
  };
  // What the file says now of the tenant's GPU `gpu` (and the held launches of all); zeros for a
  // file cut short or a GPU out of range.
  Reading Read(int gpu) const;
  // The tenant owns the file, so it can make it larger (ftruncate, fallocate) and fill the
  // filesystem that gpumuxd's ledgers and its neighbours' files live on. Cuts a file grown past its
  // size (or holding blocks past it) back, returning the room; true if it had to. gpumuxd calls it
  // with each memory check (twice a second), which bounds how long the room stays taken.
  bool KeepSize();
  // Removes the file (the tenant is gone).
  void Remove();
  uid_t owner() const { return owner_; }

 private:
  std::string path_;
  uid_t owner_;
  int fd_ = -1;
};

}  // namespace gpumux::node
