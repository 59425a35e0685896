// The one time base of gpumux's processes: CLOCK_MONOTONIC in nanoseconds, the same in every
// process of a host, so timestamps written to shared memory (ledger, simulated device) compare
// across processes.
#pragma once

#include <time.h>

#include <cerrno>
#include <cstdint>

namespace gpumux {

// Nanoseconds on the host's monotonic clock (vDSO: no system call).
inline uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// Sleeps until the monotonic clock reaches `deadline_ns` (returns at once if it has).
inline void SleepUntilNs(uint64_t deadline_ns) {
  timespec ts{time_t(deadline_ns / 1000000000ull), long(deadline_ns % 1000000000ull)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

}  // namespace gpumux
