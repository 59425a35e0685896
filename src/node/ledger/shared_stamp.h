// Times noted in words that threads and processes share (a ledger slot, a tenant's burst words):
// 0 means never, and a stamp only moves forward. Header-only; lock-free.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace gpumux::node {

// Whether a time noted in a shared word (0: never) lies within `window` before `now_ns` (or
// after it).
inline bool Within(uint64_t at_ns, uint64_t now_ns, uint64_t window) {
  return at_ns != 0 && now_ns - std::min(now_ns, at_ns) < window;
}

// Moves a shared time stamp forward to `now_ns` (never back: threads race); returns the one before.
// `stamp` is a std::atomic<uint64_t>& or a std::atomic_ref<uint64_t>.
template <typename Atomic>
uint64_t StampForward(Atomic&& stamp, uint64_t now_ns) {
  uint64_t before = stamp.load(std::memory_order_relaxed);
  while (before < now_ns &&
         !stamp.compare_exchange_weak(before, now_ns, std::memory_order_relaxed)) {
  }
  return before;
}

}  // namespace gpumux::node
