#include "base/priority.h"

#include "base/error.h"

namespace gpumux {

Priority ParsePriority(const std::string& text) {
  if (text == "high") return Priority::kHigh;
  if (text == "normal") return Priority::kNormal;
  if (text == "low" || text == "best-effort") return Priority::kLow;
  throw BadInput("priority '" + text + "': expected high, normal or low (best-effort)");
}

const char* PriorityName(Priority p) {
  return p == Priority::kHigh ? "high" : p == Priority::kLow ? "low" : "normal";
}

}  // namespace gpumux
