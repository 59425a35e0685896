#include "integrations/kubernetes/dra_plugin_server.h"

#include <filesystem>

#include <grpcpp/grpcpp.h>

#include "base/error.h"
#include "integrations/kubernetes/grpc_unix_server.h"
#include "integrations/kubernetes/proto/dra_v1.grpc.pb.h"
#include "integrations/kubernetes/proto/pluginregistration_v1.grpc.pb.h"
#include "service/log.h"

namespace gpumux::k8s {

namespace dra = ::k8s::io::kubelet::pkg::apis::dra::v1;
namespace reg = ::pluginregistration;

namespace {

class RegistrationService final : public reg::Registration::Service {
 public:
  explicit RegistrationService(std::string endpoint) : endpoint_(std::move(endpoint)) {}
  grpc::Status GetInfo(grpc::ServerContext*, const reg::InfoRequest*,
                       reg::PluginInfo* info) override {
    info->set_type("DRAPlugin");
    info->set_name(kDraDriverName);
    info->set_endpoint(endpoint_);
    info->add_supported_versions("v1.DRAPlugin");
    return grpc::Status::OK;
  }
  grpc::Status NotifyRegistrationStatus(grpc::ServerContext*, const reg::RegistrationStatus* status,
                                        reg::RegistrationStatusResponse*) override {
    if (status->plugin_registered())
      service::Log("info", "registered with the kubelet", {{"driver", kDraDriverName}});
    else
      service::Log("error", "the kubelet refused the registration", {{"reason", status->error()}});
    return grpc::Status::OK;
  }

 private:
  std::string endpoint_;
};

class DraService final : public dra::DRAPlugin::Service {
 public:
  explicit DraService(DraDriver* driver) : driver_(driver) {}

  // Each claim is prepared on its own: one that fails is reported in its entry, the others go on.
  grpc::Status NodePrepareResources(grpc::ServerContext*,
                                    const dra::NodePrepareResourcesRequest* request,
                                    dra::NodePrepareResourcesResponse* response) override {
    for (const auto& claim : request->claims()) {
      dra::NodePrepareResourceResponse& out = (*response->mutable_claims())[claim.uid()];
      try {
        for (const PreparedDevice& d :
             driver_->Prepare(claim.namespace_(), claim.uid(), claim.name())) {
          dra::Device* device = out.add_devices();
          for (const auto& r : d.request_names) device->add_request_names(r);
          device->set_pool_name(d.pool);
          device->set_device_name(d.device);
          for (const auto& id : d.cdi_device_ids) device->add_cdi_device_ids(id);
          if (!d.share_id.empty()) device->set_share_id(d.share_id);
        }
        service::Log("info", "claim prepared",
                     {{"claim", claim.namespace_() + "/" + claim.name()}, {"uid", claim.uid()}});
      } catch (const Error& e) {
        out.clear_devices();
        out.set_error(e.what());
        service::Log("warn", "claim not prepared",
                     {{"claim", claim.namespace_() + "/" + claim.name()}, {"reason", e.what()}});
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status NodeUnprepareResources(grpc::ServerContext*,
                                      const dra::NodeUnprepareResourcesRequest* request,
                                      dra::NodeUnprepareResourcesResponse* response) override {
    for (const auto& claim : request->claims()) {
      dra::NodeUnprepareResourceResponse& out = (*response->mutable_claims())[claim.uid()];
      try {
        driver_->Unprepare(claim.uid());
      } catch (const Error& e) {
        out.set_error(e.what());
      }
    }
    return grpc::Status::OK;
  }

 private:
  DraDriver* driver_;
};

}  // namespace

DraPluginServer::DraPluginServer(DraDriver* driver) : driver_(driver) {}
DraPluginServer::~DraPluginServer() { Stop(); }

std::string DraPluginServer::registration_socket() const {
  return driver_->config().registry_dir + "/" + kDraDriverName + "-reg.sock";
}

std::string DraPluginServer::plugin_socket() const {
  return driver_->config().plugin_dir + "/dra.sock";
}

void DraPluginServer::Start() {
  Stop();
  // The plugin's service first: the kubelet calls it as soon as it sees the registration.
  services_.push_back(std::make_unique<DraService>(driver_));
  servers_.push_back(ServeOnUnixSocket(plugin_socket(), services_.back().get()));
  services_.push_back(std::make_unique<RegistrationService>(plugin_socket()));
  servers_.push_back(ServeOnUnixSocket(registration_socket(), services_.back().get()));
}

void DraPluginServer::Stop() {
  for (auto& server : servers_)
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  servers_.clear();
  services_.clear();
}

bool DraPluginServer::Watch() {
  if (!servers_.empty() && std::filesystem::exists(plugin_socket()) &&
      std::filesystem::exists(registration_socket()))
    return false;
  Start();
  return true;
}

}  // namespace gpumux::k8s
