// `gpumux calibrate` run as a user would: on the simulated GPU (what it measures, and explain and
// plan using the file), a node's own calibrations, and what it says without a GPU. One at a time
// (SERIAL in CMakeLists.txt): its co-runs measure wall-clock shares of one simulated GPU, which a
// test running beside them on these 2 cores would take.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "shell.h"

namespace {

using Result = gpumux::testing::ShellResult;
using gpumux::testing::Gpumux;

std::string Example(const char* name) {
  return std::string(GPUMUX_SOURCE_DIR) + "/examples/" + name;
}

// `gpumux calibrate` end to end on the simulated GPU: the file it writes holds what the simulator
// is (its bandwidth and math rate, time-slicing's switches, MPS-like clients sharing without loss),
// and explain and plan use it.
TEST(Calibrate, TheSimulatedGpuIsMeasuredAndExplainAndPlanUseIt) {
  std::string file = std::filesystem::temp_directory_path() /
                     ("gpumux_calibration_" + std::to_string(getpid()) + ".json");
  Result r = Gpumux("calibrate --sim H100 --seconds 0.2 --processes 3 --out " + file);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::ifstream in(file);
  auto c = nlohmann::json::parse(in);
  EXPECT_EQ(c["gpu"], "H100-SXM5-80GB");
  EXPECT_TRUE(c["simulated"].get<bool>());
  EXPECT_NEAR(c["bandwidth_bytes_per_second"].get<double>(), 3.35e12, 0.02 * 3.35e12);
  EXPECT_NEAR(c["flops_per_second"].get<double>(), 989.4e12, 0.02 * 989.4e12);
  // The simulator's slices of 1,024 us and switches of 25 us: 97.6% of the time is work.
  for (const char* n : {"2", "3"})
    EXPECT_NEAR(c["timeslice_usable"][n].get<double>(), 1024.0 / 1049, 0.015) << n;
  // MPS-like: the clients' kernels run together, sharing the bandwidth without switches.
  for (const char* n : {"2", "3"}) EXPECT_NEAR(c["mps_usable"][n].get<double>(), 1.0, 0.02) << n;
  EXPECT_FALSE(c["mps_usable"].contains("4")) << "--processes 3";
  EXPECT_GT(c["sync_seconds"].get<double>(), 0);

  // Explain takes the measured efficiencies for those not given, and says which calibration.
  Result e = Gpumux("explain --gpu H100 --params 13e9 --json --calibration " + file);
  ASSERT_EQ(e.exit_code, 0) << e.out;
  auto j = nlohmann::json::parse(e.out);
  EXPECT_NEAR(j["efficiency"].get<double>(), 1.0, 0.02);
  EXPECT_NEAR(j["tokens_per_second"].get<double>(), 3.35e12 / 26e9, 3);
  EXPECT_NE(j["calibrations"][0].get<std::string>().find(file), std::string::npos);
  Result stated =
      Gpumux("explain --gpu H100 --params 13e9 --efficiency 0.7 --json --calibration " + file);
  EXPECT_EQ(nlohmann::json::parse(stated.out)["efficiency"], 0.7) << "a stated efficiency wins";
  Result plan = Gpumux(std::string("plan ") + GPUMUX_SOURCE_DIR +
                       "/examples/p5-48xlarge.yaml --json --calibration " + file);
  EXPECT_EQ(nlohmann::json::parse(plan.out)["calibrations"].size(), 1u) << plan.out;

  // A calibration of a GPU the catalog lacks, or a broken file, is refused naming why.
  c["gpu"] = "H900";
  std::ofstream(file) << c.dump();
  Result unknown = Gpumux("explain --gpu H100 --params 13e9 --calibration " + file);
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.out.find("H900"), std::string::npos) << unknown.out;
  c["gpu"] = "H100-SXM5-80GB";
  c["mps_usable"]["2"] = 1.5;
  std::ofstream(file) << c.dump();
  Result over = Gpumux("explain --gpu H100 --params 13e9 --calibration " + file);
  EXPECT_EQ(over.exit_code, 2);
  EXPECT_NE(over.out.find("mps_usable '2'"), std::string::npos) << over.out;
  c["mps_usable"]["2"] = 1.0;
  c["bandwidth_bytes_per_second"] = "fast";
  std::ofstream(file) << c.dump();
  Result broken = Gpumux("plan " + std::string(GPUMUX_SOURCE_DIR) +
                         "/examples/p5-48xlarge.yaml --calibration " + file);
  EXPECT_EQ(broken.exit_code, 2);
  EXPECT_NE(broken.out.find("bandwidth_bytes_per_second"), std::string::npos) << broken.out;
  std::filesystem::remove(file);
}

// A node's own calibrations (GPUMUX_CALIBRATION_DIR, one file per kind) are what explain and plan
// use when told none; simulated ones there never stand for a real GPU; "--calibration none" turns
// them off; a file there that does not read is an error naming it.
TEST(Calibrate, TheNodesOwnCalibrationIsUsedWhenNoneIsGiven) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("gpumux_node_calibrations_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::string simulated = (dir / "sim.json").string();
  Result r = Gpumux("calibrate --sim H100 --seconds 0.1 --processes 1 --out " + simulated);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  nlohmann::json c = nlohmann::json::parse(std::ifstream(simulated));
  c["simulated"] = false;  // as `gpumux calibrate --gpu H100` would write it, at 70% of peak
  c["device_name"] = "NVIDIA H100 80GB HBM3";
  c["bandwidth_bytes_per_second"] = 0.7 * 3.35e12;
  std::ofstream(dir / "H100-SXM5-80GB.json") << c.dump();
  std::string env = "GPUMUX_CALIBRATION_DIR=" + dir.string() + " ";
  auto explain = [&](const std::string& extra) {
    return gpumux::testing::Shell(env + GPUMUX_BINARY +
                                  " explain --gpu H100 --params 13e9 --json " + extra + " 2>&1");
  };
  auto used = explain("");
  ASSERT_EQ(used.exit_code, 0) << used.out;
  nlohmann::json j = nlohmann::json::parse(used.out);
  ASSERT_EQ(j["calibrations"].size(), 1u) << "the real one only, not the simulated: " << used.out;
  EXPECT_NE(j["calibrations"][0].get<std::string>().find("H100-SXM5-80GB.json"), std::string::npos);
  EXPECT_NEAR(j["efficiency"].get<double>(), 0.7, 0.01);
  auto off = explain("--calibration none");
  ASSERT_EQ(off.exit_code, 0) << off.out;
  EXPECT_TRUE(nlohmann::json::parse(off.out)["calibrations"].empty()) << off.out;
  auto plan = gpumux::testing::Shell(env + GPUMUX_BINARY + " plan " + Example("p5-48xlarge.yaml") +
                                     " --json 2>&1");
  EXPECT_EQ(nlohmann::json::parse(plan.out)["calibrations"].size(), 1u) << plan.out;
  std::ofstream(dir / "broken.json") << "{";
  auto broken = explain("");
  EXPECT_EQ(broken.exit_code, 2);
  EXPECT_NE(broken.out.find("broken.json"), std::string::npos) << broken.out;
  std::filesystem::remove_all(dir);
}

TEST(Calibrate, WithoutAGpuOrAKindItSaysWhatIsMissing) {
  Result no_kind = Gpumux("calibrate --out /dev/null");
  EXPECT_EQ(no_kind.exit_code, 2) << no_kind.out;
  EXPECT_NE(no_kind.out.find("--gpu KIND"), std::string::npos) << no_kind.out;
  // gpu_test.cc measures a real GPU where there is one.
  if (void* driver = dlopen("libcuda.so.1", RTLD_NOW)) {
    dlclose(driver);
    GTEST_SKIP() << "this machine has a CUDA driver: GpuTest.CalibrateMeasuresTheRealGpu";
  }
  Result r = Gpumux("calibrate --gpu H100 --out /dev/null");
  EXPECT_EQ(r.exit_code, 4) << r.out;
  EXPECT_NE(r.out.find("no CUDA driver"), std::string::npos) << r.out;
}

}  // namespace
