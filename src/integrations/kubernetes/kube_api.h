// The few calls of the Kubernetes API server that gpumux makes: list pods (of a node) and nodes,
// annotate a pod or a node, bind a pod; read a ResourceClaim, publish a ResourceSlice. Over
// libcurl: HTTPS with the service account's token and CA inside a cluster (or a kubeconfig's
// credentials outside one), answers of any size and framing (Content-Length or chunked), a
// connect timeout of 5 s and 30 s per call, and up to three tries with backoff for reads that meet
// no server, a 429 or a 5xx.
//
// Every name put into a URL is checked as Kubernetes checks it (a namespace is a DNS-1123 label,
// names of pods, nodes, claims and slices DNS-1123 subdomains) and refused, with the field named,
// before anything is sent.
//
// Errors: Error(bad input) for a name the API server would not have; Error(unavailable) when it
// cannot be reached; otherwise, for a refusal, the Error whose code ErrorCodeForHttpStatus reads
// from the status (404 → not found, 409 → conflict), with the API's message. Thread-safe: each call
// has its own connection.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

namespace gpumux::k8s {

// Where the API server is and how to prove who we are.
struct KubeEndpoint {
  std::string server;      // "https://HOST:PORT", "http://HOST:PORT" or "unix:PATH"
  std::string ca_file;     // PEM bundle that signs the server's certificate,
  std::string ca_pem;      // or the bundle itself
  std::string token_file;  // a bearer token, read at each call (service-account tokens rotate),
  std::string token;       // or the token itself
  std::string client_cert_file, client_key_file;  // a client certificate and key (kubeconfig),
  std::string client_cert_pem, client_key_pem;    // or the PEM text of each
};

// What --apiserver names: "in-cluster" (the pod's service account: KUBERNETES_SERVICE_HOST and
// _PORT, /var/run/secrets/kubernetes.io/serviceaccount/{token,ca.crt}; GPUMUX_SERVICE_ACCOUNT_DIR
// moves that folder), "kubeconfig:PATH" (its current context: server, certificate-authority,
// token, tokenFile or client certificate and key, as files or inline *-data), "http://…" or
// "https://…", "HOST:PORT" (plain HTTP, such as `kubectl proxy`), or "unix:PATH". Throws Error
// (bad input) naming what is missing.
KubeEndpoint ResolveApiServer(const std::string& spec);

// Throws Error (bad input) "FIELD: 'VALUE' is not a valid ..." unless `value` is a DNS-1123 label
// (a namespace: at most 63 of a-z, 0-9 and '-', starting and ending alphanumeric) or subdomain
// (names: at most 253, labels joined by '.').
void CheckDnsLabel(const std::string& field, const std::string& value);
void CheckDnsSubdomain(const std::string& field, const std::string& value);

class KubeApi {
 public:
  explicit KubeApi(KubeEndpoint endpoint);
  // `spec` as ResolveApiServer takes it.
  explicit KubeApi(const std::string& spec) : KubeApi(ResolveApiServer(spec)) {}

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
  // Deletes ResourceSlice `name`; one already gone is no error.
  void DeleteResourceSlice(const std::string& name) const;
  // POST .../pods/NAME/binding: puts the pod on `node` (what kube-scheduler does when no extender
  // binds). The API refuses (409) a pod that is already bound.
  void Bind(const std::string& ns, const std::string& name, const std::string& uid,
            const std::string& node) const;

  // One page of the list at `path` (which may carry a query, e.g. a fieldSelector): GET with
  // limit=`limit` and, after the first page, continue=`continue_token`. The list object: items,
  // metadata.resourceVersion, metadata.continue (empty on the last page).
  nlohmann::json ListPage(const std::string& path, int limit,
                          const std::string& continue_token) const;
  // How a watch ended.
  enum class WatchEnd { kClosed, kExpired, kStopped };
  // Watches the list at `path` from `resource_version` (watch=true, allowWatchBookmarks=true,
  // timeoutSeconds=`timeout_s`): calls `event` with each event ({"type": ADDED, MODIFIED, DELETED
  // or BOOKMARK, "object"}) as it arrives, parsed as the answer streams in. Returns kClosed when
  // the server ends the stream, kExpired for 410 Gone (the version is older than the server
  // keeps: list again), kStopped once `stop` is set or `event` returns false. Throws Error as the
  // other calls do, and for an ERROR event other than 410.
  WatchEnd Watch(const std::string& path, const std::string& resource_version, int timeout_s,
                 const std::function<bool(const nlohmann::json&)>& event,
                 const std::atomic<bool>& stop) const;

  const std::string& address() const { return endpoint_.server; }

 private:
  class Connections;
  // One request on a kept connection; `stream` is kube_api.cc's Transfer for a watch (null: the
  // answer is returned). Throws Error (unavailable) for a transport failure.
  std::pair<long, std::string> Perform(const std::string& method, const std::string& path,
                                       const std::string& body, const std::string& content_type,
                                       void* stream, long timeout_ms, int* retry_after_s) const;
  nlohmann::json Call(const std::string& method, const std::string& path,
                      const nlohmann::json& body = nullptr,
                      const std::string& content_type = "application/json") const;
  KubeEndpoint endpoint_;
  std::shared_ptr<Connections> connections_;  // shared by copies
};

}  // namespace gpumux::k8s
