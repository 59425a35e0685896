// gpumux-k8s-scheduler: the kube-scheduler extender (see extender.h). Runs as a Deployment with
// kubectl proxy beside it (deploy/kubernetes/); kube-scheduler calls it over HTTP.
#include <CLI/CLI.hpp>

#include "fleet/policy.h"
#include "integrations/kubernetes/extender.h"
#include "integrations/kubernetes/kube_api.h"
#include "integrations/kubernetes/program.h"
#include "service/http_server.h"

int main(int argc, char** argv) {
  using namespace gpumux;
  k8s::ExtenderConfig config;
  // kube-scheduler calls it from the same pod: nothing else needs to reach it.
  std::string listen = "127.0.0.1:8888", apiserver = "in-cluster";
  CLI::App app{"gpumux's kube-scheduler extender: filter, prioritize and bind verbs"};
  app.add_option("--listen", listen, "HOST:PORT to serve kube-scheduler on")->capture_default_str();
  k8s::AddApiServerOption(app, &apiserver);
  app.add_option("--policy", config.policy, "fleet policy that scores nodes")
      ->capture_default_str()
      ->check(CLI::IsMember(fleet::PolicyNames()));
  CLI11_PARSE(app, argc, argv);
  return k8s::RunProgram("scheduler extender", [&] {
    k8s::KubeApi api(apiserver);
    k8s::Extender extender(config, &api);
    service::HttpServerLimits limits;
    limits.max_connections_per_caller = 1024;  // kube-scheduler is one caller (one address)
    service::HttpServer server(limits);
    server.ListenTcp(listen);
    server.StopOnTerminationSignals();
    // Nodes and pods listed once, then watched: the verbs answer from the model, never a list.
    k8s::BackgroundWatch watch([&](std::atomic<bool>& stop) { extender.Watch(stop); });
    service::Log(
        "info", "scheduler extender serving",
        {{"listen", listen.substr(0, listen.rfind(':') + 1) + std::to_string(server.tcp_port())},
         {"policy", config.policy},
         {"apiserver", apiserver}});
    server.Serve([&](const service::HttpRequest& r) { return extender.Handle(r); });
  });
}
