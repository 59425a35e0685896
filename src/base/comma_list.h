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

}  // namespace gpumux
