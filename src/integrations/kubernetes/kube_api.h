// The few calls of the Kubernetes API server that gpumux makes: list pods (of a node) and nodes,
// annotate a pod or a node, bind a pod; read a ResourceClaim, publish a ResourceSlice. Plain HTTP
// to `kubectl proxy` running beside the caller in its pod (deploy/kubernetes/: the proxy holds the
// service account's credentials and TLS), or to the tests' fake API server on a Unix socket. Each
// call is one request, waiting up to 10 s.
//
// Errors: Error(unavailable) when the API server cannot be reached; otherwise, for a refusal, the
// Error whose code ErrorCodeForHttpStatus reads from the status (404 → not found, 409 → conflict),
// with the API's message. Thread-safe: it holds only the address.
#pragma once

#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace gpumux::k8s {

class KubeApi {
 public:
  // `address`: "HOST:PORT" or "unix:PATH" (see agent::CallHttp).
  explicit KubeApi(std::string address) : address_(std::move(address)) {}

  // The items of GET /api/v1/pods (all namespaces); with `node`, only the pods bound to it.
  nlohmann::json ListPods(const std::string& node = "") const;
  nlohmann::json GetPod(const std::string& ns, const std::string& name) const;
  // The items of GET /api/v1/nodes.
  nlohmann::json ListNodes() const;
  // Sets annotations (a JSON merge patch of metadata.annotations).
  void AnnotatePod(const std::string& ns, const std::string& name,
                   const std::map<std::string, std::string>& annotations) const;
  void AnnotateNode(const std::string& name,
                    const std::map<std::string, std::string>& annotations) const;
  // GET /apis/resource.k8s.io/v1/namespaces/NS/resourceclaims/NAME.
  nlohmann::json GetResourceClaim(const std::string& ns, const std::string& name) const;
  // Creates or replaces a ResourceSlice (server-side apply, field manager "gpumux").
  void ApplyResourceSlice(const nlohmann::json& slice) const;
  // POST .../pods/NAME/binding: puts the pod on `node` (what kube-scheduler does when no extender
  // binds). The API refuses (409) a pod that is already bound.
  void Bind(const std::string& ns, const std::string& name, const std::string& uid,
            const std::string& node) const;

  const std::string& address() const { return address_; }

 private:
  nlohmann::json Call(const std::string& method, const std::string& path,
                      const nlohmann::json& body = nullptr,
                      const std::string& content_type = "application/json") const;
  std::string address_;
};

}  // namespace gpumux::k8s
