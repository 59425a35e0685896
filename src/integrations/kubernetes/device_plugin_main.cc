// gpumux-k8s-device-plugin: the Kubernetes device plugin of a node whose GPUs gpumuxd owns (see
// device_plugin.h). Runs in the gpumux DaemonSet beside gpumuxd (deploy/kubernetes/).
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

#include <CLI/CLI.hpp>

#include "base/error.h"
#include "integrations/kubernetes/device_plugin.h"
#include "integrations/kubernetes/device_plugin_server.h"
#include "integrations/kubernetes/kube_api.h"
#include "integrations/kubernetes/node_loop.h"
#include "service/log.h"

int main(int argc, char** argv) {
  using namespace gpumux;
  k8s::DevicePluginConfig config;
  if (const char* node = std::getenv("NODE_NAME")) config.node_name = node;
  double poll_s = 2;
  CLI::App app{
      "gpumux's Kubernetes device plugin: gpumux.io/gpu-memory, gpu-compute and gpu, "
      "admitted as gpumuxd tenants"};
  app.add_option("--agent", config.agent_socket, "gpumuxd's socket")->capture_default_str();
  app.add_option("--kubelet-dir", config.kubelet_dir, "the kubelet's device plugin directory")
      ->capture_default_str();
  app.add_option("--node", config.node_name, "this node's name (default: $NODE_NAME)");
  app.add_option("--apiserver", config.apiserver,
                 "the API server: in-cluster (the pod's service account), kubeconfig:PATH, a URL, "
                 "HOST:PORT "
                 "(plain HTTP) or unix:PATH")
      ->capture_default_str();
  app.add_option("--state-dir", config.state_dir, "where the allocation record is kept")
      ->capture_default_str();
  app.add_option("--poll", poll_s, "seconds between looks at gpumuxd, the kubelet and the pods")
      ->capture_default_str()
      ->check(CLI::Range(0.05, 60.0));
  CLI11_PARSE(app, argc, argv);
  try {
    k8s::DevicePlugin plugin(config);
    k8s::DevicePluginServer server(&plugin);
    agent::Log("info", "device plugin starting",
               {{"node", config.node_name},
                {"agent", config.agent_socket},
                {"kubelet_dir", config.kubelet_dir}});
    std::atomic<bool> stop_watching{false};
    std::thread watch([&] { plugin.WatchPods(stop_watching); });
    k8s::RunUntilSignalled(std::chrono::milliseconds(int64_t(poll_s * 1000)), [&] {
      plugin.Refresh();
      if (server.Watch()) agent::Log("info", "registered with the kubelet");
      for (const std::string& id : plugin.RemoveTenantsOfGonePods())
        agent::Log("info", "tenant of a pod that is gone removed", {{"tenant", id}});
    });
    stop_watching = true;
    watch.join();
    server.Stop();
    agent::Log("info", "device plugin stopped");
  } catch (const Error& e) {
    agent::Log("error", "device plugin failed", {{"reason", e.what()}});
    return ExitCode(e.code());
  }
  return 0;
}
