// Helpers for the fleet tests: small traces written to temporary files, and hand-built clusters.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fleet/trace.h"

namespace gpumux::fleet {

inline std::string WriteTempFile(const std::string& name, const std::string& text) {
  auto dir = std::filesystem::temp_directory_path() / "gpumux_fleet_test";
  std::filesystem::create_directories(dir);
  auto path = (dir / name).string();
  std::ofstream(path) << text;
  return path;
}

inline NodeSpec Node(const std::string& name, int cores, int gpus, const std::string& model,
                     int memory_gib = 512) {
  return {name, int64_t(cores) * 1000, int64_t(memory_gib) * 1024, gpus, gpus ? model : ""};
}

inline PodSpec Pod(const std::string& name, int cores, int num_gpu, int gpu_milli,
                   std::vector<std::string> spec = {}, int memory_gib = 1) {
  return {name,      int64_t(cores) * 1000, int64_t(memory_gib) * 1024, num_gpu,
          gpu_milli, std::move(spec)};
}

// The directory of the openb traces bundled with the repository (traces/openb-v2023).
inline std::string TraceDir() { return std::string(GPUMUX_SOURCE_DIR) + "/traces/openb-v2023"; }

}  // namespace gpumux::fleet
