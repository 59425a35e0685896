// For tests: a plan file written from text, in a folder of the running test's own.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace gpumux {

// Writes `yaml` to <tmp>/gpumux_<suite>_<pid>/plan.yaml and returns its path.
inline std::string WritePlanFile(const std::string& suite, const std::string& yaml) {
  auto dir =
      std::filesystem::temp_directory_path() / ("gpumux_" + suite + "_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto path = (dir / "plan.yaml").string();
  std::ofstream(path) << yaml;
  return path;
}

}  // namespace gpumux
