// What a tenant id may be: 1 to 63 letters, digits, '.', '_' or '-', and neither "." nor "..". Ids
// name files, log lines and metric labels. One rule for the planner (which makes ids from tenant
// names) and the node (which refuses any other id).
#pragma once

#include <cstddef>
#include <string_view>

namespace gpumux {

inline constexpr size_t kMaxTenantIdLength = 63;

constexpr bool IsTenantIdChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

constexpr bool IsTenantId(std::string_view id) {
  if (id.empty() || id.size() > kMaxTenantIdLength || id == "." || id == "..") return false;
  for (char c : id) {
    if (!IsTenantIdChar(c)) return false;
  }
  return true;
}

}  // namespace gpumux
