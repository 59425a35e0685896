#include "node/agent/share_backend.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cstdlib>
#include <filesystem>

#include "core/catalog.h"
#include "node/device.h"
#include "simgpu/sim_state.h"

namespace gpumux::agent {
namespace {

TEST(SimulatedBackend, MakesTheDeviceWithTheSchedulingTheEnvironmentAsksFor) {
  // gpumux run --sim takes the simulated GPU's knobs from the environment; gpumuxd on a simulated
  // node made its devices with the defaults, whatever it was given.
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("gpumux-backend-test-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  setenv("GPUMUX_SIM_TIMESLICE_US", "4096", 1);
  setenv("GPUMUX_SIM_SWITCH_US", "10", 1);
  setenv("GPUMUX_SIM_BELOW_NORMAL_WEIGHT", "0", 1);
  node::Device gpu = node::SimulatedDevice(Catalog::LoadBundled().FindGpu("H100"), 0);
  MakeSimulatedBackend(dir.string())->Prepare(gpu, ShareMode::kMps);
  unsetenv("GPUMUX_SIM_TIMESLICE_US");
  unsetenv("GPUMUX_SIM_SWITCH_US");
  unsetenv("GPUMUX_SIM_BELOW_NORMAL_WEIGHT");

  std::string path = (dir / ("sim-" + node::DeviceStem(gpu) + ".state")).string();
  int fd = open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0) << path;
  void* map = mmap(nullptr, sizeof(sim::SimState), PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  ASSERT_NE(map, MAP_FAILED);
  const auto* state = static_cast<const sim::SimState*>(map);
  EXPECT_EQ(state->schedule.slice_ns, 4'096'000u);
  EXPECT_EQ(state->schedule.switch_ns, 10'000u);
  EXPECT_EQ(state->below_normal_weight, 0.0);
  EXPECT_EQ(state->mode.load(), ShareMode::kMps);
  munmap(map, sizeof(sim::SimState));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpumux::agent
