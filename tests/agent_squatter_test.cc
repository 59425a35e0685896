// gpumuxd against a local user who takes what others wait on, as issue 37 tried it: a flock on any
// file it can open (the view tenants map, gpumuxd's lock files), a pid it recycles for a
// neighbour's next process, a lease on or a fallocate of its own activity file (a sealed memory file since), connections held
// open from a container's root or on the metrics port. Each test runs the attack as `nobody` (or as
// root in a container of its own) and shows gpumuxd and a neighbour going on.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "agent_fixture.h"
#include "base/clock.h"
#include "service/http_client.h"
#include "node/ledger/activity.h"

namespace {

using gpumux::testing::ConnectRaw;
using gpumux::testing::IsolationTest;
using gpumux::testing::kMiB;
using gpumux::testing::kNobody;
using nlohmann::json;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A process that runs `body` as `uid` (after joining the cgroup directories `cgroups`, as root),
// writes what it returns as one line for the test, and then holds whatever it took until killed.
class Squatter {
 public:
  Squatter(uid_t uid, const std::function<std::string()>& body,
           const std::vector<fs::path>& cgroups = {}) {
    int out[2];
    if (pipe(out) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      close(out[0]);
      for (const fs::path& g : cgroups) std::ofstream(g / "cgroup.procs") << getpid() << "\n";
      if (uid != 0 && (setgid(uid) != 0 || setuid(uid) != 0)) _exit(3);
      std::string line = body() + "\n";
      (void)!write(out[1], line.data(), line.size());
      for (;;) pause();
    }
    close(out[1]);
    char buf[4096];
    ssize_t n;
    while (line_.find('\n') == std::string::npos && (n = read(out[0], buf, sizeof(buf))) > 0)
      line_.append(buf, size_t(n));
    close(out[0]);
    line_ = line_.substr(0, line_.find('\n'));
  }
  ~Squatter() { End(); }
  void End() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = 0;
  }
  const std::string& line() const { return line_; }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = 0;
  std::string line_;
};

// Kills `squatter` if `work` has not finished within `seconds` (so that a fix taken out makes the
// test fail, not hang); returns how long `work` took.
double TimedAgainst(Squatter& squatter, double seconds, const std::function<void()>& work) {
  std::atomic<bool> done{false};
  std::thread watchdog([&] {
    auto start = Clock::now();
    while (!done.load() && SecondsSince(start) < seconds)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (!done.load()) squatter.End();
  });
  auto start = Clock::now();
  work();
  double took = SecondsSince(start);
  done.store(true);
  watchdog.join();
  return took;
}

// Sends `request` on an open connection and returns the status of the answer (0 if none).
int Ask(int fd, const std::string& request) {
  (void)!send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  timeval timeout{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  char buf[4096] = {0};
  ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);
  return n >= 12 ? std::atoi(buf + 9) : 0;
}

// A TCP port free on the loopback now (for gpumuxd's metrics listener); 0 if none was found.
int FreeLoopbackPort() {
  int probe = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(probe, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(probe, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  close(probe);
  return port;
}

std::string Post(const std::string& path, const std::string& body) {
  return "POST " + path + " HTTP/1.1\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}

class SquatterTest : public IsolationTest {
 protected:
  // The tenant's activity file, as its processes get it: this process registered under it on the
  // tenants' socket, the file handed with the answer (-1 if none came).
  int ActivityOf(const std::string& tenant) {
    int fd = -1;
    gpumux::service::CallUnix(tenant_socket_, "POST", "/v1/grants",
                            json({{"tenant", tenant}, {"bytes", 0}}).dump(), &fd);
    return fd;
  }

  // Holds, as `nobody`, an exclusive flock on every file under the runtime directory and beside
  // the sockets that it can open (but the simulated GPU's state, which stands for hardware); its
  // line lists them.
  Squatter LockEverything() {
    return Squatter(kNobody, [&] {
      json locked = json::array();
      for (const fs::path& root : {fs::path(Run()), dir_}) {
        std::error_code ec;
        for (const auto& e : fs::recursive_directory_iterator(
                 root, fs::directory_options::skip_permission_denied, ec)) {
          if (!e.is_regular_file() || e.path().filename().string().rfind("sim-", 0) == 0)
            continue;
          int fd = open(e.path().c_str(), O_RDONLY | O_NONBLOCK);
          if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0)
            locked.push_back(e.path().filename().string());
        }
      }
      return locked.dump();
    });
  }
  // A program of tenant `admitted` that allocates `bytes` in 64 MiB steps; returns what it got.
  uint64_t Allocate(const json& admitted, uint64_t bytes) {
    auto [code, out] = Sh(Env(admitted) + GPUMUX_ALLOC_CLIENT + " direct fill " +
                          std::to_string(64 * kMiB) + " 0 2>&1 | tail -1");
    json j = json::parse(out, nullptr, false);
    EXPECT_TRUE(code == 0 && j.is_object()) << out;
    return j.is_object() ? std::min<uint64_t>(j.value("allocated", uint64_t(0)), bytes) : 0;
  }
};

TEST_F(SquatterTest, AStrangersLocksOnTheViewAndTheLockFilesFreezeNothing) {
  StartAgent();
  json victim = Admit("victim", "512MiB");
  Squatter squatter = LockEverything();
  json locked = json::parse(squatter.line(), nullptr, false);
  ASSERT_TRUE(locked.is_array()) << squatter.line();
  EXPECT_NE(std::find(locked.begin(), locked.end(), "gpu0.ledger"), locked.end())
      << "the view is readable by all, so the stranger holds a lock on it: " << locked;
  for (const std::string& lock : {"gpumuxd.lock", "agent.sock.lock", "t.sock.lock"})
    EXPECT_EQ(std::find(locked.begin(), locked.end(), lock), locked.end())
        << lock << " can be opened by another user: " << locked;
  // Meanwhile: a neighbour's new program, an admission, the list, a removal and a restart.
  double took = TimedAgainst(squatter, 30, [&] {
    EXPECT_EQ(Allocate(victim, 512 * kMiB), 512 * kMiB);
    json later = Admit("later", "256MiB");
    EXPECT_EQ(Allocate(later, 256 * kMiB), 256 * kMiB);
    Call("GET", "/v1/tenants", json(), 200);
    Call("DELETE", "/v1/tenants/later", json(), 200);
    StopAgent(SIGTERM);
    StartAgent();
    EXPECT_EQ(Allocate(victim, 512 * kMiB), 512 * kMiB);
  });
  EXPECT_GT(squatter.pid(), 0) << "the lock holder had to be killed for gpumuxd to go on";
  EXPECT_LT(took, 25);
}

TEST_F(SquatterTest, ALockFileAnOlderGpumuxdLeftOpenToAllKeepsNoNewOneFromStarting) {
  StartAgent();
  StopAgent(SIGTERM);
  // As an older gpumuxd left them: 0644, so that anyone could open them and wait in flock for the
  // moment gpumuxd exits.
  for (const std::string& lock : {Run() + "/gpumuxd.lock", socket_ + ".lock"})
    ASSERT_EQ(chmod(lock.c_str(), 0644), 0) << lock;
  Squatter squatter = LockEverything();
  json locked = json::parse(squatter.line(), nullptr, false);
  ASSERT_NE(std::find(locked.begin(), locked.end(), "gpumuxd.lock"), locked.end()) << locked;
  StartAgent();  // fails the test when gpumuxd exits, naming the stranger's hold
  for (const std::string& lock : {Run() + "/gpumuxd.lock", socket_ + ".lock"}) {
    struct stat st;
    ASSERT_EQ(stat(lock.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u) << lock;
  }
  // And one gpumuxd per directory still holds.
  gpumux::testing::ShellResult second = gpumux::testing::Shell(
      std::string(GPUMUXD_BINARY) + " --sim H100 --socket " + socket_ + " --tenant-socket " +
      tenant_socket_ + " --state " + (dir_ / "state2.db").string() + " --runtime-dir " + Run() +
      " 2>&1");
  EXPECT_EQ(second.exit_code, 2) << second.out;
}

// The attacker connects, hands its connection to a child and exits; the test makes the victim's
// next process take the attacker's pid (ns_last_pid stands for the ~23,000 forks a second that
// wrap pid_max); then the child sends a registration on the dead process's connection.
TEST_F(SquatterTest, ARecycledPidIsNotRegisteredAsTheAttackersAndItsNewOwnerRegistersAsItself) {
  StartAgent();
  json victim = Admit("victim", "512MiB");
  Admit("attacker", "512MiB", kNobody);
  int pass[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, pass), 0);
  pid_t dead = 0;
  for (int attempt = 0; attempt < 20; ++attempt) {
    pid_t connector = fork();
    if (connector == 0) {
      if (setgid(kNobody) != 0 || setuid(kNobody) != 0) _exit(3);
      int fd = ConnectRaw(tenant_socket_);
      if (fork() == 0) {  // keeps the connection after its maker exits
        char go;
        if (read(pass[1], &go, 1) == 1) {
          int status = Ask(fd, Post("/v1/grants", R"({"tenant": "attacker", "bytes": 0})"));
          (void)!write(pass[1], &status, sizeof(status));
        }
        _exit(0);
      }
      _exit(0);
    }
    waitpid(connector, nullptr, 0);
    // The victim's next process gets the connector's pid.
    std::ofstream("/proc/sys/kernel/ns_last_pid") << connector - 1 << std::flush;
    int ready[2];
    ASSERT_EQ(pipe(ready), 0);
    pid_t next = fork();
    if (next == 0) {
      char go;
      close(ready[1]);
      (void)!read(ready[0], &go, 1);  // waits until the attacker has spoken
      auto [status, text] = gpumux::service::CallUnix(tenant_socket_, "POST", "/v1/grants",
                                                    R"({"tenant": "victim", "bytes": 0})");
      _exit(status == 200 ? 0 : status == 409 ? 9 : 1);
    }
    close(ready[0]);
    if (next != connector) {
      close(ready[1]);
      kill(next, SIGKILL);
      waitpid(next, nullptr, 0);
      continue;  // another process took the pid first: try again
    }
    dead = connector;
    char go = 1;
    ASSERT_EQ(write(pass[0], &go, 1), 1);
    int attacker_status = 0;
    ASSERT_EQ(read(pass[0], &attacker_status, sizeof(attacker_status)),
              ssize_t(sizeof(attacker_status)));
    EXPECT_EQ(attacker_status, 403) << "a registration on a dead process's connection";
    ASSERT_EQ(write(ready[1], &go, 1), 1);
    close(ready[1]);
    int status = 0;
    waitpid(next, &status, 0);
    EXPECT_EQ(WEXITSTATUS(status), 0) << "the victim's process was refused (9: 409, taken)";
    break;
  }
  close(pass[0]);
  close(pass[1]);
  if (!dead) GTEST_SKIP() << "could not give a new process a chosen pid (ns_last_pid)";
  json t = Call("GET", "/v1/tenants/attacker", json(), 200);
  for (const json& p : t.value("processes", json::array()))
    EXPECT_NE(p.value("pid", 0), dead) << "the victim's process is listed under the attacker";
}

// A container's root, the tenant's owner, holds the activity file gpumuxd handed its process and
// takes a read lease on it (the file is root's, so root may): an open for writing would then wait
// for the lease to be given up, lease-break-time (45 s by default), unless it is non-blocking.
TEST_F(SquatterTest, ALeaseOnItsOwnActivityFileDelaysNoRestart) {
  StartAgent();
  json victim = Admit("victim", "512MiB");
  Admit("attacker", "512MiB", 0);
  Squatter squatter(0, [&] {
    signal(SIGIO, SIG_IGN);  // told to give the lease up, it does not
    int fd = ActivityOf("attacker");
    return std::string(fd >= 0 && fcntl(fd, F_SETLEASE, F_RDLCK) == 0 ? "leased" : "no lease");
  });
  ASSERT_EQ(squatter.line(), "leased");
  StopAgent(SIGTERM);
  double took = TimedAgainst(squatter, 60, [&] { StartAgent(); });
  EXPECT_LT(took, 3) << "gpumuxd waited on the tenant's lease";
  EXPECT_EQ(Allocate(victim, 512 * kMiB), 512 * kMiB);
}

// The activity file takes no filesystem's room and cannot be made to: its owner's processes hold
// a memory file sealed at its size, and nothing of it lies in the runtime folder.
TEST_F(SquatterTest, TheActivityFileCannotBeGrownAndTakesNoRoomOnTheRuntimeFilesystem) {
  StartAgent();
  Admit("victim", "512MiB");
  Admit("attacker", "512MiB", kNobody);
  Squatter squatter(kNobody, [&] {
    int fd = ActivityOf("attacker");
    if (fd < 0) return std::string("no activity file");
    bool grown = ftruncate(fd, 64 * kMiB) == 0 || posix_fallocate(fd, 0, 64 * kMiB) == 0 ||
                 fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 64 * kMiB) == 0 ||
                 fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE) == 0;
    struct stat st;
    fstat(fd, &st);
    return std::string(grown ? "grown" : "kept") + " " + std::to_string(st.st_size);
  });
  EXPECT_EQ(squatter.line(), "kept " + std::to_string(sizeof(gpumux::node::ActivityWords)));
  EXPECT_FALSE(fs::exists(Run() + "/activity")) << "no activity file in the runtime folder";
  // What a full filesystem could fault on later is allocated now: gpumuxd's ledgers.
  auto sparse = [](const std::string& path) {
    struct stat st;
    return stat(path.c_str(), &st) != 0 || uint64_t(st.st_blocks) * 512 < uint64_t(st.st_size);
  };
  for (const std::string& path : {Run() + "/gpu0.ledger", Run() + "/private/gpu0.ledger"})
    EXPECT_FALSE(sparse(path)) << path << " is sparse";
}

TEST_F(SquatterTest, AContainersRootHoldingConnectionsLeavesAnotherContainersRootItsOwn) {
  fs::path base;
  for (const char* hierarchy : {"/sys/fs/cgroup/pids", "/sys/fs/cgroup/unified", "/sys/fs/cgroup"}) {
    fs::path b = fs::path(hierarchy) / ("gpumux-squat-" + std::to_string(getpid()));
    std::error_code ec;
    if (fs::create_directory(b, ec) || fs::is_directory(b)) {
      base = b;
      break;
    }
  }
  if (base.empty()) GTEST_SKIP() << "needs a writable cgroup hierarchy for two containers";
  fs::create_directories(base / "one");
  fs::create_directories(base / "two");
  StartAgent();
  {
    // Root in container one holds 40 connections open on the tenants' socket, idle.
    Squatter squatter(
        0,
        [&] {
          int opened = 0;
          for (int i = 0; i < 40; ++i) opened += ConnectRaw(tenant_socket_) >= 0;
          return std::to_string(opened);
        },
        {base / "one"});
    ASSERT_EQ(squatter.line(), "40");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    // Root in container two asks at once.
    Squatter other(0, [&] {
      return std::to_string(gpumux::service::CallUnix(tenant_socket_, "GET", "/v1/health").first);
    }, {base / "two"});
    EXPECT_EQ(other.line(), "200") << "one container's root took every root's connections";
    // And within container one, the newest request is answered too: the oldest idle connection
    // makes way for it.
    Squatter same(0, [&] {
      return std::to_string(gpumux::service::CallUnix(tenant_socket_, "GET", "/v1/health").first);
    }, {base / "one"});
    EXPECT_EQ(same.line(), "200");
  }
  std::error_code ec;
  fs::remove(base / "one", ec);
  fs::remove(base / "two", ec);
  fs::remove(base, ec);
}

TEST_F(SquatterTest, AScrapeIsAnsweredWhateverAStrangerHoldsOnTheMetricsPort) {
  const int port = FreeLoopbackPort();
  ASSERT_GT(port, 0);
  StartAgentOn({"--sim", "H100", "--metrics-listen", "0.0.0.0:" + std::to_string(port)}, {});
  // `nobody` holds 40 idle connections from another address and 40 from the scraper's own.
  Squatter squatter(kNobody, [&] {
    int opened = 0;
    for (const char* from : {"127.0.0.2", "127.0.0.1"}) {
      for (int i = 0; i < 40; ++i) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in local{}, to{};
        local.sin_family = to.sin_family = AF_INET;
        inet_pton(AF_INET, from, &local.sin_addr);
        to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        to.sin_port = htons(uint16_t(port));
        opened += bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof(local)) == 0 &&
                  connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) == 0;
      }
    }
    return std::to_string(opened);
  });
  ASSERT_EQ(squatter.line(), "80");
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  for (int scrape = 0; scrape < 3; ++scrape) {
    auto [status, text] =
        gpumux::service::CallHttp("127.0.0.1:" + std::to_string(port), "GET", "/metrics");
    EXPECT_EQ(status, 200) << text;
    EXPECT_NE(text.find("gpumux_"), std::string::npos);
  }
}

// The attacker is admitted high priority and launches nothing; it writes into its own activity
// file a rhythm whose burst never ends (a thread always inside a synchronising call), which every
// lower tenant's launch forecast would keep clear of for good.
TEST_F(SquatterTest, AHighPriorityTenantsClaimedBurstsHoldNoNeighbourPastWhatItUses) {
  StartAgent();
  json victim = Admit("victim", "1GiB");
  Call("POST", "/v1/tenants",
       {{"id", "attacker"}, {"gpu", 0}, {"memory", "1GiB"}, {"priority", "high"},
        {"owner_uid", kNobody}},
       201);
  std::string start = std::to_string(gpumux::NowNs() + 1'000'000'000ull);
  FILE* victim_run = popen((Env(victim) + GPUMUX_COMPUTE_CLIENT + " launch busy " + start +
                            " 3 1").c_str(), "r");
  ASSERT_NE(victim_run, nullptr);
  Squatter squatter(kNobody, [&] {
    gpumux::node::ActivityWriter file(ActivityOf("attacker"));
    gpumux::node::BurstWords* w = file.burst(0);
    auto put = [](uint64_t& word, uint64_t value) { __atomic_store_n(&word, value, __ATOMIC_RELAXED); };
    constexpr uint64_t kPeriod = 10'000'000;
    const uint64_t end = gpumux::NowNs() + 4'500'000'000ull;
    for (uint64_t now = gpumux::NowNs(); now < end; now = gpumux::NowNs()) {
      put(w->period_ns, kPeriod);
      put(w->length_ns, kPeriod - 1'000'000);
      put(w->start_ns, now - now % kPeriod);
      put(w->stamp_ns, now);
      put(w->stamp_was_return, 0);
      put(w->ends_synced, 1);
      __atomic_store_n(&w->syncing, int64_t(1), __ATOMIC_RELAXED);
      usleep(200);
    }
    return std::string("done");
  });
  EXPECT_EQ(squatter.line(), "done");
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof(buf), victim_run)) out += buf;
  pclose(victim_run);
  json v = json::parse(out, nullptr, false);
  ASSERT_TRUE(v.contains("gpu_share")) << out;
  EXPECT_GT(v["gpu_share"].get<double>(), 0.35)
      << "held off the GPU by bursts its neighbour only claimed: " << v;
}

// Every attack above at once, from `nobody`, for a minute, with a gpumuxd restart halfway: the
// neighbour's programs get their whole quota each time, and gpumuxd and its metrics answer.
TEST_F(SquatterTest, GpumuxdAndANeighbourKeepWorkingUnderEveryAttackAtOnceForAMinute) {
  constexpr double kSeconds = 60;
  const int port = FreeLoopbackPort();
  ASSERT_GT(port, 0);
  const std::string metrics = "127.0.0.1:" + std::to_string(port);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(uint16_t(port));
  const std::vector<std::string> args = {"--sim", "H100", "--metrics-listen", metrics};
  StartAgentOn(args, {});
  json victim = Admit("victim", "1GiB");
  Call("POST", "/v1/tenants",
       {{"id", "attacker"}, {"gpu", 0}, {"memory", "1GiB"}, {"priority", "high"},
        {"owner_uid", kNobody}},
       201);
  const uint64_t until = gpumux::NowNs() + uint64_t(kSeconds * 1e9);
  // Locks on all it can open, idle connections on both sockets it may use and the metrics port,
  // an activity file grown again and again, bursts claimed that never end, and registrations on
  // connections of processes that exited.
  Squatter locks = LockEverything();
  Squatter attacks(kNobody, [&] {
    std::thread([&, until] {
      int connections = 0;
      for (int i = 0; i < 40; ++i) {
        connections += ConnectRaw(tenant_socket_) >= 0;
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in to = addr;
        connections += connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) == 0;
      }
      int grow = ActivityOf("attacker");
      for (uint64_t now = gpumux::NowNs(); now < until; now = gpumux::NowNs()) {
        (void)!fallocate(grow, FALLOC_FL_KEEP_SIZE, 0, 64 * kMiB);
        (void)!posix_fallocate(grow, 0, 64 * kMiB);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }).detach();
    std::thread([&, until] {
      for (uint64_t now = gpumux::NowNs(); now < until; now = gpumux::NowNs()) {
        // A process connects and exits; its child, which keeps the connection, registers on it.
        int result[2];
        if (pipe(result) != 0) continue;
        pid_t connector = fork();
        if (connector == 0) {
          int fd = ConnectRaw(tenant_socket_);
          if (fork() == 0) {
            while (getppid() == connector) usleep(100);
            int status = Ask(fd, Post("/v1/grants", R"({"tenant": "attacker", "bytes": 0})"));
            (void)!write(result[1], &status, sizeof(status));
          }
          _exit(0);
        }
        close(result[1]);
        waitpid(connector, nullptr, 0);
        int status = 0;
        // A 200 is possible only while the connector is still exiting: then it is still the
        // process registered, and its registration dies with it (the dedicated test above shows a
        // pid recycled after that is not the attacker's).
        (void)!read(result[0], &status, sizeof(status));
        close(result[0]);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }).detach();
    std::thread([&, until] {
      try {
        gpumux::node::ActivityWriter file(ActivityOf("attacker"));
        gpumux::node::BurstWords* w = file.burst(0);
        for (uint64_t now = gpumux::NowNs(); now < until; now = gpumux::NowNs()) {
          __atomic_store_n(&w->period_ns, uint64_t(10'000'000), __ATOMIC_RELAXED);
          __atomic_store_n(&w->start_ns, now - now % 10'000'000, __ATOMIC_RELAXED);
          __atomic_store_n(&w->stamp_ns, now, __ATOMIC_RELAXED);
          __atomic_store_n(&w->syncing, int64_t(1), __ATOMIC_RELAXED);
          usleep(200);
        }
      } catch (const gpumux::Error&) {
      }
    }).detach();
    return std::string("attacking");
  });
  ASSERT_EQ(attacks.line(), "attacking");
  // The neighbour: programs that take their whole quota, one after another; the list; a scrape;
  // a restart halfway.
  auto start = Clock::now();
  int programs = 0;
  bool restarted = false;
  while (SecondsSince(start) < kSeconds) {
    auto t0 = Clock::now();
    EXPECT_EQ(Allocate(victim, 1024 * kMiB), 1024 * kMiB) << "after " << SecondsSince(start) << " s";
    Call("GET", "/v1/tenants", json(), 200);
    EXPECT_EQ(gpumux::service::CallHttp(metrics, "GET", "/metrics").first, 200);
    EXPECT_LT(SecondsSince(t0), 5) << "a round took long at " << SecondsSince(start) << " s";
    ++programs;
    if (!restarted && SecondsSince(start) > kSeconds / 2) {
      StopAgent(SIGTERM);
      StartAgentOn(args, {});
      restarted = true;
    }
  }
  EXPECT_TRUE(restarted);
  EXPECT_GT(programs, 10);
  int status = 0;
  EXPECT_EQ(waitpid(attacks.pid(), &status, WNOHANG), 0)
      << "the attacker ended early: exit " << WEXITSTATUS(status) << ", signal " << WTERMSIG(status);
}

}  // namespace
