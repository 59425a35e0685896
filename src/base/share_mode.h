// How tenants share one GPU. One type for every layer: the planner's strategies, gpumuxd's GPU
// modes (stored in its database by value) and the simulated device's execution model (stored in
// its shared state by value), so the values below never change meaning.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace gpumux {

enum class ShareMode : uint32_t {
  kTimeSlice = 0,  // contexts take turns (the driver's default)
  kMps = 1,        // kernels of all tenants run at once (an MPS control daemon)
  kMig = 2,        // hardware instances, one device each
  kWhole =
      3,  // one tenant owns the GPU (planner only; on a node it is time-slicing with one tenant)
};

// "timeslice", "mps", "mig", "whole".
constexpr std::string_view ShareModeName(ShareMode mode) {
  switch (mode) {
    case ShareMode::kTimeSlice: return "timeslice";
    case ShareMode::kMps: return "mps";
    case ShareMode::kMig: return "mig";
    case ShareMode::kWhole: return "whole";
  }
  return "?";
}

// The mode a name (ShareModeName's, or "time-slice") stands for; nullopt for any other text.
constexpr std::optional<ShareMode> ParseShareMode(std::string_view name) {
  for (ShareMode m : {ShareMode::kTimeSlice, ShareMode::kMps, ShareMode::kMig, ShareMode::kWhole}) {
    if (name == ShareModeName(m)) return m;
  }
  if (name == "time-slice") return ShareMode::kTimeSlice;
  return std::nullopt;
}

}  // namespace gpumux
