#include "integrations/kubernetes/kube_api.h"

#include "base/error.h"
#include "node/agent/http_client.h"

namespace gpumux::k8s {

using nlohmann::json;

namespace {

json Items(const json& list, const std::string& what) {
  if (!list.is_object() || !list.contains("items") || !list["items"].is_array())
    throw Unavailable("the API server's " + what + " list has no items");
  return list["items"];
}

json AnnotationPatch(const std::map<std::string, std::string>& annotations) {
  json values = json::object();
  for (const auto& [k, v] : annotations) values[k] = v;
  return {{"metadata", {{"annotations", values}}}};
}

}  // namespace

json KubeApi::Call(const std::string& method, const std::string& path, const json& body,
                   const std::string& content_type) const {
  auto [status, text] =
      agent::CallHttp(address_, method, path, body.is_null() ? "" : body.dump(), content_type);
  json answer = json::parse(text, nullptr, false);
  if (status >= 300) {
    std::string message =
        answer.is_object() && answer.contains("message") && answer["message"].is_string()
            ? answer["message"].get<std::string>()
            : text.substr(0, 200);
    throw Error(ErrorCodeForHttpStatus(status), "API server: " + method + " " + path + ": " +
                                                    std::to_string(status) + " " + message);
  }
  if (answer.is_discarded()) throw Unavailable("API server: " + path + ": answer is not JSON");
  return answer;
}

json KubeApi::ListPods(const std::string& node) const {
  std::string path = "/api/v1/pods";
  if (!node.empty()) path += "?fieldSelector=spec.nodeName%3D" + node;
  json pods = json::array();
  for (const json& pod : Items(Call("GET", path), "pod")) {
    // Also checked here, so that a proxy or API that ignores the selector changes nothing.
    if (node.empty() || pod.value("/spec/nodeName"_json_pointer, std::string()) == node)
      pods.push_back(pod);
  }
  return pods;
}

json KubeApi::GetPod(const std::string& ns, const std::string& name) const {
  return Call("GET", "/api/v1/namespaces/" + ns + "/pods/" + name);
}

json KubeApi::ListNodes() const { return Items(Call("GET", "/api/v1/nodes"), "node"); }

void KubeApi::AnnotatePod(const std::string& ns, const std::string& name,
                          const std::map<std::string, std::string>& annotations) const {
  Call("PATCH", "/api/v1/namespaces/" + ns + "/pods/" + name, AnnotationPatch(annotations),
       "application/merge-patch+json");
}

void KubeApi::AnnotateNode(const std::string& name,
                           const std::map<std::string, std::string>& annotations) const {
  Call("PATCH", "/api/v1/nodes/" + name, AnnotationPatch(annotations),
       "application/merge-patch+json");
}

json KubeApi::GetResourceClaim(const std::string& ns, const std::string& name) const {
  return Call("GET", "/apis/resource.k8s.io/v1/namespaces/" + ns + "/resourceclaims/" + name);
}

void KubeApi::ApplyResourceSlice(const json& slice) const {
  std::string name = slice.at("metadata").at("name");
  Call("PATCH",
       "/apis/resource.k8s.io/v1/resourceslices/" + name + "?fieldManager=gpumux&force=true", slice,
       "application/apply-patch+yaml");
}

void KubeApi::Bind(const std::string& ns, const std::string& name, const std::string& uid,
                   const std::string& node) const {
  json binding = {{"apiVersion", "v1"},
                  {"kind", "Binding"},
                  {"metadata", {{"name", name}, {"namespace", ns}, {"uid", uid}}},
                  {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}}}};
  Call("POST", "/api/v1/namespaces/" + ns + "/pods/" + name + "/binding", binding);
}

}  // namespace gpumux::k8s
