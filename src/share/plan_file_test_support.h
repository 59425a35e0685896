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

// A plan file of two small jobs and a large one, MIG only, on a fleet of two H100s: one GPU, the
// large job on a 3g.40gb at slot 0, the small ones on 1g.10gb's.
inline constexpr char kMigPlanYaml[] = R"(fleet: [{gpu: H100-SXM5-80GB, count: 2}]
strategies: [mig]
tenants:
  - {name: small, count: 2, workload: {kind: generic, memory: 8 GB, bandwidth: 100 GB/s, compute: 5 TFLOPS}}
  - {name: large, workload: {kind: generic, memory: 30 GB, bandwidth: 600 GB/s, compute: 20 TFLOPS}}
)";

}  // namespace gpumux
