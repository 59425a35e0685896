// gpumux-k8s-dra-driver: the DRA driver "gpu.gpumux.io" of a node whose GPUs gpumuxd owns (see
// dra_driver.h), for Kubernetes 1.34+. Runs in the gpumux DaemonSet beside gpumuxd
// (deploy/kubernetes/dra/).
#include <chrono>

#include <CLI/CLI.hpp>

#include "integrations/kubernetes/dra_driver.h"
#include "integrations/kubernetes/dra_plugin_server.h"
#include "integrations/kubernetes/node_loop.h"
#include "integrations/kubernetes/program.h"

int main(int argc, char** argv) {
  using namespace gpumux;
  k8s::DraDriverConfig config;
  double poll_s = 5;
  CLI::App app{
      "gpumux's DRA driver gpu.gpumux.io: ResourceSlices of gpumuxd's GPUs, claims "
      "prepared as gpumuxd tenants with CDI specs"};
  k8s::AddNodeOptions(app, &config.agent_socket, &config.node_name);
  k8s::AddApiServerOption(app, &config.apiserver);
  app.add_option("--cdi-dir", config.cdi_dir, "where CDI specs go")->capture_default_str();
  app.add_option("--plugin-dir", config.plugin_dir, "where the DRA socket (dra.sock) goes")
      ->capture_default_str();
  app.add_option("--registry-dir", config.registry_dir, "the kubelet's plugin registry")
      ->capture_default_str();
  k8s::DynamicMigOptions mig;
  mig.Add(app, &config.dynamic_mig,
          "advertise each GPU in MIG mode as the instances it could still make (partitionable "
          "devices, Kubernetes 1.35+), make an allocated one when its claim is prepared, remove "
          "one left idle");
  k8s::AddPollOption(app, &poll_s, "gpumuxd's GPUs", 600);
  CLI11_PARSE(app, argc, argv);
  config.mig_idle_grace = mig.idle_grace();
  return k8s::RunProgram("DRA driver", [&] {
    k8s::DraDriver driver(config);
    k8s::DraPluginServer server(&driver);
    service::Log("info", "DRA driver starting",
                 {{"node", config.node_name},
                  {"driver", k8s::kDraDriverName},
                  {"agent", config.agent_socket}});
    k8s::BackgroundWatch watch([&](std::atomic<bool>& stop) { driver.WatchClaims(stop); });
    k8s::RunUntilSignalled(std::chrono::milliseconds(int64_t(poll_s * 1000)), [&] {
      server.Watch();
      for (const std::string& gone : driver.RemoveIdleMigInstances())
        service::Log("info", "idle MIG instance removed", {{"instance", gone}});
      if (driver.PublishResourceSlice()) service::Log("info", "ResourceSlices published");
    });
    watch.Stop();
    server.Stop();
  });
}
