// The kubelet's side of the DRA driver around a DraDriver: the plugin watcher's Registration
// service on <registry-dir>/gpu.gpumux.io-reg.sock (type "DRAPlugin", version "v1.DRAPlugin",
// endpoint <plugin-dir>/dra.sock) and the DRAPlugin service (NodePrepareResources,
// NodeUnprepareResources) on that endpoint. The kubelet finds the registration socket itself.
//
// Thread-safety: Start, Stop and Watch from one thread; the handlers run on gRPC's threads.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "integrations/kubernetes/dra_driver.h"
#include "integrations/kubernetes/grpc_unix_server.h"  // declares grpc::Server and grpc::Service

namespace gpumux::k8s {

class DraPluginServer {
 public:
  explicit DraPluginServer(DraDriver* driver);
  ~DraPluginServer();

  // Serves both sockets. Throws Error (unavailable).
  void Start();
  void Stop();
  // Serves again if a socket was removed (a kubelet that cleans its directories); returns whether
  // it did.
  bool Watch();

  std::string registration_socket() const;
  std::string plugin_socket() const;

 private:
  DraDriver* driver_;
  std::vector<std::unique_ptr<grpc::Service>> services_;
  std::vector<std::unique_ptr<grpc::Server>> servers_;
};

}  // namespace gpumux::k8s
