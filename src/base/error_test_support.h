// For tests: the code of the Error that `f` throws, or nullopt if it throws none.
#pragma once

#include <optional>

#include "base/error.h"

namespace gpumux {

template <class F>
std::optional<ErrorCode> ErrorCodeOf(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  return std::nullopt;
}

}  // namespace gpumux
