// Facts about the host's processes that gpumux's accounting relies on.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>

namespace gpumux {

// The start time of process `pid` (clock ticks since boot, /proc/PID/stat field 22), or nullopt if
// it does not exist or has exited (a zombie). With the pid it names a process uniquely: a reused
// pid has another start time. Thread-safe.
std::optional<uint64_t> ProcessStartTime(pid_t pid);

}  // namespace gpumux
