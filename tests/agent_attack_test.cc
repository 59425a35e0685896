// gpumuxd under attack from local users, as issue 13 tried it: malformed and hostile requests are
// a 400 that says what is wrong and change nothing; slow or silent clients delay no one; one user
// cannot take every connection; 200 clients at once see no error; SIGKILL in a burst of
// admissions loses no tenant that was admitted.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent_fixture.h"

namespace {

using gpumux::testing::AgentTest;
using gpumux::testing::ConnectRaw;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

// Sends `raw` and returns the status of the answer (0 if none came).
int SendRaw(const std::string& socket, const std::string& raw) {
  int fd = ConnectRaw(socket);
  if (fd < 0) return 0;
  timeval timeout{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  (void)!send(fd, raw.data(), raw.size(), MSG_NOSIGNAL);
  char buf[4096];
  ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);
  close(fd);
  if (n < 12) return 0;
  return std::atoi(buf + 9);  // "HTTP/1.1 400 ..."
}

std::string Post(const std::string& path, const std::string& body) {
  return "POST " + path + " HTTP/1.1\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}

double MillisecondsOf(const std::function<void()>& f) {
  auto start = Clock::now();
  f();
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

TEST_F(AgentTest, HostileRequestsAreBadRequestsThatChangeNothing) {
  StartAgent();
  // Tenant ids outside letters, digits and "._-", or too long.
  for (std::string id :
       {std::string("a\nb"), std::string("a\0b", 3), std::string("a\rb"), std::string("a/b"),
        std::string(".."), std::string("."), std::string("a\"b"), std::string("a b"),
        std::string(64, 'x'), std::string("")}) {
    json body = {{"id", id}, {"gpu", 0}, {"memory", "1GiB"}};
    EXPECT_EQ(SendRaw(socket_, Post("/v1/tenants", body.dump())), 400) << json(id).dump();
  }
  // Numbers out of their type's range, wrong types, unknown fields.
  for (const char* body :
       {R"({"id":"a","gpu":0,"memory":"1GiB","owner_uid":1099511627776})",
        R"({"id":"a","gpu":0,"memory":"1GiB","owner_uid":-1})",
        R"({"id":"a","gpu":0,"memory":"1GiB","owner_uid":"root"})",
        R"({"id":"a","gpu":0,"memory":"1GiB","owner_uid":"4294967295"})",
        // "learn" takes the uid of the first process of the tenant's cgroup: none given, no one's.
        R"({"id":"a","gpu":0,"memory":"1GiB","owner_uid":"learn"})",
        R"({"id":"a","gpu":4294967296,"memory":"1GiB"})", R"({"id":"a","gpu":"0","memory":"1GiB"})",
        R"({"id":"a","gpu":0,"memory":-5})", R"({"id":"a","gpu":0,"memory":"1GiB","weight":-1})",
        R"({"id":"a","gpu":0,"memory":"1GiB","weight":4294967297})",
        R"({"id":"a","gpu":0,"shards":18446744073709551615})",
        R"({"id":"a","gpu":0,"memory":"1GiB","join":"yes"})",
        R"({"id":"a","gpu":0,"memory":"1GiB","memroy":"2GiB"})",
        R"({"id":"a","gpu":0,"memory":"1GiB","compute":true})",
        R"({"id":"a","gpu":0,"memory":1073741824,"compute":101})",
        R"({"id":"a","gpus":[0],"memory":[1073741824,0]})", R"(["id","a"])", R"("just a string")",
        "{", "null"}) {
    EXPECT_EQ(SendRaw(socket_, Post("/v1/tenants", body)), 400) << body;
  }
  // Raw bytes that are not UTF-8, in a string and outside one.
  EXPECT_EQ(
      SendRaw(socket_, Post("/v1/tenants", "{\"id\":\"\xff\xfe\",\"gpu\":0,\"memory\":\"1GiB\"}")),
      400);
  EXPECT_EQ(SendRaw(socket_, Post("/v1/tenants", "\xc3\x28")), 400);
  EXPECT_EQ(
      SendRaw(socket_,
              "PUT /v1/gpus/0 HTTP/1.1\r\nContent-Length: 22\r\n\r\n{\"mode\":\"mig\",\"layout\""),
      400);
  // Malformed HTTP: 400; oversized: 413; a path id outside the alphabet: 400.
  EXPECT_EQ(SendRaw(socket_, "GARBAGE\r\n\r\n"), 400);
  EXPECT_EQ(SendRaw(socket_, "GET /v1/health HTTP/1.1\r\nContent-Length: x\r\n\r\n"), 400);
  EXPECT_EQ(SendRaw(socket_, "POST /v1/tenants HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n"), 413);
  EXPECT_EQ(SendRaw(socket_, "DELETE /v1/tenants/..%2f HTTP/1.1\r\n\r\n"), 400);
  EXPECT_EQ(SendRaw(socket_, "GET /v1/tenants/a/b HTTP/1.1\r\n\r\n"), 400);

  // Nothing was admitted, and gpumuxd answers as before.
  EXPECT_TRUE(Call("GET", "/v1/tenants", json(), 200)["tenants"].empty());
  Call("POST", "/v1/tenants", {{"id", "fine"}, {"gpu", 0}, {"memory", "1GiB"}}, 201);
  std::string log = gpumux::testing::Shell("cat " + (dir_ / "agent.log").string()).out;
  EXPECT_EQ(log.find("internal"), std::string::npos) << "no request reached a 500: " << log;
}

TEST_F(AgentTest, ATenantThatRewritesEverySharedByteIsStillHeldToItsQuota) {
  if (getuid() != 0)
    GTEST_SKIP() << "needs root to run the attacker as another user (CI runs as root)";
  StartAgent();
  const uid_t nobody = 65534;
  const uint64_t mib = 1ull << 20, gib = 1ull << 30;
  // The victim fills its 2 GiB and holds it while the attack runs.
  json victim =
      Call("POST", "/v1/tenants", {{"id", "victim"}, {"gpu", 0}, {"memory", "2GiB"}}, 201);
  FILE* victim_program = popen((Env(victim) + GPUMUX_ALLOC_CLIENT + " direct fill " +
                                std::to_string(256 * mib) + " 4 2>/dev/null")
                                   .c_str(),
                               "r");
  for (int i = 0;
       i < 100 &&
       Call("GET", "/v1/tenants/victim", json(), 200).value("used_bytes", 0ull) < 2 * gib;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  json attacker =
      Call("POST", "/v1/tenants",
           {{"id", "attacker"}, {"gpu", 0}, {"memory", "1GiB"}, {"owner_uid", nobody}}, 201);
  // As another user, the attacker overwrites every byte of every file under the runtime directory
  // that it can open for writing and of every file it holds open (its activity file), then
  // allocates until refused.
  std::string out = AsUser(nobody, [&] {
    return Sh(Env(attacker) + GPUMUX_ALLOC_CLIENT + " direct attack " + (dir_ / "run").string() +
              " " + std::to_string(64 * mib))
        .second;
  });
  json result = json::parse(out, nullptr, false);
  ASSERT_TRUE(result.is_object() && result.contains("files_rewritten")) << out;
  EXPECT_GE(result["files_rewritten"].get<int>(), 1)
      << "it rewrote what it could write (its own activity file, which its process holds)";
  EXPECT_EQ(result["allocated"].get<uint64_t>(), gib)
      << "refused at exactly its quota, whatever it wrote";
  EXPECT_EQ(result["last_error"].get<int>(), 2) << "CUDA_ERROR_OUT_OF_MEMORY";

  // The victim's quota and usage are as they were, and its program kept all it held.
  json after = Call("GET", "/v1/tenants/victim", json(), 200);
  EXPECT_EQ(after["quota_bytes"].get<uint64_t>(), 2 * gib);
  EXPECT_EQ(after["used_bytes"].get<uint64_t>(), 2 * gib);
  char line[512] = {0};
  fread(line, 1, sizeof(line) - 1, victim_program);
  EXPECT_EQ(WEXITSTATUS(pclose(victim_program)), 0);
  EXPECT_EQ(json::parse(line)["allocated"].get<uint64_t>(), 2 * gib) << line;

  // A tenant admitted now runs and is held to its quota.
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  json later =
      Call("POST", "/v1/tenants", {{"id", "later"}, {"gpu", 0}, {"memory", "512MiB"}}, 201);
  auto [code, fill] =
      Sh(Env(later) + GPUMUX_ALLOC_CLIENT + " direct fill " + std::to_string(64 * mib) + " 0");
  ASSERT_EQ(code, 0) << fill;
  EXPECT_EQ(json::parse(fill)["allocated"].get<uint64_t>(), 512 * mib) << fill;
}

// A container's processes reach gpumuxd through the tenants' socket, the only one mounted into
// it. Root there is no operator; and a tenant bound to a cgroup lends its memory to no process
// outside that cgroup, whatever the process's uid.
TEST_F(AgentTest, RootOnTheTenantSocketIsNoOperatorAndACgroupBindsATenantsMemory) {
  if (getuid() != 0) GTEST_SKIP() << "needs root: it shows that root is no operator there";
  StartAgent();
  auto status = [&](const std::string& method, const std::string& path, const std::string& body) {
    return gpumux::service::CallUnix(tenant_socket_, method, path, body).first;
  };
  EXPECT_EQ(status("GET", "/v1/health", ""), 200);
  EXPECT_EQ(status("POST", "/v1/tenants", R"({"id": "x", "gpu": 0, "memory": "1GiB"})"), 403);
  EXPECT_EQ(status("PUT", "/v1/gpus/0", R"({"mode": "mps"})"), 403);
  EXPECT_EQ(status("DELETE", "/v1/tenants/x", ""), 403);
  Call("POST", "/v1/tenants", {{"id", "x"}, {"gpu", 0}, {"memory", "1GiB"}, {"cgroup", "a b"}},
       400);

  // This test's own control group (a path component of /proc/self/cgroup), which its children
  // inherit.
  std::string own;
  std::ifstream in("/proc/self/cgroup");
  for (std::string line; std::getline(in, line);) {
    std::string path = line.substr(line.find(':', line.find(':') + 1) + 1);
    if (path.size() > 1) own = path.substr(path.rfind('/') + 1);
  }
  if (own.empty()) GTEST_SKIP() << "this process is in no control group but the root";
  const uint64_t mib = 1ull << 20, gib = 1ull << 30;
  json mine = Call("POST", "/v1/tenants",
                   {{"id", "mine"}, {"gpu", 0}, {"memory", "1GiB"}, {"cgroup", own}}, 201);
  EXPECT_EQ(mine["env"]["GPUMUX_AGENT"], tenant_socket_) << "tenants are told the tenants' socket";
  auto [code, fill] =
      Sh(Env(mine) + GPUMUX_ALLOC_CLIENT + " direct fill " + std::to_string(64 * mib) + " 0");
  ASSERT_EQ(code, 0) << fill;
  EXPECT_EQ(json::parse(fill)["allocated"].get<uint64_t>(), gib);
  json elsewhere = Call(
      "POST", "/v1/tenants",
      {{"id", "elsewhere"}, {"gpu", 0}, {"memory", "1GiB"}, {"cgroup", "pod-no-one-is-in"}}, 201);
  auto [code2, refused] =
      Sh(Env(elsewhere) + GPUMUX_ALLOC_CLIENT + " direct fill " + std::to_string(64 * mib) + " 0");
  ASSERT_EQ(code2, 0) << refused;
  EXPECT_EQ(json::parse(refused)["allocated"].get<uint64_t>(), 0u)
      << "root, but not in the tenant's cgroup";
  EXPECT_EQ(json::parse(refused)["last_error"].get<int>(), 3)
      << "CUDA_ERROR_NOT_INITIALIZED: gpumuxd does not register a process outside the cgroup";
}

TEST_F(AgentTest, FiftySlowClientsDelayNoOne) {
  StartAgent();
  Call("POST", "/v1/tenants", {{"id", "steady"}, {"gpu", 0}, {"memory", "1GiB"}}, 201);
  // 50 clients each send the first bytes of a request, then one byte every 100 ms.
  std::atomic<bool> done{false};
  std::vector<std::thread> slow;
  for (int i = 0; i < 50; ++i) {
    slow.emplace_back([&] {
      int fd = ConnectRaw(socket_);
      std::string request = Post("/v1/tenants", R"({"id":"slow","gpu":0,"memory":"1GiB"})");
      for (size_t k = 0; fd >= 0 && k < request.size() && !done.load(); ++k) {
        if (send(fd, &request[k], 1, MSG_NOSIGNAL) != 1) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      if (fd >= 0) close(fd);
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  double worst = 0;
  for (int i = 0; i < 20; ++i) {
    worst = std::max(worst, MillisecondsOf([&] { Call("GET", "/v1/health", json(), 200); }));
    worst =
        std::max(worst, MillisecondsOf([&] { Call("GET", "/v1/tenants/steady", json(), 200); }));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  done = true;
  for (std::thread& t : slow) t.join();
  EXPECT_LT(worst, 50) << "ms for a well-behaved request beside 50 trickling clients";
}

TEST_F(AgentTest, ARequestNotCompleteInTimeIsAnswered408) {
  StartAgent();
  int fd = ConnectRaw(socket_);
  ASSERT_GE(fd, 0);
  std::string start = "GET /v1/health HT";
  send(fd, start.data(), start.size(), MSG_NOSIGNAL);
  timeval timeout{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  char buf[512] = {0};
  auto start_time = Clock::now();
  ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);
  double seconds = std::chrono::duration<double>(Clock::now() - start_time).count();
  close(fd);
  ASSERT_GT(n, 12);
  EXPECT_EQ(std::string(buf, 12), "HTTP/1.1 408");
  EXPECT_NEAR(seconds, 5.0, 1.0) << "the request deadline";
}

TEST_F(AgentTest, OneUserCannotTakeEveryConnection) {
  if (getuid() != 0) GTEST_SKIP() << "needs root to act as another user (CI runs as root)";
  StartAgent();
  const uid_t nobody = 65534;
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  pid_t child = fork();
  if (child == 0) {
    if (setgid(nobody) != 0 || setuid(nobody) != 0) _exit(3);
    std::vector<int> held;
    for (int i = 0; i < 40; ++i) held.push_back(ConnectRaw(socket_));
    // Past 32, each new one took the place of its oldest idle one, which was answered 429.
    timeval timeout{2, 0};
    setsockopt(held.front(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    char buf[64] = {0};
    recv(held.front(), buf, 12, 0);
    (void)!write(pipefd[1], buf, 12);
    sleep(2);  // holds the others while the parent checks that root still gets through
    _exit(0);
  }
  close(pipefd[1]);
  char buf[64] = {0};
  ASSERT_EQ(read(pipefd[0], buf, 12), 12);
  EXPECT_EQ(std::string(buf, 12), "HTTP/1.1 429");
  EXPECT_LT(MillisecondsOf([&] { Call("GET", "/v1/tenants", json(), 200); }), 50);
  waitpid(child, nullptr, 0);
}

TEST_F(AgentTest, TwoHundredClientsOfMixedRequestsSeeNoError) {
  StartAgentOn({"--sim", "H100", "--gpus", "8"}, {});
  const char* env = std::getenv("GPUMUX_LOAD_SECONDS");
  const double seconds = env ? std::atof(env) : 30;
  std::atomic<int> errors{0}, requests{0};
  std::mutex mu;
  std::vector<std::string> first_errors;
  auto expect = [&](int got, int want, const std::string& what) {
    ++requests;
    if (got == want) return;
    ++errors;
    std::lock_guard<std::mutex> lock(mu);
    if (first_errors.size() < 5) first_errors.push_back(what + ": " + std::to_string(got));
  };
  auto end = Clock::now() + std::chrono::duration<double>(seconds);
  std::vector<std::thread> clients;
  for (int i = 0; i < 200; ++i) {
    clients.emplace_back([&, i] {
      std::string id = "load-" + std::to_string(i);
      json admit = {{"id", id}, {"gpu", i % 8}, {"memory", "64MiB"}};
      while (Clock::now() < end) {
        try {
          expect(gpumux::service::CallUnix(socket_, "POST", "/v1/tenants", admit.dump()).first, 201,
                 "POST " + id);
          expect(gpumux::service::CallUnix(socket_, "GET", "/v1/tenants/" + id).first, 200,
                 "GET " + id);
          expect(gpumux::service::CallUnix(socket_, "GET", "/v1/gpus").first, 200, "GET gpus");
          expect(gpumux::service::CallUnix(socket_, "DELETE", "/v1/tenants/" + id).first, 200,
                 "DELETE " + id);
        } catch (const gpumux::Error& e) {
          expect(0, 1, std::string("no answer: ") + e.what());
        }
      }
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(errors.load(), 0) << (first_errors.empty() ? "" : first_errors[0]);
  EXPECT_GT(requests.load(), 800);
  std::printf("%d requests from 200 clients in %.0f s, no error\n", requests.load(), seconds);
  // Every client ended with its DELETE: nothing is left, in the store or in any ledger.
  EXPECT_TRUE(Call("GET", "/v1/tenants", json(), 200)["tenants"].empty());
  std::string metrics = gpumux::service::CallUnix(socket_, "GET", "/metrics").second;
  EXPECT_EQ(metrics.find("tenant=\"load-"), std::string::npos) << "no tenant left in a ledger";
}

TEST_F(AgentTest, SigkillInABurstOfAdmissionsLosesNoAdmittedTenant) {
  StartAgentOn({"--sim", "H100", "--gpus", "8"}, {});
  std::mutex mu;
  std::set<std::string> admitted;
  std::atomic<bool> stop{false};
  std::vector<std::thread> clients;
  for (int c = 0; c < 8; ++c) {
    clients.emplace_back([&, c] {
      for (int k = 0; !stop.load() && k < 60; ++k) {
        std::string id = "burst-" + std::to_string(c) + "-" + std::to_string(k);
        json admit = {{"id", id}, {"gpu", c}, {"memory", std::to_string(k + 1) + "MiB"}};
        try {
          if (gpumux::service::CallUnix(socket_, "POST", "/v1/tenants", admit.dump()).first == 201) {
            std::lock_guard<std::mutex> lock(mu);
            admitted.insert(id);
          }
        } catch (const gpumux::Error&) {
          return;  // gpumuxd is gone
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  StopAgent(SIGKILL);
  stop = true;
  for (std::thread& t : clients) t.join();
  ASSERT_FALSE(admitted.empty());
  StartAgentOn({"--sim", "H100", "--gpus", "8"}, {});
  json tenants = Call("GET", "/v1/tenants", json(), 200)["tenants"];
  std::set<std::string> restored;
  for (const json& t : tenants) {
    std::string id = t["id"].get<std::string>();
    restored.insert(id);
    // Whole records: each holds what its admission asked for, on the GPU it asked for.
    int c = std::stoi(id.substr(6)), k = std::stoi(id.substr(id.rfind('-') + 1));
    EXPECT_EQ(t["gpu"].get<int>(), c) << id;
    EXPECT_EQ(t["quota_bytes"].get<uint64_t>(), uint64_t(k + 1) << 20) << id;
  }
  for (const std::string& id : admitted)
    EXPECT_TRUE(restored.count(id)) << id << " got 201 and was lost";
  EXPECT_LE(restored.size(), admitted.size() + 8)
      << "at most one admission per client was in flight";
}

}  // namespace
