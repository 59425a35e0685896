#include "integrations/kubernetes/grpc_unix_server.h"

#include <unistd.h>

#include <filesystem>

#include <grpcpp/grpcpp.h>

#include "base/error.h"
#include "service/http_client.h"

namespace gpumux::k8s {

std::unique_ptr<grpc::Server> ServeOnUnixSocket(const std::string& path, grpc::Service* service) {
  service::UnixSocketAddress(path);  // throws, saying so, for a path too long for a socket
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  unlink(path.c_str());
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials());
  builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) throw Unavailable("cannot serve gRPC on " + path);
  return server;
}

}  // namespace gpumux::k8s
