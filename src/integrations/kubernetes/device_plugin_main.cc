// gpumux-k8s-device-plugin: the Kubernetes device plugin of a node whose GPUs gpumuxd owns (see
// device_plugin.h). Runs in the gpumux DaemonSet beside gpumuxd (deploy/kubernetes/).
#include <chrono>

#include <CLI/CLI.hpp>

#include "integrations/kubernetes/device_plugin.h"
#include "integrations/kubernetes/device_plugin_server.h"
#include "integrations/kubernetes/node_loop.h"
#include "integrations/kubernetes/program.h"

int main(int argc, char** argv) {
  using namespace gpumux;
  k8s::DevicePluginConfig config;
  double poll_s = 2;
  CLI::App app{
      "gpumux's Kubernetes device plugin: gpumux.io/gpu-memory, gpu-compute and gpu, "
      "admitted as gpumuxd tenants"};
  k8s::AddNodeOptions(app, &config.agent_socket, &config.node_name);
  k8s::AddApiServerOption(app, &config.apiserver);
  app.add_option("--kubelet-dir", config.kubelet_dir, "the kubelet's device plugin directory")
      ->capture_default_str();
  app.add_option("--state-dir", config.state_dir, "where the allocation record is kept")
      ->capture_default_str();
  k8s::DynamicMigOptions mig;
  mig.Add(app, &config.dynamic_mig,
          "offer each GPU in MIG mode as the instances it could still make "
          "(gpumux.io/mig-PROFILE), make one when a container is allocated it, remove one it made "
          "once left idle");
  k8s::AddPollOption(app, &poll_s, "gpumuxd, the kubelet and the pods", 60);
  CLI11_PARSE(app, argc, argv);
  config.mig_idle_grace = mig.idle_grace();
  return k8s::RunProgram("device plugin", [&] {
    k8s::DevicePlugin plugin(config);
    k8s::DevicePluginServer server(&plugin);
    service::Log("info", "device plugin starting",
                 {{"node", config.node_name},
                  {"agent", config.agent_socket},
                  {"kubelet_dir", config.kubelet_dir}});
    k8s::BackgroundWatch watch([&](std::atomic<bool>& stop) { plugin.WatchPods(stop); });
    k8s::RunUntilSignalled(std::chrono::milliseconds(int64_t(poll_s * 1000)), [&] {
      for (const std::string& gone : plugin.RemoveIdleMigInstances())
        service::Log("info", "idle MIG instance removed", {{"instance", gone}});
      plugin.Refresh();
      if (server.Watch()) service::Log("info", "registered with the kubelet");
      for (const std::string& id : plugin.RemoveTenantsOfGonePods())
        service::Log("info", "tenant of a pod that is gone removed", {{"tenant", id}});
    });
    watch.Stop();
    server.Stop();
    service::Log("info", "device plugin stopped");
  });
}
