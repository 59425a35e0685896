#include "integrations/kubernetes/kube_api.h"

#include <curl/curl.h>
#include <yaml-cpp/yaml.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/input_file.h"
#include "integrations/kubernetes/watch_stream.h"

namespace gpumux::k8s {

using nlohmann::json;

namespace {

// The largest answer kept: a list of 150,000 pods is some 1 GB; past this the caller must page.
constexpr size_t kMaxAnswerBytes = size_t(2) << 30;
constexpr long kConnectTimeoutMs = 5000, kCallTimeoutMs = 30000;
constexpr int kTries = 3;
// The longest Retry-After obeyed; a server asking more is asked again after this.
constexpr int kMostRetryAfterS = 30;
// Idle handles (and so connections) kept for the next calls.
constexpr size_t kIdleHandlesKept = 8;

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

std::string ReadSmallFile(const std::string& path, const std::string& what) {
  try {
    return ReadInputFile(path, 1 << 20);
  } catch (const Error& e) {
    throw BadInput(what + ": " + e.what());
  }
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string Base64Decode(const std::string& in, const std::string& what) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  uint32_t bits = 0;
  int count = 0;
  for (char c : in) {
    if (c == '=' || c == '\n' || c == '\r' || c == ' ') continue;
    int v = value(c);
    if (v < 0) throw BadInput(what + ": not base64");
    bits = (bits << 6) | uint32_t(v);
    if ((count += 6) >= 8) {
      count -= 8;
      out.push_back(char((bits >> count) & 0xff));
    }
  }
  return out;
}

bool IsDnsLabel(const std::string& s, size_t max) {
  if (s.empty() || s.size() > max) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return s.front() != '-' && s.back() != '-';
}

std::string ServiceAccountDir() {
  const char* dir = std::getenv("GPUMUX_SERVICE_ACCOUNT_DIR");
  return dir && *dir ? dir : "/var/run/secrets/kubernetes.io/serviceaccount";
}

KubeEndpoint InCluster() {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (!host || !*host || !port || !*port) {
    throw BadInput(
        "--apiserver in-cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set "
        "(not in a pod?); give --apiserver kubeconfig:PATH or HOST:PORT");
  }
  std::string h = host;
  if (h.find(':') != std::string::npos) h = "[" + h + "]";  // an IPv6 address
  KubeEndpoint e;
  e.server = "https://" + h + ":" + port;
  const std::string what = "--apiserver in-cluster: the service account";
  e.ca_file = ServiceAccountDir() + "/ca.crt";
  e.token_file = ServiceAccountDir() + "/token";
  ReadSmallFile(e.token_file, what + "'s token");
  return e;
}

// A kubeconfig's current context: its cluster's server and CA, its user's credentials.
KubeEndpoint FromKubeconfig(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::Load(ReadSmallFile(path, "--apiserver kubeconfig"));
  } catch (const YAML::Exception& e) {
    throw BadInput(path + ":" + std::to_string(e.mark.line + 1) + ": not valid YAML: " + e.msg);
  }
  auto find = [&](const char* list, const std::string& name) {
    if (root[list] && root[list].IsSequence()) {
      for (const YAML::Node& item : root[list]) {
        if (item["name"] && item["name"].as<std::string>() == name) return item;
      }
    }
    throw BadInput(path + ": no " + std::string(list) + " entry named '" + name + "'");
  };
  try {
    if (!root.IsMap() || !root["current-context"]) throw BadInput(path + ": no current-context");
    YAML::Node context = find("contexts", root["current-context"].as<std::string>())["context"];
    YAML::Node cluster = find("clusters", context["cluster"].as<std::string>())["cluster"];
    YAML::Node user = find("users", context["user"].as<std::string>())["user"];
    KubeEndpoint e;
    if (!cluster["server"]) throw BadInput(path + ": the cluster has no server");
    e.server = cluster["server"].as<std::string>();
    std::string base = path.substr(0, path.rfind('/') + 1);
    auto file = [&](const YAML::Node& n) {  // relative paths are relative to the kubeconfig
      std::string f = n.as<std::string>();
      return f.empty() || f[0] == '/' ? f : base + f;
    };
    if (cluster["certificate-authority"]) e.ca_file = file(cluster["certificate-authority"]);
    if (cluster["certificate-authority-data"])
      e.ca_pem = Base64Decode(cluster["certificate-authority-data"].as<std::string>(),
                              path + ": certificate-authority-data");
    if (user && user.IsMap()) {
      if (user["token"]) e.token = user["token"].as<std::string>();
      if (user["tokenFile"]) e.token_file = file(user["tokenFile"]);
      if (user["client-certificate"]) e.client_cert_file = file(user["client-certificate"]);
      if (user["client-key"]) e.client_key_file = file(user["client-key"]);
      if (user["client-certificate-data"])
        e.client_cert_pem = Base64Decode(user["client-certificate-data"].as<std::string>(),
                                         path + ": client-certificate-data");
      if (user["client-key-data"])
        e.client_key_pem =
            Base64Decode(user["client-key-data"].as<std::string>(), path + ": client-key-data");
    }
    return e;
  } catch (const YAML::Exception& e) {
    throw BadInput(path + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
}

void InitCurlOnce() {
  static const bool done = [] { return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK; }();
  if (!done) throw Unavailable("libcurl could not be initialised");
}

// Where an answer goes: into `answer`, or (a watch) piece by piece to `sink` once the status is
// 200; `stop` ends the transfer when set.
struct Transfer {
  CURL* curl = nullptr;
  std::string answer;
  std::function<bool(std::string_view)> sink;
  const std::atomic<bool>* stop = nullptr;
  bool stopped = false;
  int retry_after_s = -1;  // the answer's Retry-After in seconds; -1 without one
};

// Reads the answer's Retry-After (delay-seconds; an HTTP date is taken as none).
size_t Header(char* data, size_t size, size_t n, void* into) {
  auto* t = static_cast<Transfer*>(into);
  std::string_view line(data, size * n);
  constexpr std::string_view kName = "retry-after:";
  if (line.size() > kName.size() &&
      std::equal(kName.begin(), kName.end(), line.begin(),
                 [](char a, char b) { return a == std::tolower(static_cast<unsigned char>(b)); })) {
    std::string value(line.substr(kName.size()));
    char* end = nullptr;
    long seconds = std::strtol(value.c_str(), &end, 10);
    if (end != value.c_str() && seconds >= 0) t->retry_after_s = int(std::min(seconds, 1L << 20));
  }
  return size * n;
}

// What this program says it is: "gpumux-k8s-scheduler/0.1.0".
const std::string& UserAgent() {
  static const std::string agent = [] {
    std::string name = program_invocation_short_name;
    if (name.rfind("gpumux", 0) != 0) name = "gpumux-" + name;
    return name + "/" GPUMUX_VERSION;
  }();
  return agent;
}

size_t Collect(char* data, size_t size, size_t n, void* into) {
  auto* t = static_cast<Transfer*>(into);
  if (t->sink) {
    long status = 0;
    curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
    if (status == 200) {
      if (t->sink(std::string_view(data, size * n))) return size * n;
      t->stopped = true;
      return 0;  // libcurl then ends the transfer
    }
  }
  if (t->answer.size() + size * n > kMaxAnswerBytes) return 0;  // libcurl then fails it
  t->answer.append(data, size * n);
  return size * n;
}

int Progress(void* from, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* t = static_cast<Transfer*>(from);
  if (t->stop && t->stop->load()) t->stopped = true;
  return t->stopped ? 1 : 0;
}

struct CurlDeleter {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};

}  // namespace

// libcurl handles kept between calls: each keeps its connection to the API server open, so that
// the next call on it goes out without a new TCP and TLS handshake (libcurl checks a kept
// connection is still alive before it reuses it). A watch holds one for its length.
class KubeApi::Connections {
 public:
  ~Connections() {
    for (CURL* c : idle_) curl_easy_cleanup(c);
  }
  std::unique_ptr<CURL, CurlDeleter> Take() {
    std::lock_guard lock(mu_);
    if (idle_.empty()) return std::unique_ptr<CURL, CurlDeleter>(curl_easy_init());
    CURL* c = idle_.back();
    idle_.pop_back();
    curl_easy_reset(c);  // its options; its connection stays
    return std::unique_ptr<CURL, CurlDeleter>(c);
  }
  void Give(std::unique_ptr<CURL, CurlDeleter> c) {
    std::lock_guard lock(mu_);
    if (idle_.size() < kIdleHandlesKept) idle_.push_back(c.release());
  }

 private:
  std::mutex mu_;
  std::vector<CURL*> idle_;
};

namespace {

// One request on the handle `c` (KubeApi::Connections); returns (status, body), or throws Error
// (unavailable) for a transport failure. The answer goes into `t` (with a sink, a 200 answer goes
// to it as it arrives, and is not returned), and what its head said (Retry-After).
std::pair<long, std::string> Perform(CURL* c, const KubeEndpoint& e, const std::string& method,
                                     const std::string& path, const std::string& body,
                                     const std::string& content_type, Transfer* t,
                                     long timeout_ms) {
  if (!c) throw Unavailable("libcurl: no handle");
  std::string url;
  if (e.server.rfind("unix:", 0) == 0) {
    curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, e.server.substr(5).c_str());
    url = "http://localhost" + path;
  } else {
    url = e.server + path;
  }
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, kConnectTimeoutMs);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
  curl_slist* raw_headers = nullptr;
  raw_headers = curl_slist_append(raw_headers, ("Content-Type: " + content_type).c_str());
  raw_headers = curl_slist_append(raw_headers, "Accept: application/json");
  curl_easy_setopt(c, CURLOPT_USERAGENT, UserAgent().c_str());  // API priority, audit logs
  curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "");             // every coding this libcurl decodes
  std::string token = e.token;
  if (!e.token_file.empty()) token = Trim(ReadSmallFile(e.token_file, "the bearer token"));
  if (!token.empty())
    raw_headers = curl_slist_append(raw_headers, ("Authorization: Bearer " + token).c_str());
  std::unique_ptr<curl_slist, CurlDeleter> headers(raw_headers);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  if (!body.empty() || method == "POST" || method == "PATCH" || method == "PUT") {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.size()));
  }
  // The CA file read at each call, as the token is: a rotated CA holds for the next connection
  // (libcurl would keep a file's certificates for a day in a handle that lives on).
  std::string ca_pem = e.ca_file.empty() ? e.ca_pem : ReadSmallFile(e.ca_file, "the CA bundle");
  curl_blob ca{const_cast<char*>(ca_pem.data()), ca_pem.size(), CURL_BLOB_COPY};
  if (!ca_pem.empty()) curl_easy_setopt(c, CURLOPT_CAINFO_BLOB, &ca);
  if (!e.client_cert_file.empty()) curl_easy_setopt(c, CURLOPT_SSLCERT, e.client_cert_file.c_str());
  if (!e.client_key_file.empty()) curl_easy_setopt(c, CURLOPT_SSLKEY, e.client_key_file.c_str());
  curl_blob cert{const_cast<char*>(e.client_cert_pem.data()), e.client_cert_pem.size(),
                 CURL_BLOB_COPY};
  curl_blob key{const_cast<char*>(e.client_key_pem.data()), e.client_key_pem.size(),
                CURL_BLOB_COPY};
  if (!e.client_cert_pem.empty()) {
    curl_easy_setopt(c, CURLOPT_SSLCERT_BLOB, &cert);
    curl_easy_setopt(c, CURLOPT_SSLCERTTYPE, "PEM");
  }
  if (!e.client_key_pem.empty()) {
    curl_easy_setopt(c, CURLOPT_SSLKEY_BLOB, &key);
    curl_easy_setopt(c, CURLOPT_SSLKEYTYPE, "PEM");
  }
  t->curl = c;
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, Collect);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, t);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, Header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, t);
  if (t->stop) {
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, Progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, t);
  }
  CURLcode rc = curl_easy_perform(c);
  if (t->stopped) return {200, ""};
  if (rc != CURLE_OK) {
    throw Unavailable("API server " + e.server + ": " + method + " " + path + ": " +
                      curl_easy_strerror(rc) +
                      (rc == CURLE_WRITE_ERROR ? " (answer over 2 GiB)" : ""));
  }
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  return {status, std::move(t->answer)};
}

// The refusal an answer of `status` >= 300 stands for.
Error Refusal(const std::string& method, const std::string& path, long status,
              const std::string& raw) {
  json parsed = json::parse(raw, nullptr, false);
  std::string message =
      parsed.is_object() && parsed.contains("message") && parsed["message"].is_string()
          ? parsed["message"].get<std::string>()
          : raw.substr(0, 200);
  return Error(ErrorCodeForHttpStatus(int(status)), "API server: " + method + " " + path + ": " +
                                                        std::to_string(status) + " " +
                                                        Quoted(message, 300));
}

// `path` with `query` joined to any query it has.
std::string WithQuery(const std::string& path, const std::string& query) {
  return path + (path.find('?') == std::string::npos ? "?" : "&") + query;
}

std::string Escape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out.push_back(char(c));
    } else {
      static const char* hex = "0123456789ABCDEF";
      out += {'%', hex[c >> 4], hex[c & 15]};
    }
  }
  return out;
}

}  // namespace

KubeEndpoint ResolveApiServer(const std::string& spec) {
  if (spec.empty() || spec == "in-cluster") return InCluster();
  if (spec.rfind("kubeconfig:", 0) == 0) return FromKubeconfig(spec.substr(11));
  KubeEndpoint e;
  if (spec.rfind("http://", 0) == 0 || spec.rfind("https://", 0) == 0 ||
      spec.rfind("unix:", 0) == 0) {
    e.server = spec;
  } else if (spec[0] == '/') {
    e.server = "unix:" + spec;
  } else if (spec.find(':') != std::string::npos) {
    e.server = "http://" + spec;
  } else {
    throw BadInput("--apiserver '" + Quoted(spec) +
                   "': expected in-cluster, kubeconfig:PATH, a URL, HOST:PORT or unix:PATH");
  }
  return e;
}

void CheckDnsLabel(const std::string& field, const std::string& value) {
  if (!IsDnsLabel(value, 63)) {
    throw BadInput(field + ": '" + Quoted(value) +
                   "' is not a valid DNS-1123 label (at most 63 of a-z, 0-9 and '-', starting and "
                   "ending with a letter or digit)");
  }
}

void CheckDnsSubdomain(const std::string& field, const std::string& value) {
  bool ok = !value.empty() && value.size() <= 253;
  for (size_t start = 0; ok;) {
    size_t dot = value.find('.', start);
    ok = IsDnsLabel(value.substr(start, dot == std::string::npos ? dot : dot - start), 253);
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  if (!ok) {
    throw BadInput(field + ": '" + Quoted(value) +
                   "' is not a valid DNS-1123 subdomain (at most 253 of a-z, 0-9, '-' and '.')");
  }
}

KubeApi::KubeApi(KubeEndpoint endpoint)
    : endpoint_(std::move(endpoint)), connections_(std::make_shared<Connections>()) {
  InitCurlOnce();
}

std::pair<long, std::string> KubeApi::Perform(const std::string& method, const std::string& path,
                                              const std::string& body,
                                              const std::string& content_type, void* stream,
                                              long timeout_ms, int* retry_after_s) const {
  std::unique_ptr<CURL, CurlDeleter> c = connections_->Take();
  Transfer own;
  Transfer* t = stream ? static_cast<Transfer*>(stream) : &own;
  auto answer = k8s::Perform(c.get(), endpoint_, method, path, body, content_type, t, timeout_ms);
  if (retry_after_s) *retry_after_s = t->retry_after_s;
  connections_->Give(std::move(c));  // not after a failure: its connection may be broken
  return answer;
}

json KubeApi::Call(const std::string& method, const std::string& path, const json& body,
                   const std::string& content_type) const {
  std::string text = body.is_null() ? "" : body.dump();
  std::pair<long, std::string> answer;
  for (int attempt = 1;; ++attempt) {
    bool retry = false;
    int retry_after_s = -1;
    try {
      answer = Perform(method, path, text, content_type, nullptr, kCallTimeoutMs, &retry_after_s);
      retry = answer.first == 429 || answer.first >= 500;
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kUnavailable || attempt == kTries || method != "GET") throw;
      retry = true;
    }
    // Only reads are repeated: a write that met a 5xx may have been done.
    if (!retry || method != "GET" || attempt == kTries) break;
    // After what a 429 or 503 asks (Retry-After), else a back-off of 0.1, 0.4 s.
    bool asked = (answer.first == 429 || answer.first == 503) && retry_after_s >= 0;
    std::this_thread::sleep_for(
        asked ? std::chrono::milliseconds(1000 * std::min(retry_after_s, kMostRetryAfterS))
              : std::chrono::milliseconds(100 << (2 * (attempt - 1))));
  }
  auto [status, raw] = answer;
  if (status >= 300) throw Refusal(method, path, status, raw);
  json parsed = json::parse(raw, nullptr, false);
  if (parsed.is_discarded()) throw Unavailable("API server: " + path + ": answer is not JSON");
  return parsed;
}

json KubeApi::ListPage(const std::string& path, int limit,
                       const std::string& continue_token) const {
  std::string query = "limit=" + std::to_string(limit);
  if (!continue_token.empty()) query += "&continue=" + Escape(continue_token);
  json page = Call("GET", WithQuery(path, query));
  Items(page, path);
  return page;
}

KubeApi::WatchEnd KubeApi::Watch(const std::string& path, const std::string& resource_version,
                                 int timeout_s, const std::function<bool(const json&)>& event,
                                 const std::atomic<bool>& stop) const {
  std::string url = WithQuery(
      path, "watch=true&allowWatchBookmarks=true&resourceVersion=" + Escape(resource_version) +
                "&timeoutSeconds=" + std::to_string(timeout_s));
  WatchStream stream(event, kMaxAnswerBytes);
  Transfer t;
  t.stop = &stop;
  t.sink = [&](std::string_view piece) { return stream.Feed(piece); };
  auto [status, raw] =
      Perform("GET", url, "", "application/json", &t, (timeout_s + 30) * 1000L, nullptr);
  if (status == 410) return WatchEnd::kExpired;
  if (status >= 300) throw Refusal("GET", url, status, raw);
  if (stream.expired()) return WatchEnd::kExpired;
  if (!stream.failure().empty())
    throw Unavailable("API server: watch " + path + ": " + stream.failure());
  return t.stopped ? WatchEnd::kStopped : WatchEnd::kClosed;
}

json KubeApi::ListPods(const std::string& node) const {
  std::string path = "/api/v1/pods";
  if (!node.empty()) {
    CheckDnsSubdomain("node", node);
    path += "?fieldSelector=" + Escape("spec.nodeName=" + node);
  }
  json pods = json::array();
  for (const json& pod : Items(Call("GET", path), "pod")) {
    // Also checked here, so that a proxy or API that ignores the selector changes nothing.
    if (node.empty() || pod.value("/spec/nodeName"_json_pointer, std::string()) == node)
      pods.push_back(pod);
  }
  return pods;
}

json KubeApi::GetPod(const std::string& ns, const std::string& name) const {
  CheckDnsLabel("namespace", ns);
  CheckDnsSubdomain("pod name", name);
  return Call("GET", "/api/v1/namespaces/" + Escape(ns) + "/pods/" + Escape(name));
}

json KubeApi::ListNodes() const { return Items(Call("GET", "/api/v1/nodes"), "node"); }

void KubeApi::AnnotatePod(const std::string& ns, const std::string& name,
                          const std::map<std::string, std::string>& annotations) const {
  CheckDnsLabel("namespace", ns);
  CheckDnsSubdomain("pod name", name);
  Call("PATCH", "/api/v1/namespaces/" + Escape(ns) + "/pods/" + Escape(name),
       AnnotationPatch(annotations), "application/merge-patch+json");
}

void KubeApi::AnnotateNode(const std::string& name,
                           const std::map<std::string, std::string>& annotations) const {
  CheckDnsSubdomain("node", name);
  Call("PATCH", "/api/v1/nodes/" + Escape(name), AnnotationPatch(annotations),
       "application/merge-patch+json");
}

json KubeApi::GetResourceClaim(const std::string& ns, const std::string& name) const {
  CheckDnsLabel("namespace", ns);
  CheckDnsSubdomain("claim name", name);
  return Call("GET", "/apis/resource.k8s.io/v1/namespaces/" + Escape(ns) + "/resourceclaims/" +
                         Escape(name));
}

void KubeApi::ApplyResourceSlice(const json& slice) const {
  std::string name = slice.at("metadata").at("name");
  CheckDnsSubdomain("slice name", name);
  Call(
      "PATCH",
      "/apis/resource.k8s.io/v1/resourceslices/" + Escape(name) + "?fieldManager=gpumux&force=true",
      slice, "application/apply-patch+yaml");
}

void KubeApi::DeleteResourceSlice(const std::string& name) const {
  CheckDnsSubdomain("slice name", name);
  try {
    Call("DELETE", "/apis/resource.k8s.io/v1/resourceslices/" + Escape(name), nullptr);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kNotFound) throw;
  }
}

void KubeApi::Bind(const std::string& ns, const std::string& name, const std::string& uid,
                   const std::string& node) const {
  CheckDnsLabel("namespace", ns);
  CheckDnsSubdomain("pod name", name);
  CheckDnsSubdomain("node", node);
  json binding = {{"apiVersion", "v1"},
                  {"kind", "Binding"},
                  {"metadata", {{"name", name}, {"namespace", ns}, {"uid", uid}}},
                  {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}}}};
  Call("POST", "/api/v1/namespaces/" + Escape(ns) + "/pods/" + Escape(name) + "/binding", binding);
}

}  // namespace gpumux::k8s
