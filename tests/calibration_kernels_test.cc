// The calibration kernels gpumux ships as PTX text (src/node/calibration_kernels_ptx.h) are what
// their CUDA source compiles to, and assemble for the GPUs gpumux supports. Both need the CUDA
// toolkit, which building gpumux does not: each check skips, saying so, where it is missing.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "node/calibration_kernels_ptx.h"
#include "shell.h"

namespace {

std::string Tool(const char* name) {
  for (std::string dir : {"/usr/local/cuda/bin", "/usr/bin"})
    if (std::filesystem::exists(dir + "/" + name)) return dir + "/" + name;
  return "";
}

TEST(CalibrationKernels, ThePtxIsWhatTheCudaSourceCompilesTo) {
  std::string nvcc = Tool("nvcc");
  if (nvcc.empty()) GTEST_SKIP() << "no nvcc (the CUDA toolkit) to compile the source with";
  std::string copy = (std::filesystem::temp_directory_path() / "gpumux_kernels").string();
  std::filesystem::remove_all(copy);
  std::filesystem::create_directories(copy);
  std::string src = std::string(GPUMUX_SOURCE_DIR) + "/src/node/";
  for (const char* f : {"calibration_kernels.cu", "calibration_kernels.sh"})
    std::filesystem::copy_file(src + f, copy + "/" + f);
  auto r = gpumux::testing::Shell(copy + "/calibration_kernels.sh " + nvcc + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::ifstream fresh(copy + "/calibration_kernels_ptx.h"),
      shipped(src + "calibration_kernels_ptx.h");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(fresh), {}),
            std::string(std::istreambuf_iterator<char>(shipped), {}))
      << "run src/node/calibration_kernels.sh after changing calibration_kernels.cu";
  std::filesystem::remove_all(copy);
}

TEST(CalibrationKernels, ThePtxAssemblesForAmpereAndHopper) {
  std::string ptxas = Tool("ptxas");
  if (ptxas.empty()) GTEST_SKIP() << "no ptxas (the CUDA toolkit) to assemble the PTX with";
  std::string ptx = (std::filesystem::temp_directory_path() / "gpumux_kernels.ptx").string();
  std::ofstream(ptx) << gpumux::node::kCalibrationPtx;
  for (const char* arch : {"sm_80", "sm_86", "sm_89", "sm_90"}) {
    auto r = gpumux::testing::Shell(ptxas + " -arch=" + arch + " -o /dev/null " + ptx + " 2>&1");
    EXPECT_EQ(r.exit_code, 0) << arch << ": " << r.out;
  }
  std::filesystem::remove(ptx);
}

}  // namespace
