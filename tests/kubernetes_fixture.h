// The stand-ins for Kubernetes in the Kubernetes integration's end-to-end tests (Debian 12 has no
// kubelet or API server): a fake API server (pods, nodes and ResourceClaims in memory, and any
// other object by its path, over HTTP on a Unix socket, answering the calls KubeApi makes as the
// real one does: answers over 4 KiB chunked; lists in pages with limit and continue, each object
// and list with a resourceVersion; watches from a resourceVersion with the events since, a
// BOOKMARK, and ERROR 410 Gone for a version older than it keeps (Compact); it ends each watch
// stream once it has sent what it has, as a server may end one at any time, and can answer
// watches 503 as a restarting one does (FailWatches)) and a fake kubelet (the
// device plugin API's Registration service on kubelet.sock, and a client of the plugin's sockets,
// built from the same .proto as the plugin).
#pragma once

#include <filesystem>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "integrations/kubernetes/proto/deviceplugin_v1beta1.grpc.pb.h"
#include "service/http_server.h"

namespace gpumux::testing {

using nlohmann::json;

class FakeApiServer {
 public:
  // As a Go API server frames them: answers over 4 KiB chunked.
  explicit FakeApiServer(std::string socket) : socket_(std::move(socket)), server_(GoLimits()) {
    server_.ListenUnix(socket_);
    thread_ = std::thread(
        [this] { server_.Serve([this](const service::HttpRequest& r) { return Handle(r); }); });
  }
  ~FakeApiServer() {
    server_.Stop();
    thread_.join();
  }
  std::string address() const { return "unix:" + socket_; }

  void AddNode(const std::string& name, const json& annotations = json::object()) {
    std::lock_guard lock(mu_);
    nodes_.push_back(
        {{"apiVersion", "v1"},
         {"kind", "Node"},
         {"metadata", {{"name", name}, {"uid", "node-uid-" + name}, {"annotations", annotations}}},
         {"status", {{"allocatable", {{"cpu", "64"}, {"memory", "512Gi"}}}}}});
    Changed("nodes", "ADDED", nodes_.back());
  }
  void AddPod(const json& pod) {
    std::lock_guard lock(mu_);
    pods_.push_back(pod);
    Changed("pods", "ADDED", pods_.back());
  }
  void DeletePod(const std::string& name) {
    std::lock_guard lock(mu_);
    for (auto it = pods_.begin(); it != pods_.end(); ++it) {
      if ((*it)["metadata"]["name"] != name) continue;
      json gone = *it;
      pods_.erase(it);
      Changed("pods", "DELETED", gone);
      return;
    }
  }
  // The next `count` watches are answered `status` with a Status, as an API server restarting
  // behind a load balancer answers (503), without ending what was watched: the version stays.
  void FailWatches(int count, int status = 503) {
    std::lock_guard lock(mu_);
    failing_watches_ = count;
    failing_status_ = status;
  }
  // Forgets the events kept so far: a watch from an older version is then answered 410 Gone.
  void Compact() {
    std::lock_guard lock(mu_);
    events_.clear();
    compacted_ = version_;
  }
  // Lists of a whole kind (no field selector: the cluster, not one node's pods) served so far.
  int lists() {
    std::lock_guard lock(mu_);
    return lists_;
  }
  // Lists of one node's pods (fieldSelector spec.nodeName) served so far.
  int node_lists() {
    std::lock_guard lock(mu_);
    return node_lists_;
  }
  // Watches of all "pods", "nodes" or "resourceclaims" (no field selector) served so far.
  int watches(const std::string& kind) {
    std::lock_guard lock(mu_);
    return watches_[kind];
  }
  json Pod(const std::string& name) {
    std::lock_guard lock(mu_);
    for (const json& p : pods_)
      if (p["metadata"]["name"] == name) return p;
    return nullptr;
  }
  json Node(const std::string& name) {
    std::lock_guard lock(mu_);
    for (const json& n : nodes_)
      if (n["metadata"]["name"] == name) return n;
    return nullptr;
  }
  int bindings() {
    std::lock_guard lock(mu_);
    return bindings_;
  }
  // A ResourceClaim (resource.k8s.io/v1), added or replaced whole (as the scheduler's status update
  // leaves it), listed and watched at /apis/resource.k8s.io/v1/resourceclaims.
  void PutClaim(json claim) {
    std::lock_guard lock(mu_);
    const json& meta = claim["metadata"];
    json* known = FindNamespaced(claims_, meta["namespace"], meta["name"]);
    if (known) {
      *known = std::move(claim);
      Changed("resourceclaims", "MODIFIED", *known);
    } else {
      claims_.push_back(std::move(claim));
      Changed("resourceclaims", "ADDED", claims_.back());
    }
  }
  // ResourceClaim `ns`/`name` as it is now (null if there is none).
  json Claim(const std::string& ns, const std::string& name) {
    std::lock_guard lock(mu_);
    json* claim = FindNamespaced(claims_, ns, name);
    return claim ? *claim : json();
  }
  // GETs of one ResourceClaim served so far.
  int claim_gets() {
    std::lock_guard lock(mu_);
    return claim_gets_;
  }
  // The objects whose API path starts with `prefix` ("/apis/resource.k8s.io/v1/resourceslices/").
  std::vector<json> List(const std::string& prefix) {
    std::lock_guard lock(mu_);
    std::vector<json> found;
    for (const auto& [path, object] : objects_)
      if (path.rfind(prefix, 0) == 0) found.push_back(object);
    return found;
  }
  // Any other object, by its API path ("/apis/resource.k8s.io/v1/resourceslices/N").
  json Get(const std::string& path) {
    std::lock_guard lock(mu_);
    auto it = objects_.find(path);
    return it == objects_.end() ? json() : it->second;
  }

 private:
  static service::HttpResponse Status(int code, const std::string& message) {
    return {code, json{{"kind", "Status"}, {"code", code}, {"message", message}}.dump()};
  }
  static bool DnsLabel(const json& name) {
    static const std::regex label("[a-z0-9]([-a-z0-9]*[a-z0-9])?");
    return name.is_string() && name.get<std::string>().size() <= 63 &&
           std::regex_match(name.get<std::string>(), label);
  }
  // Why the API server's validation (resource.k8s.io/v1, Kubernetes 1.36:
  // pkg/apis/resource/validation) refuses a ResourceSlice; empty if it does not. The rules a
  // driver meets with partitionable devices: devices or counter sets, not both; at most 128 devices
  // (64 when one consumes counters), 8 counter sets of at most 32 counters, 2 consumptions of at
  // most 32 counters per device; names DNS labels; one node field; a pool with a slice count.
  static std::string ResourceSliceInvalid(const json& slice) {
    const json& spec = slice.value("spec", json::object());
    const json& pool = spec.value("pool", json::object());
    if (!pool.value("name", json()).is_string()) return "spec.pool.name: Required value";
    if (pool.value("resourceSliceCount", 0) < 1)
      return "spec.pool.resourceSliceCount: Invalid value: must be greater than zero";
    if (pool.value("generation", -1) < 0) return "spec.pool.generation: Invalid value";
    int node_fields = spec.contains("nodeName") + spec.contains("nodeSelector") +
                      spec.contains("allNodes") + spec.contains("perDeviceNodeSelection");
    if (node_fields != 1)
      return "spec: Invalid value: exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
             "`perDeviceNodeSelection` is required";
    const json& devices = spec.value("devices", json());
    const json& sets = spec.value("sharedCounters", json());
    if (!devices.is_null() && !sets.is_null())
      return "spec: Invalid value: only one of `sharedCounters` or `devices` is allowed";
    if (sets.is_array()) {
      if (sets.size() > 8) return "spec.sharedCounters: Too many: must have at most 8 items";
      std::set<std::string> names;
      for (const json& set : sets) {
        if (!DnsLabel(set.value("name", json())) || !names.insert(set["name"]).second)
          return "spec.sharedCounters[].name: Invalid value: " + set.value("name", json()).dump();
        const json& counters = set.value("counters", json::object());
        if (counters.empty() || counters.size() > 32)
          return "spec.sharedCounters[].counters: must have 1 to 32 counters";
        for (const auto& [name, counter] : counters.items())
          if (!DnsLabel(name) || !counter.contains("value"))
            return "spec.sharedCounters[].counters[" + name + "]: Invalid value";
      }
    }
    if (devices.is_array()) {
      bool consume = false;
      for (const json& d : devices) consume = consume || d.contains("consumesCounters");
      if (devices.size() > (consume ? 64u : 128u))
        return "spec.devices: Too many: " + std::to_string(devices.size()) +
               ": must have at most " + (consume ? "64" : "128") + " items";
      for (const json& d : devices) {
        if (!DnsLabel(d.value("name", json())))
          return "spec.devices[].name: Invalid value: " + d.value("name", json()).dump();
        const json& uses = d.value("consumesCounters", json::array());
        if (uses.size() > 2) return "spec.devices[].consumesCounters: Too many: at most 2";
        for (const json& use : uses) {
          const json& counters = use.value("counters", json::object());
          if (!DnsLabel(use.value("counterSet", json())) || counters.empty() ||
              counters.size() > 32)
            return "spec.devices[].consumesCounters: Invalid value: " + use.dump();
          for (const auto& [name, counter] : counters.items())
            if (!DnsLabel(name) || !counter.contains("value"))
              return "spec.devices[].consumesCounters[].counters[" + name + "]: Invalid value";
        }
      }
    }
    return "";
  }
  json* Find(json& list, const std::string& name) {
    for (json& item : list)
      if (item["metadata"]["name"] == name) return &item;
    return nullptr;
  }
  json* FindNamespaced(json& list, const std::string& ns, const std::string& name) {
    for (json& item : list)
      if (item["metadata"]["namespace"] == ns && item["metadata"]["name"] == name) return &item;
    return nullptr;
  }
  service::HttpResponse Handle(const service::HttpRequest& r) {
    std::lock_guard lock(mu_);
    std::vector<std::string> parts;
    for (size_t at = 1; at <= r.path.size();) {
      size_t slash = r.path.find('/', at);
      parts.push_back(r.path.substr(at, slash - at));
      at = slash == std::string::npos ? r.path.size() + 1 : slash + 1;
    }
    if (r.method == "GET" && (r.path == "/api/v1/pods" || r.path == "/api/v1/nodes"))
      return ListOrWatch(r.path == "/api/v1/pods" ? "pods" : "nodes", Query(r.query));
    if (r.method == "GET" && r.path == "/apis/resource.k8s.io/v1/resourceclaims")
      return ListOrWatch("resourceclaims", Query(r.query));
    if (r.method == "GET" && parts.size() == 7 && parts[3] == "namespaces" &&
        parts[5] == "resourceclaims") {
      ++claim_gets_;
      json* claim = FindNamespaced(claims_, parts[4], parts[6]);
      if (!claim)
        return Status(404, "resourceclaims.resource.k8s.io \"" + parts[6] + "\" not found");
      return {200, claim->dump()};
    }
    if (r.path.rfind("/apis/", 0) == 0) {
      auto it = objects_.find(r.path);
      if (r.method == "GET")
        return it == objects_.end() ? Status(404, r.path + " not found")
                                    : service::HttpResponse{200, it->second.dump()};
      if (r.method == "DELETE") {
        if (it == objects_.end()) return Status(404, r.path + " not found");
        json gone = it->second;
        objects_.erase(it);
        return {200, gone.dump()};
      }
      if (r.method == "PATCH") {  // server-side apply: create, or merge into what is there
        json applied = json::parse(r.body);
        if (r.path.rfind("/apis/resource.k8s.io/v1/resourceslices/", 0) == 0) {
          std::string invalid = ResourceSliceInvalid(applied);
          if (!invalid.empty())
            return Status(422, "ResourceSlice.resource.k8s.io \"" +
                                   applied["metadata"].value("name", "") +
                                   "\" is invalid: " + invalid);
        }
        json& object = objects_[r.path];
        if (object.is_null())
          object = applied;
        else
          object.merge_patch(applied);
        return {200, object.dump()};
      }
    }
    if (parts.size() == 4 && parts[2] == "nodes" && r.method == "PATCH") {
      json* node = Find(nodes_, parts[3]);
      if (!node) return Status(404, "nodes \"" + parts[3] + "\" not found");
      node->merge_patch(json::parse(r.body));
      Changed("nodes", "MODIFIED", *node);
      return {200, node->dump()};
    }
    if (parts.size() >= 6 && parts[2] == "namespaces" && parts[4] == "pods") {
      json* pod = Find(pods_, parts[5]);
      if (!pod) return Status(404, "pods \"" + parts[5] + "\" not found");
      if (parts.size() == 6 && r.method == "GET") return {200, pod->dump()};
      if (parts.size() == 6 && r.method == "PATCH") {
        pod->merge_patch(json::parse(r.body));
        Changed("pods", "MODIFIED", *pod);
        return {200, pod->dump()};
      }
      if (parts.size() == 7 && parts[6] == "binding" && r.method == "POST") {
        if (!(*pod)["spec"].value("nodeName", "").empty())
          return Status(409, "pod " + parts[5] + " is already assigned to node " +
                                 (*pod)["spec"]["nodeName"].get<std::string>());
        (*pod)["spec"]["nodeName"] = json::parse(r.body)["target"]["name"];
        Changed("pods", "MODIFIED", *pod);
        ++bindings_;
        return Status(201, "bound");
      }
    }
    return Status(404, "no such path " + r.path);
  }

  // A change to an object of `kind`: a new resourceVersion for it, and an event kept for watches.
  void Changed(const std::string& kind, const std::string& type, json& object) {
    object["metadata"]["resourceVersion"] = std::to_string(++version_);
    events_.push_back({version_, kind, {{"type", type}, {"object", object}}});
  }
  static std::map<std::string, std::string> Query(const std::string& query) {
    std::map<std::string, std::string> out;
    for (size_t at = 0; at <= query.size() && !query.empty();) {
      size_t amp = std::min(query.find('&', at), query.size());
      std::string pair = query.substr(at, amp - at), value;
      size_t eq = pair.find('=');
      std::string raw = eq == std::string::npos ? "" : pair.substr(eq + 1);
      for (size_t i = 0; i < raw.size(); ++i) {  // percent-decoding
        if (raw[i] == '%' && i + 2 < raw.size()) {
          value += char(std::stoi(raw.substr(i + 1, 2), nullptr, 16));
          i += 2;
        } else {
          value += raw[i];
        }
      }
      out[pair.substr(0, eq)] = value;
      at = amp + 1;
    }
    return out;
  }
  // The Kind of an object of a list of `kind` ("pods" → "Pod").
  static std::string ObjectKind(const std::string& kind) {
    return kind == "pods" ? "Pod" : kind == "nodes" ? "Node" : "ResourceClaim";
  }
  // GET of a whole kind: a page of the list, or a watch's events since a version.
  service::HttpResponse ListOrWatch(const std::string& kind, std::map<std::string, std::string> q) {
    json& all = kind == "pods" ? pods_ : kind == "nodes" ? nodes_ : claims_;
    std::string node;  // fieldSelector=spec.nodeName=NAME, the one selector KubeApi sends
    if (auto f = q.find("fieldSelector"); f != q.end() && f->second.rfind("spec.nodeName=", 0) == 0)
      node = f->second.substr(14);
    auto selected = [&](const json& o) {
      return node.empty() || o.value("/spec/nodeName"_json_pointer, std::string()) == node;
    };
    if (q["watch"] == "true") {
      if (node.empty()) ++watches_[kind];
      if (failing_watches_ > 0) {
        --failing_watches_;
        return {failing_status_,
                json{{"kind", "Status"},
                     {"status", "Failure"},
                     {"code", failing_status_},
                     {"message", "the server is currently unable to handle the request"}}
                    .dump()};
      }
      int64_t from = std::stoll(q["resourceVersion"].empty() ? "0" : q["resourceVersion"]);
      std::string stream;
      if (from < compacted_) {
        stream = json{{"type", "ERROR"},
                      {"object",
                       {{"kind", "Status"},
                        {"code", 410},
                        {"reason", "Expired"},
                        {"message", "too old resource version"}}}}
                     .dump() +
                 "\n";
        return {200, stream};
      }
      for (const auto& [version, of, e] : events_)
        if (of == kind && version > from && selected(e["object"])) stream += e.dump() + "\n";
      stream += json{{"type", "BOOKMARK"},
                     {"object",
                      {{"kind", ObjectKind(kind)},
                       {"metadata", {{"resourceVersion", std::to_string(version_)}}}}}}
                    .dump() +
                "\n";
      return {200, stream};
    }
    ++(node.empty() ? lists_ : node_lists_);
    size_t offset = q["continue"].empty() ? 0 : std::stoul(q["continue"]);
    size_t limit = q["limit"].empty() ? all.size() : std::stoul(q["limit"]);
    json items = json::array();
    size_t i = 0, taken = 0;
    for (; i < all.size() && taken < limit; ++i) {
      if (i < offset || !selected(all[i])) continue;
      items.push_back(all[i]);
      ++taken;
    }
    json meta = {{"resourceVersion", std::to_string(version_)}};
    if (i < all.size()) meta["continue"] = std::to_string(i);
    return {200,
            json{{"kind", ObjectKind(kind) + "List"}, {"metadata", meta}, {"items", items}}.dump()};
  }

  static service::HttpServerLimits GoLimits() {
    service::HttpServerLimits limits;
    limits.chunk_answers_over = 4096;
    return limits;
  }

  std::string socket_;
  service::HttpServer server_;
  std::thread thread_;
  std::mutex mu_;
  json pods_ = json::array(), nodes_ = json::array(), claims_ = json::array();
  std::map<std::string, json> objects_;
  int bindings_ = 0, claim_gets_ = 0;
  int64_t version_ = 1, compacted_ = 0;
  struct Event {
    int64_t version;
    std::string kind;  // "pods", "nodes" or "resourceclaims"
    json event;
  };
  std::vector<Event> events_;
  int lists_ = 0, node_lists_ = 0;
  std::map<std::string, int> watches_;
  int failing_watches_ = 0, failing_status_ = 503;
};

// The kubelet's device manager as far as a plugin sees it.
class FakeKubelet final : public ::v1beta1::Registration::Service {
 public:
  explicit FakeKubelet(std::filesystem::path dir) : dir_(std::move(dir)) {
    std::filesystem::create_directories(dir_);
  }
  ~FakeKubelet() override { Stop(); }

  void Start() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + (dir_ / "kubelet.sock").string(),
                             grpc::InsecureServerCredentials());
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
  }
  // As a kubelet that stops: its socket goes, and (as it does when it starts again) every other
  // socket in its directory too.
  void Stop() {
    if (!server_) return;
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
    server_.reset();
    for (const auto& entry : std::filesystem::directory_iterator(dir_))
      if (entry.path().extension() == ".sock") std::filesystem::remove(entry.path());
  }

  grpc::Status Register(grpc::ServerContext*, const ::v1beta1::RegisterRequest* request,
                        ::v1beta1::Empty*) override {
    std::lock_guard lock(mu_);
    if (request->version() != "v1beta1")
      return {grpc::StatusCode::INVALID_ARGUMENT, "unsupported version"};
    registrations_.push_back(*request);
    return grpc::Status::OK;
  }
  // Waits up to 10 s for `n` registrations in all; returns how many there are.
  size_t WaitForRegistrations(size_t n) {
    for (int i = 0; i < 500; ++i) {
      {
        std::lock_guard lock(mu_);
        if (registrations_.size() >= n) return registrations_.size();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::lock_guard lock(mu_);
    return registrations_.size();
  }
  std::vector<::v1beta1::RegisterRequest> registrations() {
    std::lock_guard lock(mu_);
    return registrations_;
  }
  // A client of the plugin that registered `resource` (its last registration).
  std::unique_ptr<::v1beta1::DevicePlugin::Stub> Plugin(const std::string& resource) {
    std::string endpoint;
    for (const auto& r : registrations())
      if (r.resource_name() == resource) endpoint = r.endpoint();
    return ::v1beta1::DevicePlugin::NewStub(grpc::CreateChannel(
        "unix:" + (dir_ / endpoint).string(), grpc::InsecureChannelCredentials()));
  }

  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
  std::unique_ptr<grpc::Server> server_;
  std::mutex mu_;
  std::vector<::v1beta1::RegisterRequest> registrations_;
};

// A v1.Pod as the API server holds it before scheduling; each container asks {resource: units}.
inline json PendingPod(const std::string& name, const std::string& uid,
                       const std::vector<std::map<std::string, int>>& containers,
                       const std::string& created = "2026-12-04T08:00:00Z") {
  json list = json::array();
  for (size_t i = 0; i < containers.size(); ++i) {
    json limits = json::object();
    for (const auto& [k, v] : containers[i]) limits[k] = std::to_string(v);
    list.push_back({{"name", "c" + std::to_string(i)},
                    {"image", "registry.example/serve:1"},
                    {"resources", {{"limits", limits}, {"requests", limits}}}});
  }
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", name},
            {"namespace", "default"},
            {"uid", uid},
            {"creationTimestamp", created},
            {"annotations", json::object()}}},
          {"spec",
           {{"schedulerName", "gpumux-scheduler"},
            {"securityContext", {{"runAsUser", 0}}},
            {"containers", list}}},
          {"status", {{"phase", "Pending"}, {"qosClass", "BestEffort"}}}};
}

}  // namespace gpumux::testing
