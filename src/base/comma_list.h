// Lists written as comma-separated text: in flags (`--gpu 0,1`, `--mem 10GiB,20GiB`) and in the
// environment that hands a tenant's GPUs to the shim and the simulated driver.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gpumux {

// "a,b,c" → {"a", "b", "c"}; "" → {}; an empty item ("a,,b") is kept, for the caller to refuse.
inline std::vector<std::string> SplitCommas(std::string_view text) {
  std::vector<std::string> items;
  for (size_t at = 0; !text.empty();) {
    size_t comma = text.find(',', at);
    items.emplace_back(text.substr(at, comma == text.npos ? text.npos : comma - at));
    if (comma == text.npos) break;
    at = comma + 1;
  }
  return items;
}

// SplitCommas' inverse: {"a", "b"} → "a,b", each item written by `text` (the item itself when it
// is a string).
template <typename Items, typename ToText>
std::string JoinCommas(const Items& items, ToText text) {
  std::string joined;
  for (const auto& item : items) {
    if (!joined.empty()) joined += ',';
    joined += text(item);
  }
  return joined;
}
inline std::string JoinCommas(const std::vector<std::string>& items) {
  return JoinCommas(items, [](const std::string& s) { return s; });
}

}  // namespace gpumux
