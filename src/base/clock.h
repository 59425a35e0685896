// The one time base of gpumux's processes: CLOCK_MONOTONIC in nanoseconds, the same in every
// process of a host, so timestamps written to shared memory (ledger, simulated device) compare
// across processes.
#pragma once

#include <sys/prctl.h>
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

// Sleeps until `deadline_ns` and wakes within microseconds of it: the calling thread's timer slack
// is set to 1 ns (once per thread), where Linux's default of 50 µs wakes a sleeper up to that late.
// For waits that others' timing depends on: the simulated driver's synchronising calls (a real
// driver spins on few contexts), a launch held for its turn.
inline void SleepUntilNsPrecisely(uint64_t deadline_ns) {
  static thread_local bool precise = prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL) == 0;
  (void)precise;
  SleepUntilNs(deadline_ns);
}

}  // namespace gpumux
