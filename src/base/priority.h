// A tenant's priority on a shared GPU. One type for every layer: the planner chooses it from a
// tenant's SLO, gpumuxd and the shim act on it (node/ledger/compute_share.h), the ledger stores it
// by value, so the values below never change meaning.
#pragma once

#include <cstdint>
#include <string>

namespace gpumux {

enum class Priority : int32_t {
  kHigh = 0,    // latency-sensitive: the others keep clear of its bursts
  kNormal = 1,  // shares the GPU by weight
  kLow = 2,     // best effort: shares what the others leave
};

// "high", "normal", "low" (or "best-effort"); throws Error (bad input) saying what is expected.
Priority ParsePriority(const std::string& text);
// "high", "normal", "low".
const char* PriorityName(Priority p);

}  // namespace gpumux
