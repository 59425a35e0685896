#include "integrations/kubernetes/device_plugin_server.h"

#include <sys/stat.h>

#include <grpcpp/grpcpp.h>

#include "base/error.h"
#include "integrations/kubernetes/grpc_unix_server.h"
#include "integrations/kubernetes/proto/deviceplugin_v1beta1.grpc.pb.h"

namespace gpumux::k8s {

namespace pb = ::v1beta1;

namespace {

constexpr char kApiVersion[] = "v1beta1";

ino_t InodeOf(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

grpc::Status StatusOf(const Error& e) {
  grpc::StatusCode code = e.code() == ErrorCode::kNotFound ? grpc::StatusCode::NOT_FOUND
                          : e.code() == ErrorCode::kDoesNotFit
                              ? grpc::StatusCode::RESOURCE_EXHAUSTED
                          : e.code() == ErrorCode::kBadInput    ? grpc::StatusCode::INVALID_ARGUMENT
                          : e.code() == ErrorCode::kUnavailable ? grpc::StatusCode::UNAVAILABLE
                                                                : grpc::StatusCode::INTERNAL;
  return {code, e.what()};
}

}  // namespace

std::string SocketName(const std::string& resource) {
  return "gpumux-" + resource.substr(resource.find('/') + 1) + ".sock";
}

class DevicePluginServer::Service final : public pb::DevicePlugin::Service {
 public:
  Service(DevicePlugin* plugin, std::string resource, const std::atomic<bool>* stopping)
      : plugin_(plugin), resource_(std::move(resource)), stopping_(stopping) {}

  grpc::Status GetDevicePluginOptions(grpc::ServerContext*, const pb::Empty*,
                                      pb::DevicePluginOptions* options) override {
    options->set_get_preferred_allocation_available(true);
    return grpc::Status::OK;
  }

  // The full list at once, then again on every change, until the kubelet hangs up or we stop.
  grpc::Status ListAndWatch(grpc::ServerContext* context, const pb::Empty*,
                            grpc::ServerWriter<pb::ListAndWatchResponse>* writer) override {
    uint64_t version = 0;
    while (!stopping_->load() && !context->IsCancelled()) {
      pb::ListAndWatchResponse response;
      for (const PluginDevice& d : plugin_->Devices(resource_, &version)) {
        pb::Device* device = response.add_devices();
        device->set_id(d.id);
        device->set_health(d.healthy ? "Healthy" : "Unhealthy");
      }
      if (!writer->Write(response)) break;
      while (!stopping_->load() && !context->IsCancelled() &&
             !plugin_->WaitForChange(version, std::chrono::milliseconds(500))) {
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status GetPreferredAllocation(grpc::ServerContext*,
                                      const pb::PreferredAllocationRequest* request,
                                      pb::PreferredAllocationResponse* response) override {
    for (const auto& c : request->container_requests()) {
      std::vector<std::string> available(c.available_deviceids().begin(),
                                         c.available_deviceids().end());
      std::vector<std::string> must(c.must_include_deviceids().begin(),
                                    c.must_include_deviceids().end());
      auto* out = response->add_container_responses();
      for (const std::string& id :
           plugin_->Preferred(resource_, available, must, c.allocation_size()))
        out->add_deviceids(id);
    }
    return grpc::Status::OK;
  }

  grpc::Status Allocate(grpc::ServerContext*, const pb::AllocateRequest* request,
                        pb::AllocateResponse* response) override {
    try {
      for (const auto& c : request->container_requests()) {
        ContainerAnswer answer = plugin_->Allocate(
            resource_, std::vector<std::string>(c.devices_ids().begin(), c.devices_ids().end()));
        auto* out = response->add_container_responses();
        for (const auto& [k, v] : answer.edits.envs) (*out->mutable_envs())[k] = v;
        for (const auto& [k, v] : answer.annotations) (*out->mutable_annotations())[k] = v;
        for (const auto& path : answer.edits.device_nodes) {
          pb::DeviceSpec* device = out->add_devices();
          device->set_container_path(path);
          device->set_host_path(path);
          device->set_permissions("rw");
        }
        for (const auto& m : answer.edits.mounts) {
          pb::Mount* mount = out->add_mounts();
          mount->set_container_path(m.container_path);
          mount->set_host_path(m.host_path);
          mount->set_read_only(m.read_only);
        }
      }
    } catch (const Error& e) {
      return StatusOf(e);
    }
    return grpc::Status::OK;
  }

  grpc::Status PreStartContainer(grpc::ServerContext*, const pb::PreStartContainerRequest*,
                                 pb::PreStartContainerResponse*) override {
    return grpc::Status::OK;
  }

 private:
  DevicePlugin* plugin_;
  std::string resource_;
  const std::atomic<bool>* stopping_;
};

DevicePluginServer::DevicePluginServer(DevicePlugin* plugin) : plugin_(plugin) {}

DevicePluginServer::~DevicePluginServer() { Stop(); }

void DevicePluginServer::Start() {
  Stop();
  stopping_ = false;
  const std::string& dir = plugin_->config().kubelet_dir;
  std::string kubelet = dir + "/kubelet.sock";
  kubelet_inode_ = InodeOf(kubelet);
  served_ = plugin_->Resources();
  for (const std::string& resource : served_) {
    services_.push_back(std::make_unique<Service>(plugin_, resource, &stopping_));
    servers_.push_back(ServeOnUnixSocket(dir + "/" + SocketName(resource), services_.back().get()));
  }
  // Registered only once every socket serves: the kubelet calls back at once.
  auto channel = grpc::CreateChannel("unix:" + kubelet, grpc::InsecureChannelCredentials());
  auto registration = pb::Registration::NewStub(channel);
  for (const std::string& resource : served_) {
    pb::RegisterRequest request;
    request.set_version(kApiVersion);
    request.set_endpoint(SocketName(resource));
    request.set_resource_name(resource);
    request.mutable_options()->set_get_preferred_allocation_available(true);
    pb::Empty empty;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    grpc::Status status = registration->Register(&context, request, &empty);
    if (!status.ok())
      throw Unavailable("the kubelet at " + kubelet + " did not register " + resource + ": " +
                        status.error_message());
  }
}

void DevicePluginServer::Stop() {
  stopping_ = true;
  plugin_->WakeAll();
  for (auto& server : servers_)
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  servers_.clear();
  services_.clear();
}

bool DevicePluginServer::Watch() {
  const std::string& dir = plugin_->config().kubelet_dir;
  ino_t kubelet = InodeOf(dir + "/kubelet.sock");
  bool ours = true;
  for (const std::string& resource : served_)
    ours = ours && InodeOf(dir + "/" + SocketName(resource)) != 0;
  // A new MIG profile offered (dynamic MIG) is a resource to serve and register too.
  bool same_resources = plugin_->Resources() == served_;
  if (kubelet == 0 || (kubelet == kubelet_inode_ && ours && same_resources && !servers_.empty()))
    return false;
  Start();
  return true;
}

}  // namespace gpumux::k8s
