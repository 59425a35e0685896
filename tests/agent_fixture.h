// The fixture of gpumuxd's end-to-end tests: a NodeTest (its own runtime directory) that starts the
// built gpumuxd on simulated GPUs, or on what NVML shows it, and calls its API.
#pragma once

#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/error.h"
#include "service/http_client.h"
#include "node_fixture.h"

namespace gpumux::testing {

using service::CallUnix;
using nlohmann::json;

// A raw connection to gpumuxd's socket at `path`, for clients that do not speak HTTP as they should
// (or hold connections open); -1 if it cannot connect.
inline int ConnectRaw(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

class AgentTest : public NodeTest {
 protected:
  void SetUp() override {
    NodeTest::SetUp();
    socket_ = (dir_ / "agent.sock").string();
    tenant_socket_ = (dir_ / "t.sock").string();  // socket paths must stay under 108 bytes
  }
  void TearDown() override {
    StopAgent(SIGTERM);
    NodeTest::TearDown();
  }

  // Starts gpumuxd on one simulated H100 and waits until it answers.
  void StartAgent() { StartAgentOn({"--sim", "H100"}, {}); }
  // Starts gpumuxd on what NVML shows it, as on a GPU machine: here, through the simulated NVML
  // that `env` describes (the NVIDIA backend then drives it as it would a real GPU).
  void StartRealAgent(const std::vector<std::pair<std::string, std::string>>& env) {
    StartAgentOn({}, env);
  }

  void StartAgentOn(std::vector<std::string> args,
                    const std::vector<std::pair<std::string, std::string>>& env) {
    args.insert(args.end(),
                {"--socket", socket_, "--tenant-socket", tenant_socket_, "--state",
                 (dir_ / "state.db").string(), "--runtime-dir", (dir_ / "run").string()});
    agent_ = fork();
    if (agent_ == 0) {
      // A test that dies (a sanitizer report, an abort) takes its gpumuxd along, rather than
      // leaving it holding ctest's output pipe until the run's timeout.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      std::string log = (dir_ / "agent.log").string();
      freopen(log.c_str(), "a", stderr);
      for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
      std::vector<std::string> command = launcher_;
      command.push_back(GPUMUXD_BINARY);
      command.insert(command.end(), args.begin(), args.end());
      std::vector<char*> argv;
      for (std::string& a : command) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    for (int i = 0; i < 200; ++i) {
      try {
        if (CallUnix(socket_, "GET", "/v1/health").first == 200) return;
      } catch (const gpumux::Error&) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    FAIL() << "gpumuxd did not start";
  }
  void StopAgent(int sig) {
    if (agent_ <= 0) return;
    kill(agent_, sig);
    waitpid(agent_, nullptr, 0);
    agent_ = 0;
  }

  json Call(const std::string& method, const std::string& path, const json& body, int expect) {
    auto [status, text] = CallUnix(socket_, method, path, body.is_null() ? "" : body.dump());
    EXPECT_EQ(status, expect) << method << " " << path << ": " << text;
    return json::parse(text);
  }

  // Asks GET /v1/tenants/`id` every 20 ms, for up to `seconds`, until its used_bytes is `bytes`
  // and the driver counts its processes holding at least as much (device_bytes): their allocations
  // are done, so gpumuxd's answers to their grants have arrived (a gpumuxd killed between granting
  // and answering leaves the last allocation refused). Returns the last answer.
  json AwaitUsage(const std::string& id, uint64_t bytes, int seconds = 2) {
    auto done = [bytes](const json& t) {
      return t.value("used_bytes", bytes + 1) == bytes &&
             (bytes == 0 || t.value("device_bytes", uint64_t(0)) >= bytes);
    };
    json t = Call("GET", "/v1/tenants/" + id, json(), 200);
    for (int i = 0; i < 50 * seconds && !done(t); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      t = Call("GET", "/v1/tenants/" + id, json(), 200);
    }
    return t;
  }

  // Runs `body` in a child process as user and group `uid` (the caller must be root) and returns
  // the text it returned; empty if it could not become that user.
  static std::string AsUser(uid_t uid, const std::function<std::string()>& body) {
    int pipefd[2];
    if (pipe(pipefd) != 0) return "";
    pid_t child = fork();
    if (child == 0) {
      close(pipefd[0]);
      if (setgid(uid) != 0 || setuid(uid) != 0) _exit(3);
      std::string text = body();
      (void)!write(pipefd[1], text.data(), text.size());
      _exit(0);
    }
    close(pipefd[1]);
    std::string text;
    char buf[4096];
    ssize_t n;
    while ((n = read(pipefd[0], buf, sizeof(buf))) > 0) text.append(buf, size_t(n));
    close(pipefd[0]);
    waitpid(child, nullptr, 0);
    return text;
  }

  // The shell prefix that runs a program as the admitted tenant `admitted` (the POST's answer).
  static std::string Env(const json& admitted) {
    std::string env = "env";
    for (auto& [k, v] : admitted["env"].items()) env += " " + k + "='" + v.get<std::string>() + "'";
    return env + " ASAN_OPTIONS=verify_asan_link_order=0 ";
  }

  std::string socket_, tenant_socket_;
  // What gpumuxd is started by, if not directly (a path, then its arguments before gpumuxd's).
  std::vector<std::string> launcher_;
  pid_t agent_ = 0;
  // What gpumuxd wrote to its log so far.
  std::string Log() const { return Shell("cat " + (dir_ / "agent.log").string()).out; }
};

inline constexpr uid_t kNobody = 65534;

// Makes group `name` of the cgroup v2 hierarchy for a test (a directory root owns, as a pod's),
// below a folder of this test process's own; returns its directory, or an empty path where no v2
// hierarchy can be written here. RemoveV2Group takes both away once their processes are gone.
inline std::filesystem::path MakeV2Group(const std::string& name) {
  for (const char* v2 : {"/sys/fs/cgroup/unified", "/sys/fs/cgroup"}) {
    std::filesystem::path base =
        std::filesystem::path(v2) / ("gpumux-test-" + std::to_string(getpid()));
    std::error_code ec;
    if (!std::filesystem::exists(std::filesystem::path(v2) / "cgroup.controllers")) continue;
    std::filesystem::create_directories(base / name, ec);
    if (!ec) return base / name;
  }
  return {};
}
inline void RemoveV2Group(const std::filesystem::path& group) {
  for (int i = 0; i < 50 && !group.empty(); ++i) {  // a group goes once its last process has
    std::error_code ec;
    std::filesystem::remove(group, ec);
    if (std::filesystem::remove(group.parent_path(), ec) ||
        !std::filesystem::exists(group.parent_path()))
      return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}
// The shell words that run the rest of a command line in `group`.
inline std::string InGroup(const std::filesystem::path& group) {
  return "sh -c 'echo $$ > " + (group / "cgroup.procs").string() + " && exec \"$@\"' sh ";
}

// gpumuxd beside a hostile local user (`nobody`): needs root to act as that user.
class IsolationTest : public AgentTest {
 protected:
  void SetUp() override {
    if (getuid() != 0)
      GTEST_SKIP() << "needs root to run the attacker as another user (CI runs as root)";
    AgentTest::SetUp();
    // `nobody` must reach the test's directory (made by root with the process umask).
    std::filesystem::permissions(
        dir_, std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                  std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
                  std::filesystem::perms::others_exec);
  }
  std::string Run() const { return (dir_ / "run").string(); }
  // Admits tenant `id` on GPU 0 with quota `memory`, owned by `owner`.
  json Admit(const std::string& id, const std::string& memory, uid_t owner = 0) {
    return Call("POST", "/v1/tenants",
                {{"id", id}, {"gpu", 0}, {"memory", memory}, {"owner_uid", owner}}, 201);
  }
};

}  // namespace gpumux::testing
