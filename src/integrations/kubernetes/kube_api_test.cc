#include "integrations/kubernetes/kube_api.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/error_test_support.h"
#include "integrations/kubernetes/extender.h"
#include "integrations/kubernetes/informer.h"
#include "integrations/kubernetes/watch_stream.h"

namespace gpumux::k8s {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// `body` in chunked transfer coding (RFC 9112 7.1), in chunks of `piece` bytes, and its end.
std::string Chunked(const std::string& body, size_t piece) {
  std::string out;
  for (size_t at = 0; at < body.size(); at += piece) {
    std::string chunk = body.substr(at, piece);
    char size[32];
    std::snprintf(size, sizeof(size), "%zx\r\n", chunk.size());
    out += size + chunk + "\r\n";
  }
  return out + "0\r\n\r\n";
}

// An API server as the wire sees it, written from what a Go net/http server sends: answers over a
// few KiB go out with Transfer-Encoding: chunked, in chunks of up to 32 KiB, and, with
// `keep_alive`, the connection is kept open for the client's next request (HTTP/1.1's default).
// `answer` gets each request's head and returns status and body.
class ChunkedApiServer {
 public:
  using Answer = std::function<std::pair<int, std::string>(const std::string& head)>;
  explicit ChunkedApiServer(Answer answer, bool keep_alive = false)
      : answer_(std::move(answer)), keep_alive_(keep_alive) {
    path_ = (fs::temp_directory_path() / ("gpumux_kubeapi_" + std::to_string(getpid()) + "_" +
                                          std::to_string(next_++) + ".sock"))
                .string();
    unlink(path_.c_str());
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd_, 16) != 0)
      ADD_FAILURE() << "cannot listen on " << path_;
    thread_ = std::thread([this] { Serve(); });
  }
  ~ChunkedApiServer() {
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
    unlink(path_.c_str());
  }
  std::string address() const { return "unix:" + path_; }
  std::vector<std::string> heads() {
    std::lock_guard lock(mu_);
    return heads_;
  }
  // Connections accepted so far.
  int connections() const { return connections_.load(); }
  // Header lines ("Name: value\r\n") sent with every answer of `status`.
  void SetHeaders(int status, std::string lines) {
    std::lock_guard lock(mu_);
    headers_[status] = std::move(lines);
  }
  // The next answer whose request head holds `marker` is cut halfway: its head and half of its
  // chunked body go out, then the connection closes, as a connection dropped mid-stream (an API
  // server or load balancer going away) leaves the client.
  void CutNext(std::string marker) {
    std::lock_guard lock(mu_);
    cut_ = std::move(marker);
  }

 private:
  void Serve() {
    for (;;) {
      int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      ++connections_;
      std::string in;
      while (Answer1(c, &in) && keep_alive_) {
      }
      close(c);
    }
  }
  // Reads one request from `c` (what is left of the last in `*in`) and answers it; false once the
  // client has closed or the answer could not be sent.
  bool Answer1(int c, std::string* in) {
    {
      char buf[65536];
      ssize_t n = 0;
      while (in->find("\r\n\r\n") == std::string::npos && (n = recv(c, buf, sizeof(buf), 0)) > 0)
        in->append(buf, size_t(n));
      if (in->find("\r\n\r\n") == std::string::npos) return false;
      std::string head = in->substr(0, in->find("\r\n\r\n") + 2);  // each line with its end
      size_t body_bytes = 0;
      if (size_t at = head.find("Content-Length: "); at != std::string::npos)
        body_bytes = std::stoul(head.substr(at + 16));
      while (in->size() < head.size() + 2 + body_bytes && (n = recv(c, buf, sizeof(buf), 0)) > 0)
        in->append(buf, size_t(n));
      in->erase(0, std::min(in->size(), head.size() + 2 + body_bytes));
      std::string extra;
      {
        std::lock_guard lock(mu_);
        heads_.push_back(head);
      }
      auto [status, body] = answer_(head);
      {
        std::lock_guard lock(mu_);
        extra = headers_[status];
      }
      bool cut = false;
      {
        std::lock_guard lock(mu_);
        cut = !cut_.empty() && head.find(cut_) != std::string::npos;
        if (cut) cut_.clear();
      }
      std::string out =
          "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Type: application/json\r\n" + extra;
      if (cut) {
        std::string chunked = Chunked(body, 32768);
        out += "Transfer-Encoding: chunked\r\n\r\n" + chunked.substr(0, chunked.size() / 2);
        (void)!send(c, out.data(), out.size(), MSG_NOSIGNAL);
        return false;
      }
      if (body.size() > 4096) {
        out += "Transfer-Encoding: chunked\r\n\r\n" + Chunked(body, 32768);
      } else {
        out += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
      }
      for (size_t at = 0; at < out.size();) {
        ssize_t sent = send(c, out.data() + at, out.size() - at, MSG_NOSIGNAL);
        if (sent <= 0) return false;
        at += size_t(sent);
      }
    }
    return true;
  }
  static inline std::atomic<int> next_{0};
  Answer answer_;
  bool keep_alive_;
  std::atomic<int> connections_{0};
  std::map<int, std::string> headers_;
  std::string cut_;
  std::string path_;
  int fd_ = -1;
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> heads_;
};

json PodList(int n) {
  json items = json::array();
  for (int i = 0; i < n; ++i) {
    items.push_back({{"metadata",
                      {{"name", "pod-" + std::to_string(i)},
                       {"namespace", "default"},
                       {"uid", "00000000-0000-4000-8000-" + std::to_string(100000000000 + i)},
                       {"annotations", {{"padding", std::string(200, 'x')}}}}},
                     {"spec", {{"nodeName", "node-" + std::to_string(i % 50)}}}});
  }
  return {{"kind", "PodList"}, {"apiVersion", "v1"}, {"items", items}};
}

TEST(KubeApi, ReadsChunkedAnswersOfManyMegabytes) {
  std::string list = PodList(20000).dump();
  ASSERT_GT(list.size(), 4u << 20) << "more than the old 1 MiB limit on answers";
  ChunkedApiServer server([&](const std::string&) { return std::make_pair(200, list); });
  KubeApi api(server.address());
  EXPECT_EQ(api.ListPods().size(), 20000u);
  std::vector<std::string> heads = server.heads();
  ASSERT_EQ(heads.size(), 1u);
  EXPECT_EQ(heads[0].rfind("GET /api/v1/pods HTTP/1.1", 0), 0u) << heads[0];
}

TEST(KubeApi, SendsTheBearerTokenAsItRotates) {
  auto dir = fs::temp_directory_path() / ("gpumux_kubeapi_sa_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "token") << "first\n";
  ChunkedApiServer server([](const std::string&) {
    return std::make_pair(200, std::string(R"({"kind":"NodeList","items":[]})"));
  });
  KubeEndpoint e;
  e.server = server.address();
  e.token_file = (dir / "token").string();
  KubeApi api(e);
  api.ListNodes();
  std::ofstream(dir / "token") << "second\n";
  api.ListNodes();
  std::vector<std::string> heads = server.heads();
  ASSERT_EQ(heads.size(), 2u);
  EXPECT_NE(heads[0].find("Authorization: Bearer first\r\n"), std::string::npos) << heads[0];
  EXPECT_NE(heads[1].find("Authorization: Bearer second\r\n"), std::string::npos) << heads[1];
  fs::remove_all(dir);
}

// As client-go's clients: one connection for many calls, a User-Agent that names the program and
// its version (API priority and fairness and audit logs key on it), compressed answers accepted.
TEST(KubeApi, KeepsOneConnectionForManyCallsAndSaysWhoItIs) {
  ChunkedApiServer server(
      [](const std::string&) {
        return std::make_pair(200, std::string(R"({"kind":"NodeList","items":[]})"));
      },
      /*keep_alive=*/true);
  KubeApi api(server.address());
  for (int i = 0; i < 20; ++i) api.ListNodes();
  api.AnnotateNode("n1", {{"a", "b"}});  // a write with a body, on the same connection
  EXPECT_EQ(server.heads().size(), 21u);
  EXPECT_EQ(server.connections(), 1) << "a new connection per call";
  std::string head = server.heads().back();
  EXPECT_NE(head.find("User-Agent: gpumux"), std::string::npos) << head;
  EXPECT_NE(head.find("/" GPUMUX_VERSION "\r\n"), std::string::npos) << head;
  EXPECT_NE(head.find("Accept-Encoding: "), std::string::npos) << head;
}

// A 429 or 503 that says when to come back (Retry-After, in seconds) is read again then, not
// after the client's own back-off; a write is still never repeated.
TEST(KubeApi, ReadsAgainWhenA429AsksAndNeverRepeatsAWrite) {
  std::atomic<int> calls{0};
  ChunkedApiServer server([&](const std::string&) {
    return ++calls == 1 ? std::make_pair(429, std::string(R"({"message":"too many requests"})"))
                        : std::make_pair(200, std::string(R"({"kind":"NodeList","items":[]})"));
  });
  server.SetHeaders(429, "Retry-After: 1\r\n");
  KubeApi api(server.address());
  auto start = std::chrono::steady_clock::now();
  EXPECT_NO_THROW(api.ListNodes());
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(calls.load(), 2);
  EXPECT_GE(waited, 0.95) << "asked to wait 1 s";
  EXPECT_LT(waited, 5.0);
  calls = 0;
  EXPECT_THROW(api.AnnotateNode("n1", {{"a", "b"}}), Error);
  EXPECT_EQ(calls.load(), 1) << "a write is not repeated";
}

// Issue 40: a watch whose connection drops mid-event is watched again from the last version the
// informer saw, with no list (client-go's reflector relists only on 410 Gone).
TEST(KubeApi, AWatchCutMidStreamIsResumedFromTheLastVersionWithoutAList) {
  std::atomic<int> lists{0}, watches{0};
  auto event = [](const std::string& name, int version) {
    return json{{"type", "ADDED"},
                {"object",
                 {{"metadata",
                   {{"name", name},
                    {"namespace", "default"},
                    {"resourceVersion", std::to_string(version)}}}}}}
        .dump();
  };
  ChunkedApiServer server([&](const std::string& head) {
    if (head.find("watch=true") == std::string::npos) {
      ++lists;
      return std::make_pair(200, json{{"kind", "PodList"},
                                      {"metadata", {{"resourceVersion", "5"}}},
                                      {"items", json::array()}}
                                     .dump());
    }
    ++watches;
    // A whole event, then one the cut breaks (padded past a chunk's half).
    return std::make_pair(200, event("whole", 6) + "\n" + event(std::string(9000, 'x'), 7) + "\n");
  });
  server.CutNext("watch=true");
  KubeApi api(server.address());
  std::mutex mu;
  std::set<std::string> seen;
  Informer informer(&api, "/api/v1/pods",
                    {[&](const json& p) {
                       std::lock_guard lock(mu);
                       seen.insert(p["metadata"]["name"].get<std::string>().substr(0, 8));
                     },
                     [](const json&) {}});
  std::atomic<bool> stop{false};
  std::thread running([&] { informer.Run(stop, std::chrono::milliseconds(10)); });
  for (int i = 0; i < 300 && watches.load() < 3; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  stop = true;
  running.join();
  EXPECT_GE(watches.load(), 3);
  EXPECT_EQ(lists.load(), 1) << "a cut watch is resumed, not listed again";
  std::vector<std::string> heads = server.heads();
  ASSERT_GE(heads.size(), 3u);
  // The second watch, after the cut, starts from the whole event's version.
  EXPECT_NE(heads[2].find("resourceVersion=6&"), std::string::npos) << heads[2];
  EXPECT_TRUE(seen.count("whole"));
}

TEST(KubeApi, RetriesReadsThatMeetA5xxButNeverWrites) {
  std::atomic<int> calls{0};
  ChunkedApiServer server([&](const std::string&) {
    return ++calls == 1 ? std::make_pair(503, std::string(R"({"message":"busy"})"))
                        : std::make_pair(200, std::string(R"({"kind":"NodeList","items":[]})"));
  });
  KubeApi api(server.address());
  EXPECT_NO_THROW(api.ListNodes());
  EXPECT_EQ(calls.load(), 2) << "the read was tried again";
  calls = 0;
  EXPECT_EQ(ErrorCodeOf([&] { api.AnnotateNode("n1", {{"a", "b"}}); }), ErrorCode::kUnavailable);
  EXPECT_EQ(calls.load(), 1) << "a write that met a 5xx may have been done: not repeated";
}

TEST(KubeApi, NamesThatAreNotKubernetesNamesNeverReachTheApiServer) {
  ChunkedApiServer server(
      [](const std::string&) { return std::make_pair(200, std::string("{}")); });
  KubeApi api(server.address());
  for (const std::string& name :
       {std::string("x HTTP/1.1\r\n\r\nDELETE /api/v1/namespaces/kube-system/pods/coredns"),
        std::string("../nodes/n1"), std::string("a?b"), std::string("a b"), std::string("A"),
        std::string(254, 'a'), std::string("")}) {
    EXPECT_EQ(ErrorCodeOf([&] { api.GetPod("default", name); }), ErrorCode::kBadInput) << name;
    EXPECT_EQ(ErrorCodeOf([&] { api.Bind("default", name, "u", "n1"); }), ErrorCode::kBadInput);
    EXPECT_EQ(ErrorCodeOf([&] { api.Bind("default", "p", "u", name); }), ErrorCode::kBadInput);
    EXPECT_EQ(ErrorCodeOf([&] { api.GetPod(name, "p"); }), ErrorCode::kBadInput);
  }
  EXPECT_EQ(ErrorCodeOf([&] { api.GetPod(std::string(64, 'a'), "p"); }), ErrorCode::kBadInput)
      << "a namespace is a label: 63 at most";
  EXPECT_TRUE(server.heads().empty()) << server.heads()[0];
  EXPECT_NO_THROW(api.GetPod("kube-system", "coredns-5d78c9869d-abcde.x"));
}

TEST(KubeApi, TheExtenderRefusesASmuggledBindSayingWhyAndSendsNothing) {
  ChunkedApiServer server(
      [](const std::string&) { return std::make_pair(200, std::string("{}")); });
  KubeApi api(server.address());
  Extender extender(ExtenderConfig{}, &api);
  json args = {{"PodName", "x\r\nDELETE /api/v1/namespaces/kube-system/pods/coredns"},
               {"PodNamespace", "default"},
               {"PodUID", "0b5c9e2a-0000-4000-8000-000000000001"},
               {"Node", "node-a"}};
  service::HttpRequest request;
  request.method = "POST";
  request.path = "/gpumux/bind";
  request.body = args.dump();
  // ExtenderBindingResult's Error, in a 200 (kube-scheduler reads no other answer's body).
  auto refusal = [&] {
    service::HttpResponse answer = extender.Handle(request);
    EXPECT_EQ(answer.status, 200);
    return json::parse(answer.body).value("Error", "");
  };
  EXPECT_NE(refusal().find("PodName"), std::string::npos);
  args["PodName"] = "p";
  args["PodNamespace"] = "../kube-system";
  request.body = args.dump();
  EXPECT_NE(refusal().find("PodNamespace"), std::string::npos);
  args["PodNamespace"] = "default";
  args["PodUID"] = "a\"b";
  request.body = args.dump();
  EXPECT_NE(refusal().find("PodUID"), std::string::npos);
  EXPECT_TRUE(server.heads().empty()) << "nothing was sent to the API server";
}

// In a pod: HTTPS to KUBERNETES_SERVICE_HOST:PORT, the server's certificate checked against the
// service account's CA, answers chunked, and a rotated CA taken at the next connection without a
// restart. The server is `openssl s_server -HTTP`, which sends each file as a whole HTTP answer.
TEST(KubeApi, InClusterSpeaksHttpsCheckedAgainstTheServiceAccountsCa) {
  if (std::system("command -v openssl >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "needs the openssl program (scripts/install-deps.sh installs it)";
  auto dir = fs::temp_directory_path() / ("gpumux_kubeapi_tls_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "sa");
  fs::create_directories(dir / "www" / "api" / "v1");
  std::string make_cert = "cd " + dir.string() +
                          " && openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "
                          "/CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 -keyout key.pem "
                          "-out sa/ca.crt >/dev/null 2>&1";
  ASSERT_EQ(std::system(make_cert.c_str()), 0);
  std::ofstream(dir / "sa" / "token") << "in-cluster-token";
  std::string list = PodList(100).dump();  // ListNodes reads any list's items
  std::string chunked =
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
      "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
  chunked += Chunked(list, 1000);
  std::ofstream(dir / "www" / "api" / "v1" / "nodes", std::ios::binary) << chunked;
  // A free port, then the server on it.
  int probe = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  bind(probe, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  getsockname(probe, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  close(probe);
  // s_server with the certificate and key named, on that port.
  auto serve = [&](const std::string& cert, const std::string& key) {
    std::string command = "cd " + (dir / "www").string() + " && exec openssl s_server -quiet " +
                          "-HTTP -cert " + cert + " -key " + key +
                          " -accept 127.0.0.1:" + std::to_string(port) + " >/dev/null 2>&1";
    pid_t pid = fork();
    if (pid == 0) {
      execl("/bin/sh", "sh", "-c", command.c_str(), nullptr);
      _exit(127);
    }
    return pid;
  };
  pid_t server = serve("../sa/ca.crt", "../key.pem");
  setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1", 1);
  setenv("KUBERNETES_SERVICE_PORT", std::to_string(port).c_str(), 1);
  setenv("GPUMUX_SERVICE_ACCOUNT_DIR", (dir / "sa").c_str(), 1);
  KubeApi api("in-cluster");
  EXPECT_EQ(api.address(), "https://127.0.0.1:" + std::to_string(port));
  auto list_when_up = [&] {
    json nodes;
    for (int i = 0; i < 50 && nodes.is_null(); ++i) {  // s_server takes a moment to listen
      try {
        nodes = api.ListNodes();
      } catch (const Error& e) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
    return nodes;
  };
  EXPECT_EQ(list_when_up().size(), 100u);
  // The cluster's CA rotates: the server comes back with a certificate of a new CA, which the
  // service account's ca.crt now holds. The same client goes on, as it reads the CA anew.
  kill(server, SIGTERM);
  waitpid(server, nullptr, 0);
  std::string rotate = "cd " + dir.string() +
                       " && openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "
                       "/CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 -keyout key2.pem "
                       "-out ca2.crt >/dev/null 2>&1 && cp ca2.crt sa/ca.crt";
  ASSERT_EQ(std::system(rotate.c_str()), 0);
  server = serve("../ca2.crt", "../key2.pem");
  EXPECT_EQ(list_when_up().size(), 100u) << "the rotated CA was not read";
  // Another CA does not vouch for that server.
  std::ofstream(dir / "sa" / "ca.crt")
      << "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
  EXPECT_EQ(ErrorCodeOf([&] { api.ListNodes(); }), ErrorCode::kUnavailable);
  kill(server, SIGTERM);
  waitpid(server, nullptr, 0);
  unsetenv("KUBERNETES_SERVICE_HOST");
  unsetenv("KUBERNETES_SERVICE_PORT");
  unsetenv("GPUMUX_SERVICE_ACCOUNT_DIR");
  fs::remove_all(dir);
}

TEST(KubeApi, AKubeconfigGivesServerCaAndCredentialsOfItsCurrentContext) {
  auto path = fs::temp_directory_path() / ("gpumux_kubeconfig_" + std::to_string(getpid()));
  std::ofstream(path) << R"(apiVersion: v1
kind: Config
current-context: prod
contexts:
  - name: dev
    context: {cluster: dev, user: dev}
  - name: prod
    context: {cluster: prod, user: admin}
clusters:
  - name: dev
    cluster: {server: "https://dev:6443"}
  - name: prod
    cluster:
      server: https://10.0.0.1:6443
      certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==
users:
  - name: dev
    user: {token: nope}
  - name: admin
    user:
      token: s3cret
      client-key: keys/admin.key
)";
  KubeEndpoint e = ResolveApiServer("kubeconfig:" + path.string());
  EXPECT_EQ(e.server, "https://10.0.0.1:6443");
  EXPECT_EQ(e.ca_pem, "-----BEGIN CERTIFICATE-----\n");
  EXPECT_EQ(e.token, "s3cret");
  EXPECT_EQ(e.client_key_file, path.parent_path().string() + "/keys/admin.key")
      << "relative to the kubeconfig";
  std::ofstream(path) << "current-context: gone\ncontexts: []\n";
  EXPECT_EQ(ErrorCodeOf([&] { ResolveApiServer("kubeconfig:" + path.string()); }),
            ErrorCode::kBadInput);
  fs::remove(path);
  EXPECT_EQ(ResolveApiServer("127.0.0.1:8001").server, "http://127.0.0.1:8001");
  EXPECT_EQ(ErrorCodeOf([] { ResolveApiServer("nonsense"); }), ErrorCode::kBadInput);
}

TEST(WatchStream, EventsCutAnywhereArriveWholeAndAnErrorEndsTheStream) {
  std::vector<std::string> names;
  WatchStream stream(
      [&](const json& e) {
        names.push_back(e["object"]["metadata"].value("name", "(bookmark)"));
        return true;
      },
      1 << 20);
  std::string body = R"({"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"5"}}})"
                     "\nnot json\n"
                     R"({"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}})"
                     "\n"
                     R"({"type":"DELETED","object":{"metadata":{"name":"b"}}})"
                     "\n";
  for (size_t at = 0; at < body.size(); at += 7) ASSERT_TRUE(stream.Feed(body.substr(at, 7)));
  EXPECT_EQ(names, (std::vector<std::string>{"a", "(bookmark)", "b"}));
  EXPECT_FALSE(
      stream.Feed(R"({"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired"}})"
                  "\n"));
  EXPECT_TRUE(stream.expired());
  WatchStream failing([](const json&) { return true; }, 1 << 20);
  EXPECT_FALSE(failing.Feed(R"({"type":"ERROR","object":{"code":500}})"
                            "\n"));
  EXPECT_FALSE(failing.expired());
  EXPECT_NE(failing.failure().find("500"), std::string::npos);
  WatchStream bounded([](const json&) { return true; }, 16);
  EXPECT_FALSE(bounded.Feed(std::string(100, 'x'))) << "a line past the bound, unfinished";
}

}  // namespace
}  // namespace gpumux::k8s
