// A gRPC server on a Unix socket, as the kubelet's plugin APIs want them (the device plugin's and
// the DRA driver's): the socket's folder made if missing, a stale socket file replaced.
#pragma once

#include <memory>
#include <string>

namespace grpc {
class Server;
class Service;
}  // namespace grpc

namespace gpumux::k8s {

// Serves `service` (which must outlive the server) on the Unix socket at `path`. Throws Error
// (unavailable) for a path too long for a socket, or a socket that cannot be served.
std::unique_ptr<grpc::Server> ServeOnUnixSocket(const std::string& path, grpc::Service* service);

}  // namespace gpumux::k8s
