#include "integrations/kubernetes/container_edits.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace gpumux::k8s {
namespace {

using nlohmann::json;

json Admission(int gpu) {
  return {{"gpu", gpu},
          {"env",
           {{"LD_PRELOAD", "/usr/local/lib/gpumux/libgpumux.so"},
            {"GPUMUX_LEDGER", "/run/gpumux/gpu1.ledger"},
            {"GPUMUX_AGENT", "/run/gpumux/tenant.sock"},
            {"GPUMUX_TENANT", "k8s-x-0"},
            {"CUDA_VISIBLE_DEVICES", "GPU-1234"}}}};
}

TEST(ContainerEdits, MountTheShimReadOnlyAndTheFilesTheEnvironmentNames) {
  ContainerEdits e = EditsForTenant(Admission(1), {});
  EXPECT_EQ(e.envs.at("GPUMUX_TENANT"), "k8s-x-0");
  EXPECT_EQ(e.envs.count("NVIDIA_VISIBLE_DEVICES"), 0u) << "a simulated GPU";
  ASSERT_EQ(e.mounts.size(), 3u);
  EXPECT_EQ(e.mounts[0].host_path, "/usr/local/lib/gpumux");
  EXPECT_TRUE(e.mounts[0].read_only);
  EXPECT_EQ(e.mounts[1].host_path, "/run/gpumux/gpu1.ledger");
  EXPECT_TRUE(e.mounts[1].read_only) << "gpumuxd's view: root in the container must not write it";
  EXPECT_EQ(e.mounts[2].host_path, "/run/gpumux/tenant.sock");
  EXPECT_FALSE(e.mounts[2].read_only) << "gpumuxd's socket, for grants";
  for (const auto& m : e.mounts) EXPECT_EQ(m.host_path, m.container_path);
  EXPECT_TRUE(e.device_nodes.empty());
}

TEST(ContainerEdits, ARealGpuBringsItsDeviceNodesAndUuid) {
  auto dev = std::filesystem::temp_directory_path() / ("gpumux_dev_" + std::to_string(getpid()));
  std::filesystem::create_directories(dev);
  for (const char* node : {"nvidiactl", "nvidia-uvm", "nvidia0", "nvidia1"})
    std::ofstream(dev / node) << "";
  ContainerEdits e = EditsForTenant(Admission(1), {"GPU-1234"}, dev.string());
  EXPECT_EQ(e.envs.at("NVIDIA_VISIBLE_DEVICES"), "GPU-1234");
  EXPECT_EQ(e.device_nodes,
            (std::vector<std::string>{(dev / "nvidiactl").string(), (dev / "nvidia-uvm").string(),
                                      (dev / "nvidia1").string()}))
      << "its own GPU's node, not its neighbour's; nodes that do not exist are left out";
  json spec = CdiSpec("u", e);
  EXPECT_EQ(spec["devices"][0]["containerEdits"]["deviceNodes"].size(), 3u);
  EXPECT_EQ(spec["devices"][0]["containerEdits"]["deviceNodes"][0]["permissions"], "rw");
  std::filesystem::remove_all(dev);
}

TEST(ContainerEdits, ATenantOverTwoGpusGetsEachGpusLedgerStateAndDeviceNode) {
  auto dev = std::filesystem::temp_directory_path() / ("gpumux_dev2_" + std::to_string(getpid()));
  std::filesystem::create_directories(dev);
  for (const char* node : {"nvidiactl", "nvidia0", "nvidia2", "nvidia3"})
    std::ofstream(dev / node) << "";
  json admission = Admission(2);
  admission["gpus"] = {2, 3};
  admission["env"]["GPUMUX_LEDGER"] = "/run/gpumux/gpu2.ledger,/run/gpumux/gpu3.ledger";
  admission["env"]["GPUMUX_SIM_STATE"] = "/run/gpumux/sim-gpu2.state,/run/gpumux/sim-gpu3.state";
  ContainerEdits e = EditsForTenant(admission, {"GPU-2", "GPU-3"}, dev.string());
  EXPECT_EQ(e.envs.at("NVIDIA_VISIBLE_DEVICES"), "GPU-2,GPU-3");
  std::vector<std::string> mounted;
  for (const auto& m : e.mounts) mounted.push_back(m.host_path);
  for (const char* path : {"/run/gpumux/gpu2.ledger", "/run/gpumux/gpu3.ledger",
                           "/run/gpumux/sim-gpu2.state", "/run/gpumux/sim-gpu3.state"})
    EXPECT_NE(std::find(mounted.begin(), mounted.end(), path), mounted.end()) << path;
  for (const auto& m : e.mounts)
    EXPECT_EQ(m.host_path.find(','), std::string::npos) << "a list is never one mount";
  EXPECT_EQ(e.device_nodes,
            (std::vector<std::string>{(dev / "nvidiactl").string(), (dev / "nvidia2").string(),
                                      (dev / "nvidia3").string()}));
  std::filesystem::remove_all(dev);
}

}  // namespace
}  // namespace gpumux::k8s
