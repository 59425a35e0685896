#include "node/agent/memory_guard.h"

#include <algorithm>
#include <functional>
#include <utility>

namespace gpumux::agent {

MemoryCheck CheckTenantMemory(uint64_t quota, const std::vector<ProcessMemory>& processes,
                              ContextAllowance allowance) {
  MemoryCheck c;
  uint64_t allowed = 0;  // the registered processes' allowances, before the tenant's bound
  uint64_t within = 0;   // what they hold outside their grants within their own allowances
  // (beyond its own allowance, index) of those beyond it; (outside its grants, index) of the rest.
  std::vector<std::pair<uint64_t, size_t>> bypassing, contexts;
  auto own = [&](const ProcessMemory& p) {
    return p.registered && p.held > 0 ? allowance.per_process : 0;
  };
  auto outside = [](const ProcessMemory& p) { return p.held > p.granted ? p.held - p.granted : 0; };
  for (size_t i = 0; i < processes.size(); ++i) {
    const ProcessMemory& p = processes[i];
    c.held += p.held;
    c.outside += outside(p);
    c.footprint += std::max(p.granted, p.held);
    allowed += own(p);
    within += std::min(outside(p), own(p));
    if (outside(p) > own(p)) {
      bypassing.emplace_back(outside(p) - own(p), i);
    } else if (outside(p) > 0) {
      contexts.emplace_back(outside(p), i);
    }
  }
  auto limit = [&] { return quota + std::min(allowed, allowance.per_tenant); };
  c.limit = limit();
  uint64_t footprint = c.footprint;
  // Ends processes of `list`, worst first, while the footprint is over the limit and `more()`.
  auto blame = [&](std::vector<std::pair<uint64_t, size_t>>& list, auto more) {
    std::sort(list.begin(), list.end(), std::greater<>());
    for (const auto& [amount, i] : list) {
      if (footprint <= limit() || !more()) return;
      const ProcessMemory& p = processes[i];
      c.over.push_back(p.pid);
      footprint -= std::max(p.granted, p.held);
      within -= std::min(outside(p), own(p));
      allowed -= own(p);
    }
  };
  // Those allocating around the shim first; then, only where the contexts within their own
  // allowances are past the tenant's, the processes holding the most of them. Memory granted past
  // the quota (adopted) is no one's to end.
  blame(bypassing, [] { return true; });
  blame(contexts, [&] { return within > allowance.per_tenant; });
  return c;
}

}  // namespace gpumux::agent
