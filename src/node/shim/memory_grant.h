// A tenant process's memory credit from gpumuxd, for a shim running under gpumuxd (which sets
// GPUMUX_AGENT to its socket). Allocations take from the credit with one compare-and-swap and no
// system call; when it runs short the process asks gpumuxd for more (POST /v1/grants), a batch of
// kGrantBatchBytes at a time or exactly what is left of the quota, and hands back what it holds
// beyond two batches. gpumuxd counts every grant against the calling pid (from the socket, not
// the request) and the tenant's quota, in a ledger no tenant can write: a process that rewrites
// every byte of shared state it can open still gets no more than its quota, and cannot touch a
// neighbour's.
//
// Thread-safe. Fails closed: if gpumuxd cannot be reached, what the credit does not cover is
// refused.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <new>
#include <string>

namespace gpumux::shim {

inline constexpr uint64_t kGrantBatchBytes = 64ull << 20;

class MemoryGrant {
 public:
  // `part`: which of the tenant's GPUs the credit is for (0: its first; a tenant over several GPUs
  // has a credit on each).
  MemoryGrant(std::string socket, std::string tenant, int part = 0)
      : socket_(std::move(socket)), tenant_(std::move(tenant)), part_(part) {}

  // Registers this process with gpumuxd under the tenant (a grant of no bytes), so that gpumuxd
  // counts its GPU time against the tenant before it allocates anything. False, saying why in
  // `*why`: gpumuxd refused (not the tenant's user or cgroup, the tenant has all the processes it
  // may have, or gpumuxd cannot see this process's pid) or could not be reached. The tenant's
  // activity file gpumuxd hands with its answer (node/ledger/activity.h) goes to `*activity` (the
  // caller owns it; -1 if none came), or is closed where `activity` is null.
  bool Register(std::string* why, int* activity = nullptr);
  // Hot path of every allocation: takes `bytes` from the credit, asking gpumuxd when it runs
  // short. False: gpumuxd refused (over quota) or could not be reached.
  bool Take(uint64_t bytes);
  // Returns `bytes` to the credit (after a free, or an allocation the driver refused); hands the
  // surplus over two batches back to gpumuxd.
  void Give(uint64_t bytes);
  // Hands the whole credit back (at exit; gpumuxd also reclaims a dead process's grants).
  void ReturnAll();
  // In a forked child: the credit was granted to the parent's pid, and stays the parent's.
  void Forget() {
    credit_.store(0);
    new (&mu_) std::mutex();  // another thread of the parent may have held it at fork
  }

  uint64_t credit() const { return credit_.load(); }

 private:
  // Asks gpumuxd for up to `want` bytes, at least `least`; returns what it granted (0: refused).
  uint64_t Ask(uint64_t want, uint64_t least);
  void HandBack(uint64_t bytes);

  std::string socket_, tenant_;
  int part_;
  std::atomic<uint64_t> credit_{0};
  std::mutex mu_;  // one request to gpumuxd at a time
};

}  // namespace gpumux::shim
