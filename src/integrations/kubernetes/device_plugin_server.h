// The kubelet's side of the device plugin (API v1beta1 over gRPC on Unix sockets) around a
// DevicePlugin: one server per resource (DevicePlugin::Resources()), on "gpumux-<resource>.sock" in
// the kubelet's directory, each registered with the kubelet (Registration.Register on kubelet.sock)
// after it serves.
//
// The kubelet deletes every socket in its directory when it restarts and makes kubelet.sock anew;
// Watch() notices either (our socket gone, or kubelet.sock a new file) and serves and registers
// again. Tenants live in gpumuxd, the allocation record on disk: neither restart drops a running
// pod's tenant.
//
// Thread-safety: Start, Stop and Watch from one thread; the gRPC handlers run on gRPC's threads.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "integrations/kubernetes/device_plugin.h"

namespace grpc {
class Server;
}

namespace gpumux::k8s {

// "gpumux.io/gpu-memory" → "gpumux-gpu-memory.sock".
std::string SocketName(const std::string& resource);

class DevicePluginServer {
 public:
  explicit DevicePluginServer(DevicePlugin* plugin);
  ~DevicePluginServer();

  // Serves every resource and registers it with the kubelet. Throws Error (unavailable) when the
  // kubelet cannot be reached or refuses the registration (its reason in the message).
  void Start();
  void Stop();
  // Serves and registers again if the kubelet restarted or our sockets went; returns whether it
  // did. Throws as Start.
  bool Watch();

 private:
  class Service;
  DevicePlugin* plugin_;
  std::vector<std::unique_ptr<Service>> services_;
  std::vector<std::unique_ptr<grpc::Server>> servers_;
  std::vector<std::string> served_;  // the resources served, in order
  std::atomic<bool> stopping_{false};
  ino_t kubelet_inode_ = 0;
};

}  // namespace gpumux::k8s
