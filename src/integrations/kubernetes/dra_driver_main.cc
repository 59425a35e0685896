// gpumux-k8s-dra-driver: the DRA driver "gpu.gpumux.io" of a node whose GPUs gpumuxd owns (see
// dra_driver.h), for Kubernetes 1.34+. Runs in the gpumux DaemonSet beside gpumuxd
// (deploy/kubernetes/dra/).
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

#include <CLI/CLI.hpp>

#include "base/error.h"
#include "integrations/kubernetes/dra_driver.h"
#include "integrations/kubernetes/dra_plugin_server.h"
#include "integrations/kubernetes/kube_api.h"
#include "integrations/kubernetes/node_loop.h"
#include "service/log.h"

int main(int argc, char** argv) {
  using namespace gpumux;
  k8s::DraDriverConfig config;
  if (const char* node = std::getenv("NODE_NAME")) config.node_name = node;
  double poll_s = 5;
  CLI::App app{
      "gpumux's DRA driver gpu.gpumux.io: ResourceSlices of gpumuxd's GPUs, claims "
      "prepared as gpumuxd tenants with CDI specs"};
  app.add_option("--agent", config.agent_socket, "gpumuxd's socket")->capture_default_str();
  app.add_option("--node", config.node_name, "this node's name (default: $NODE_NAME)");
  app.add_option("--apiserver", config.apiserver,
                 "the API server: in-cluster (the pod's service account), kubeconfig:PATH, a URL, "
                 "HOST:PORT "
                 "(plain HTTP) or unix:PATH")
      ->capture_default_str();
  app.add_option("--cdi-dir", config.cdi_dir, "where CDI specs go")->capture_default_str();
  app.add_option("--plugin-dir", config.plugin_dir, "where the DRA socket (dra.sock) goes")
      ->capture_default_str();
  app.add_option("--registry-dir", config.registry_dir, "the kubelet's plugin registry")
      ->capture_default_str();
  app.add_option("--poll", poll_s, "seconds between looks at gpumuxd's GPUs")
      ->capture_default_str()
      ->check(CLI::Range(0.05, 600.0));
  CLI11_PARSE(app, argc, argv);
  try {
    k8s::DraDriver driver(config);
    k8s::DraPluginServer server(&driver);
    agent::Log("info", "DRA driver starting",
               {{"node", config.node_name},
                {"driver", k8s::kDraDriverName},
                {"agent", config.agent_socket}});
    std::atomic<bool> stop_watching{false};
    std::thread watch([&] { driver.WatchClaims(stop_watching); });
    k8s::RunUntilSignalled(std::chrono::milliseconds(int64_t(poll_s * 1000)), [&] {
      server.Watch();
      if (driver.PublishResourceSlice()) agent::Log("info", "ResourceSlice published");
    });
    stop_watching = true;
    watch.join();
    server.Stop();
  } catch (const Error& e) {
    agent::Log("error", "DRA driver failed", {{"reason", e.what()}});
    return ExitCode(e.code());
  }
  return 0;
}
