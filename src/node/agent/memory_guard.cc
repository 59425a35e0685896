#include "node/agent/memory_guard.h"

#include <algorithm>

namespace gpumux::agent {

MemoryCheck CheckTenantMemory(uint64_t quota, const std::vector<ProcessMemory>& processes,
                              uint64_t context_allowance) {
  MemoryCheck c;
  c.limit = quota;
  uint64_t most_beyond = 0;  // outside its grants and beyond its own allowance
  for (const ProcessMemory& p : processes) {
    uint64_t outside = p.held > p.granted ? p.held - p.granted : 0;
    uint64_t allowance = p.registered && p.held > 0 ? context_allowance : 0;
    c.held += p.held;
    c.outside += outside;
    c.footprint += std::max(p.granted, p.held);
    c.limit += allowance;
    if (outside > allowance && outside - allowance > most_beyond)
      most_beyond = outside - allowance, c.over = p.pid;
  }
  if (c.footprint <= c.limit) c.over = 0;
  return c;
}

}  // namespace gpumux::agent
