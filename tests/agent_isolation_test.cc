// gpumuxd against a hostile neighbour, as issue 21 tried it: a local user (`nobody`) who owns one
// tenant can write no file that gpumuxd or another tenant reads as truth, can crash nothing by
// truncating what it can reach, cannot hold a neighbour's launches or lift its own compute cap,
// and fills only its own process table; a second gpumuxd exits; a failed admission leaves nothing
// behind; root on the tenants' socket is capped like any user; a half-closed request is answered;
// a process cannot have its memory adopted as a neighbour's by claiming the neighbour's name; a
// program that allocates around the shim past its tenant's quota is killed.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "agent_fixture.h"
#include "base/clock.h"
#include "node/ledger/ledger.h"

namespace {

using gpumux::testing::AgentTest;
using gpumux::testing::ConnectRaw;
using gpumux::testing::IsolationTest;
using gpumux::testing::kGiB;
using gpumux::testing::kMiB;
using gpumux::testing::kNobody;
using nlohmann::json;
namespace fs = std::filesystem;

TEST_F(IsolationTest, ATenantCanWriteNoFileOfGpumuxdsAndItsAttemptsHurtNoOne) {
  StartAgent();
  json victim = Admit("victim", "2GiB");
  json attacker = Admit("attacker", "1GiB", kNobody);
  // The victim holds 1 GiB in a running program while the attack runs.
  FILE* held = popen((Env(victim) + GPUMUX_ALLOC_CLIENT + " direct fill " +
                      std::to_string(512 * kMiB) + " 3 2>/dev/null")
                         .c_str(),
                     "r");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  // As `nobody`: list what it can open for writing (the simulated GPU's state stands for hardware
  // and is left out), then truncate all of it and try the view ledger too.
  std::string out = AsUser(kNobody, [&] {
    json writable = json::array();
    for (const auto& e :
         fs::recursive_directory_iterator(Run(), fs::directory_options::skip_permission_denied)) {
      if (!e.is_regular_file() || e.path().filename().string().rfind("sim-", 0) == 0) continue;
      int fd = open(e.path().c_str(), O_WRONLY);
      if (fd < 0) continue;
      writable.push_back(fs::relative(e.path(), Run()).string());
      (void)!ftruncate(fd, 0);
      close(fd);
    }
    bool view_truncated = truncate((Run() + "/gpu0.ledger").c_str(), 100) == 0;
    bool placed = open((Run() + "/ghost").c_str(), O_CREAT | O_WRONLY, 0644) >= 0;
    return json({{"writable", writable}, {"view_truncated", view_truncated}, {"placed", placed}})
        .dump();
  });
  json result = json::parse(out, nullptr, false);
  ASSERT_TRUE(result.is_object()) << out;
  EXPECT_EQ(result["writable"], json::array())
      << "nothing (its activity file is a memory file its processes are handed)";
  EXPECT_FALSE(result["view_truncated"]) << "the view ledger is gpumuxd's alone";
  EXPECT_FALSE(result["placed"]) << "no file of its own in gpumuxd's directories";
  // gpumuxd and the victim carry on; the attacker's own cut-short file is its problem only.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  Call("GET", "/v1/tenants", json(), 200);
  char line[512] = {0};
  fread(line, 1, sizeof(line) - 1, held);
  EXPECT_EQ(WEXITSTATUS(pclose(held)), 0);
  EXPECT_EQ(json::parse(line)["allocated"].get<uint64_t>(), 2 * kGiB) << line;
  // A tenant admitted now runs as before.
  json later =
      Call("POST", "/v1/tenants", {{"id", "later"}, {"gpu", 0}, {"memory", "512MiB"}}, 201);
  auto [code, fill] =
      Sh(Env(later) + GPUMUX_ALLOC_CLIENT + " direct fill " + std::to_string(64 * kMiB) + " 0");
  ASSERT_EQ(code, 0) << fill;
  EXPECT_EQ(json::parse(fill)["allocated"].get<uint64_t>(), 512 * kMiB) << fill;
  EXPECT_EQ(Log().find("level=error"), std::string::npos) << Log();
}

TEST_F(IsolationTest, ATenantCannotHoldItsNeighbourOrLiftItsOwnCapByAnyWrite) {
  StartAgent();
  json victim = Admit("victim", "1GiB");
  json attacker = Call("POST", "/v1/tenants",
                       {{"id", "attacker"},
                        {"gpu", 0},
                        {"memory", "1GiB"},
                        {"compute", "20%"},
                        {"owner_uid", kNobody}},
                       201);
  std::string start = std::to_string(gpumux::NowNs() + 1'000'000'000ull);
  const std::string client = std::string(GPUMUX_COMPUTE_CLIENT) + " launch busy " + start + " 3 1";
  // The victim runs as a child process, not on a thread of this one: AsUser forks, and a fork
  // taken while another thread holds an allocator lock can leave the child waiting for it forever
  // (seen once under AddressSanitizer).
  FILE* victim_run = popen((Env(victim) + client).c_str(), "r");
  ASSERT_NE(victim_run, nullptr);
  // The attacker runs busy and, meanwhile, writes random words into every file it can write
  // (only its own activity: it claims to want the GPU all the time), without cutting it short.
  std::string attacker_out = AsUser(kNobody, [&] {
    std::string scribble =
        "end=$((SECONDS+5)); while [ $SECONDS -lt $end ]; do for f in $(find " + Run() +
        " -type f -writable ! -name 'sim-*' 2>/dev/null); do dd if=/dev/urandom of=$f bs=16 "
        "count=1 conv=notrunc 2>/dev/null; done; done";
    return Sh("(" + scribble + ") & " + Env(attacker) + client + "; wait").second;
  });
  std::string victim_out;
  char buf[512];
  while (fgets(buf, sizeof(buf), victim_run)) victim_out += buf;
  pclose(victim_run);
  json v = json::parse(victim_out, nullptr, false), a = json::parse(attacker_out, nullptr, false);
  ASSERT_TRUE(v.contains("gpu_share") && a.contains("gpu_share")) << victim_out << attacker_out;
  EXPECT_NEAR(a["gpu_share"].get<double>(), 0.20, 0.05) << "held to its cap: " << a;
  EXPECT_GT(v["gpu_share"].get<double>(), 0.70) << "the victim has the rest: " << v;
}

// A tenant over two GPUs, run by another user, asking gpumuxd's tenants' socket for credit on each
// of its GPUs in turn ("part"), and on parts it does not have: it gets its quota on each GPU and no
// more, and a part it lacks is refused.
TEST_F(IsolationTest, ATenantOverTwoGpusGetsItsQuotaOnEachPartAndNoMore) {
  StartAgentOn({"--sim", "H100", "--gpus", "2"}, {});
  Call("POST", "/v1/tenants",
       {{"id", "tp"}, {"gpus", {0, 1}}, {"memory", "1GiB"}, {"owner_uid", kNobody}}, 201);
  std::string text = AsUser(kNobody, [&] {
    auto grant = [&](const std::string& body) {
      try {
        auto [status, answer] = gpumux::service::CallUnix(tenant_socket_, "POST", "/v1/grants", body);
        json j = json::parse(answer, nullptr, false);
        return json{{"status", status}, {"granted", j.is_object() ? j.value("granted", 0ull) : 0}};
      } catch (const gpumux::Error&) {
        return json{{"status", 0}};
      }
    };
    json r;
    r["part1"] = grant(R"({"tenant": "tp", "bytes": 1073741824, "part": 1})");
    r["part1_more"] = grant(R"({"tenant": "tp", "bytes": 67108864, "part": 1})");
    r["part0"] = grant(R"({"tenant": "tp", "bytes": 1073741824, "part": 0})");
    r["part0_more"] = grant(R"({"tenant": "tp", "bytes": 67108864})");
    r["part2"] = grant(R"({"tenant": "tp", "bytes": 67108864, "part": 2})");
    r["negative"] = grant(R"({"tenant": "tp", "bytes": 67108864, "part": -1})");
    json t = json::parse(gpumux::service::CallUnix(tenant_socket_, "GET", "/v1/tenants/tp").second);
    r["per_gpu"] = t["per_gpu"];
    return r.dump();
  });
  json r = json::parse(text);
  EXPECT_EQ(r["part1"]["granted"], kGiB) << r;
  EXPECT_EQ(r["part1_more"]["status"], 409) << "past its quota on GPU 1: " << r;
  EXPECT_EQ(r["part0"]["granted"], kGiB) << "GPU 1's credit took nothing of GPU 0's: " << r;
  EXPECT_EQ(r["part0_more"]["status"], 409) << r;
  EXPECT_EQ(r["part2"]["status"], 400) << "a GPU the tenant does not have: " << r;
  EXPECT_EQ(r["negative"]["status"], 400) << r;
  ASSERT_EQ(r["per_gpu"].size(), 2u) << r;
  for (const json& gpu : r["per_gpu"]) EXPECT_EQ(gpu["used_bytes"], kGiB) << r;
}

// After its ledger is made anew, gpumuxd adopts what running tenant processes hold, each by the
// tenant it was started as. A process of `nobody` that holds memory outside the shim and claims to
// be root's tenant is charged to neither: the claim must come from the tenant's owner.
TEST_F(IsolationTest, AProcessClaimingANeighboursNameIsNotAdoptedAsTheNeighbour) {
  // The forger is over its own tenant's quota: logged rather than killed, so that it is still
  // there to be adopted, or not, when gpumuxd starts again.
  const std::vector<std::string> keep = {"--sim", "H100", "--over-quota", "log"};
  StartAgentOn(keep, {});
  Admit("victim", "2GiB");
  json attacker = Admit("attacker", "1GiB", kNobody);
  const std::string as_nobody = "setpriv --reuid=65534 --regid=65534 --clear-groups ";
  const std::string fill = std::string(GPUMUX_ALLOC_CLIENT) + " direct fill " +
                           std::to_string(512 * kMiB) + " 5 >/dev/null 2>&1";
  // Its own tenant's program, under the shim: 1 GiB, granted.
  FILE* own = popen((as_nobody + Env(attacker) + fill).c_str(), "r");
  json before = AwaitUsage("attacker", kGiB);
  ASSERT_EQ(before["used_bytes"].get<uint64_t>(), kGiB) << before;
  // A forger: the simulated driver without the shim, started as tenant "victim".
  FILE* forger =
      popen((as_nobody + Env(attacker) + "LD_PRELOAD= GPUMUX_TENANT=victim " + fill).c_str(), "r");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  StopAgent(SIGKILL);
  gpumux::testing::Shell("head -c 300000 /dev/urandom > " + Run() + "/private/gpu0.ledger");
  StartAgentOn(keep, {});
  EXPECT_EQ(Call("GET", "/v1/tenants/attacker", json(), 200)["used_bytes"].get<uint64_t>(), kGiB)
      << "its own program's memory is adopted: " << Log();
  EXPECT_EQ(Call("GET", "/v1/tenants/victim", json(), 200)["used_bytes"].get<uint64_t>(), 0u)
      << "the forger's is not the victim's: " << Log();
  EXPECT_NE(Log().find("claims_tenant=victim"), std::string::npos) << Log();
  pclose(forger);
  pclose(own);
}

TEST_F(IsolationTest, OneTenantsFullProcessTableIsItsOwn) {
  StartAgent();
  json victim = Admit("victim", "1GiB");
  Admit("attacker", "1GiB", kNobody);
  // 70 processes of the attacker each register (a grant of no bytes), one after another (the
  // per-user connection cap is another test's), and stay alive.
  const int n = gpumux::node::kMaxProcessesPerTenant + 6;
  int results[2], release[2];
  ASSERT_EQ(pipe(results), 0);
  ASSERT_EQ(pipe(release), 0);
  std::vector<pid_t> children;
  int ok = 0, full = 0;
  for (int i = 0; i < n; ++i) {
    pid_t child = fork();
    if (child == 0) {
      close(results[0]);
      close(release[1]);
      if (setgid(kNobody) != 0 || setuid(kNobody) != 0) _exit(3);
      int status = 0;
      try {
        status = gpumux::service::CallUnix(tenant_socket_, "POST", "/v1/grants",
                                         R"({"tenant": "attacker", "bytes": 0})")
                     .first;
      } catch (const gpumux::Error&) {
      }
      (void)!write(results[1], &status, sizeof(status));
      char c;
      (void)!read(release[0], &c, 1);  // until the parent closes it
      _exit(0);
    }
    children.push_back(child);
    int status = 0;
    ASSERT_EQ(read(results[0], &status, sizeof(status)), ssize_t(sizeof(status)));
    ok += status == 200;
    full += status == 409;
  }
  close(results[1]);
  close(release[0]);
  EXPECT_EQ(ok, gpumux::node::kMaxProcessesPerTenant);
  EXPECT_EQ(full, n - gpumux::node::kMaxProcessesPerTenant);
  // The neighbour's new process registers and gets its whole quota.
  auto [code, fill] =
      Sh(Env(victim) + GPUMUX_ALLOC_CLIENT + " direct fill " + std::to_string(64 * kMiB) + " 0");
  ASSERT_EQ(code, 0) << fill;
  EXPECT_EQ(json::parse(fill)["allocated"].get<uint64_t>(), kGiB) << fill;
  // While they live, the operator may not remove the attacker (its processes are real); once they
  // are gone nothing stale stands in the way.
  Call("DELETE", "/v1/tenants/attacker", json(), 409);
  close(release[1]);
  for (pid_t c : children) waitpid(c, nullptr, 0);
  Call("DELETE", "/v1/tenants/attacker", json(), 200);
}

TEST_F(IsolationTest, ASecondGpumuxdOnTheSamePathsExitsTwoAndTheFirstKeepsServing) {
  StartAgent();
  std::string cmd = std::string(GPUMUXD_BINARY) + " --sim H100 --socket " + socket_ +
                    " --tenant-socket " + tenant_socket_ + " --state " +
                    (dir_ / "state2.db").string() + " --runtime-dir " + Run() + " 2>&1";
  gpumux::testing::ShellResult second = gpumux::testing::Shell(cmd);
  EXPECT_EQ(second.exit_code, 2) << second.out;
  EXPECT_NE(second.out.find("another gpumuxd (pid " + std::to_string(agent_) + ")"),
            std::string::npos)
      << second.out;
  EXPECT_TRUE(fs::exists(socket_)) << "the first's sockets are untouched";
  Call("GET", "/v1/gpus", json(), 200);
  // Another runtime directory but the same socket: refused too.
  gpumux::testing::ShellResult third = gpumux::testing::Shell(
      std::string(GPUMUXD_BINARY) + " --sim H100 --socket " + socket_ + " --tenant-socket " +
      (dir_ / "t3.sock").string() + " --state " + (dir_ / "state3.db").string() +
      " --runtime-dir " + (dir_ / "run3").string() + " 2>&1");
  EXPECT_EQ(third.exit_code, 2) << third.out;
  Call("GET", "/v1/gpus", json(), 200);
}

TEST_F(IsolationTest, AnAdmissionThatFailsLeavesNothingBehindEvenAfterARestart) {
  StartAgent();
  uint64_t gpu_memory = Call("GET", "/v1/gpus", json(), 200)["gpus"][0]["memory_bytes"];
  // The store cannot be written (another connection holds it exclusively): the admission fails.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ / "state.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr), SQLITE_OK);
  auto [status, text] = gpumux::service::CallUnix(socket_, "POST", "/v1/tenants",
                                                R"({"id": "ghost", "gpu": 0, "memory": "40GiB"})");
  EXPECT_GE(status, 500) << text;
  sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  // Refused for the sum: nothing is kept either.
  Call("POST", "/v1/tenants", {{"id", "half"}, {"gpu", 0}, {"memory", gpu_memory / 2}}, 201);
  Call("POST", "/v1/tenants", {{"id", "too-big"}, {"gpu", 0}, {"memory", gpu_memory / 2 + 1}}, 409);
  // An update that does not fit keeps the limits the tenant had.
  Call("PUT", "/v1/tenants/half", {{"memory", gpu_memory + 1}}, 409);
  EXPECT_EQ(Call("GET", "/v1/tenants/half", json(), 200)["quota_bytes"], gpu_memory / 2);
  for (int restart = 0; restart < 2; ++restart) {
    EXPECT_EQ(Call("GET", "/v1/tenants", json(), 200)["tenants"].size(), 1u);
    std::string metrics = gpumux::service::CallUnix(socket_, "GET", "/metrics").second;
    EXPECT_EQ(metrics.find("ghost"), std::string::npos);
    EXPECT_EQ(metrics.find("too-big"), std::string::npos);
    // The rest of the GPU is free: no quota of a failed admission stands in the way.
    Call("POST", "/v1/tenants",
         {{"id", "rest"}, {"gpu", 0}, {"memory", gpu_memory - gpu_memory / 2}}, 201);
    Call("DELETE", "/v1/tenants/rest", json(), 200);
    StopAgent(SIGTERM);
    StartAgent();
  }
}

TEST_F(IsolationTest, RootOnTheTenantsSocketIsCappedLikeAnyUser) {
  StartAgent();
  std::vector<int> held;
  for (int i = 0; i < 40; ++i) held.push_back(ConnectRaw(tenant_socket_));
  // Past 32, each new one took the place of its oldest idle one, which was answered 429.
  timeval timeout{2, 0};
  setsockopt(held.front(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  char buf[16] = {0};
  ASSERT_EQ(recv(held.front(), buf, 12, 0), 12);
  EXPECT_EQ(std::string(buf, 12), "HTTP/1.1 429");
  timeval brief{0, 200000};
  setsockopt(held.back(), SOL_SOCKET, SO_RCVTIMEO, &brief, sizeof(brief));
  EXPECT_LT(recv(held.back(), buf, 12, 0), 0) << "the newest is still open, awaiting its request";
  // Operators on the API socket are not held up.
  Call("GET", "/v1/tenants", json(), 200);
  for (int fd : held) close(fd);
}

TEST_F(IsolationTest, AHalfClosedRequestIsAnswered) {
  StartAgent();
  int fd = ConnectRaw(socket_);
  ASSERT_GE(fd, 0);
  std::string request = "GET /v1/gpus HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(send(fd, request.data(), request.size(), MSG_NOSIGNAL), ssize_t(request.size()));
  shutdown(fd, SHUT_WR);
  timeval timeout{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  char buf[64] = {0};
  ASSERT_GE(recv(fd, buf, 12, MSG_WAITALL), 12);
  EXPECT_EQ(std::string(buf, 12), "HTTP/1.1 200");
  close(fd);
}

TEST_F(IsolationTest, GpumuxdStartsOverLedgersItCannotUseAndRebuildsThem) {
  StartAgent();
  Call("POST", "/v1/tenants", {{"id", "kept"}, {"gpu", 0}, {"memory", "1GiB"}}, 201);
  StopAgent(SIGKILL);
  // Cut short, foreign bytes, and a ledger of another GPU.
  truncate((Run() + "/gpu0.ledger").c_str(), 100);
  gpumux::testing::Shell("head -c 300000 /dev/urandom > " + Run() + "/private/gpu0.ledger");
  StartAgent();
  json kept = Call("GET", "/v1/tenants/kept", json(), 200);
  EXPECT_EQ(kept["quota_bytes"].get<uint64_t>(), kGiB);
  EXPECT_NE(Log().find("ledger made anew"), std::string::npos) << Log();
  json t = Call("POST", "/v1/tenants", {{"id", "kept"}, {"gpu", 0}, {"join", true}}, 200);
  auto [code, fill] =
      Sh(Env(t) + GPUMUX_ALLOC_CLIENT + " direct fill " + std::to_string(64 * kMiB) + " 0");
  ASSERT_EQ(code, 0) << fill;
  EXPECT_EQ(json::parse(fill)["allocated"].get<uint64_t>(), kGiB) << fill;
}

// A program run without the shim (an unset LD_PRELOAD) allocates as the driver lets it; gpumuxd
// reads what it holds from the driver and kills it once its tenant is over its quota. It claims the
// victim's name, to no avail: it is `nobody`'s, and `nobody` owns one tenant here.
TEST_F(IsolationTest, AProgramAllocatingAroundTheShimPastItsQuotaIsKilledAndItsNeighbourGoesOn) {
  StartAgent();
  json victim = Admit("victim", "4GiB");
  json attacker = Admit("attacker", "1GiB", kNobody);
  const std::string client = std::string(GPUMUX_ALLOC_CLIENT) + " direct fill ";
  FILE* neighbour = popen((Env(victim) + client + std::to_string(kGiB) + " 6").c_str(), "r");
  ASSERT_EQ(AwaitUsage("victim", 4 * kGiB, 10)["used_bytes"].get<uint64_t>(), 4 * kGiB);
  // It takes all the device has left, and holds it for 30 s unless stopped (it may be stopped
  // before it has taken it all, and says what it took only if not).
  uint64_t started_ns = gpumux::NowNs();
  FILE* around = popen(("setpriv --reuid=65534 --regid=65534 --clear-groups " + Env(attacker) +
                        "LD_PRELOAD= GPUMUX_TENANT=victim " + client + std::to_string(kGiB) +
                        " 30 2>&1; echo exit=$?")
                           .c_str(),
                       "r");
  char line[512] = {0};
  std::string status;
  while (status.empty() && fgets(line, sizeof(line), around)) {
    if (std::string(line).rfind("exit=", 0) == 0) status = line;  // the shell may say "Killed"
  }
  double seconds = double(gpumux::NowNs() - started_ns) / 1e9;
  EXPECT_EQ(status, "exit=137\n") << "killed (SIGKILL) after " << seconds << " s";
  EXPECT_LT(seconds, 10) << "within a few checks (twice a second)";
  pclose(around);
  json a = Call("GET", "/v1/tenants/attacker", json(), 200);
  EXPECT_EQ(a["memory_kills"].get<uint64_t>(), 1u) << a;
  EXPECT_EQ(a["used_bytes"].get<uint64_t>(), 0u) << "nothing was granted: " << a;
  json v = Call("GET", "/v1/tenants/victim", json(), 200);
  EXPECT_EQ(v["memory_kills"].get<uint64_t>(), 0u) << v;
  EXPECT_EQ(v["device_bytes"].get<uint64_t>(), 4 * kGiB) << "the driver's count of its program";
  EXPECT_EQ(v["outside_grants_bytes"].get<uint64_t>(), 0u) << v;
  std::string log = Log();
  size_t killed = log.find("killed a process that holds device memory past its tenant's quota");
  ASSERT_NE(killed, std::string::npos) << log;
  EXPECT_NE(log.find("tenant=attacker", killed), std::string::npos) << log;
  size_t outside = log.find("outside_grants_bytes=", killed);
  ASSERT_NE(outside, std::string::npos) << log;
  EXPECT_GT(std::stoull(log.substr(outside + 21)), kGiB) << "past its quota when killed: " << log;
  // The neighbour's program still runs, and the memory the attacker held is there for the next
  // program (root's own, outside any tenant: reported, not judged).
  FILE* more =
      popen((Env(victim) + "LD_PRELOAD= GPUMUX_TENANT= " + client + std::to_string(8 * kGiB) + " 0")
                .c_str(),
            "r");
  ASSERT_TRUE(fgets(line, sizeof(line), more));
  EXPECT_GE(json::parse(line)["allocated"].get<uint64_t>(), 64 * kGiB) << line;
  pclose(more);
  std::string metrics = gpumux::service::CallUnix(socket_, "GET", "/metrics", "").second;
  EXPECT_NE(metrics.find("gpumux_tenant_memory_kills_total{gpu=\"0\",tenant=\"attacker\"} 1\n"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("gpumux_tenant_device_memory_bytes{gpu=\"0\",tenant=\"victim\"} " +
                         std::to_string(4 * kGiB) + "\n"),
            std::string::npos)
      << metrics;
  char out[512] = {0};
  fread(out, 1, sizeof(out) - 1, neighbour);
  EXPECT_EQ(WEXITSTATUS(pclose(neighbour)), 0) << out;
  EXPECT_EQ(json::parse(out)["allocated"].get<uint64_t>(), 4 * kGiB) << out;
}

// A tenant cannot buy room outside its quota by starting processes: each of six processes of a
// 1 GiB tenant registers through the shim, then (exec'd without it, the same process) holds 960 MiB
// around it, within its own 1 GiB context allowance. Together they are 5.6 GiB on the device, past
// the quota and the tenant's 2 GiB of contexts here: gpumuxd ends as many as that takes, in one
// check, and the rest run on. (Before the tenant's bound each brought an allowance of its own, and
// the six were within 7 GiB.)
TEST_F(IsolationTest, StartingProcessesBuysATenantNoRoomPastItsContextAllowance) {
  StartAgentOn({"--sim", "H100", "--tenant-context-allowance", "2GiB"}, {});
  json many = Admit("many", "1GiB", kNobody);
  std::vector<FILE*> programs;
  for (int i = 0; i < 6; ++i) {
    programs.push_back(popen(("setpriv --reuid=65534 --regid=65534 --clear-groups " + Env(many) +
                              GPUMUX_ALLOC_CLIENT + " direct around " + std::to_string(kMiB) + " " +
                              std::to_string(960 * kMiB) + " 6 2>&1; echo exit=$?")
                                 .c_str(),
                             "r"));
  }
  int killed = 0, ran = 0;
  for (FILE* program : programs) {
    char line[512];
    std::string status, took;
    while (fgets(line, sizeof(line), program)) {
      if (std::string(line).rfind("exit=", 0) == 0) status = line;
      if (std::string(line).find("allocated") != std::string::npos) took = line;
    }
    pclose(program);
    if (status == "exit=137\n") ++killed;
    if (status == "exit=0\n") {
      ++ran;
      EXPECT_EQ(json::parse(took)["allocated"].get<uint64_t>(), 960 * kMiB) << took;
    }
  }
  EXPECT_EQ(killed + ran, 6);
  EXPECT_GE(killed, 3) << "5.6 GiB within 3 GiB ends at least three of 0.94 GiB";
  EXPECT_GE(ran, 2) << "no more than it takes";
  json t = Call("GET", "/v1/tenants/many", json(), 200);
  EXPECT_EQ(t["memory_kills"].get<int>(), killed) << t;
  EXPECT_NE(Log().find("killed a process that holds device memory past its tenant's quota"),
            std::string::npos)
      << Log();
}

// gpumuxd judges only its tenants' work: a program of a user who owns no tenant here is reported
// once, not killed; and under --over-quota log a tenant past its quota is only logged.
TEST_F(IsolationTest, AStrangersProgramIsReportedNotKilledAndLogModeKillsNothing) {
  StartAgentOn({"--sim", "H100", "--over-quota", "log"}, {});
  json attacker = Admit("attacker", "1GiB", kNobody);
  // Each holds what it took for 3 s: the stranger 50 GiB (its second step does not fit), then
  // the tenant's program all that is left.
  auto hold = [](uint64_t step) {
    return " LD_PRELOAD= " + std::string(GPUMUX_ALLOC_CLIENT) + " direct fill " +
           std::to_string(step) + " 3 2>&1; echo exit=$?";
  };
  FILE* stranger = popen(("setpriv --reuid=4242 --regid=4242 --clear-groups " + Env(attacker) +
                          "GPUMUX_TENANT=attacker" + hold(50 * kGiB))
                             .c_str(),
                         "r");
  char line[512];
  ASSERT_TRUE(fgets(line, sizeof(line), stranger));
  EXPECT_EQ(json::parse(line)["allocated"].get<uint64_t>(), 50 * kGiB) << line;
  FILE* over = popen(
      ("setpriv --reuid=65534 --regid=65534 --clear-groups " + Env(attacker) + hold(kGiB)).c_str(),
      "r");
  ASSERT_TRUE(fgets(line, sizeof(line), over));
  EXPECT_GT(json::parse(line)["allocated"].get<uint64_t>(), 20 * kGiB) << line;
  for (FILE* f : {stranger, over}) {
    ASSERT_TRUE(fgets(line, sizeof(line), f));  // how it ended
    EXPECT_EQ(std::string(line), "exit=0\n") << "held 3 s and exited of itself";
    pclose(f);
  }
  std::string log = Log();
  EXPECT_NE(log.find("no tenant here accounts for"), std::string::npos) << log;
  EXPECT_NE(log.find("not killed (--over-quota log)"), std::string::npos) << log;
  EXPECT_EQ(log.find("killed a process"), std::string::npos) << log;
  EXPECT_EQ(Call("GET", "/v1/tenants/attacker", json(), 200)["memory_kills"].get<uint64_t>(), 0u);
}

// gpumuxd counts a grant against the pid the kernel reports for the caller, in gpumuxd's PID
// namespace. Run in one of its own (a Kubernetes pod without hostPID), it sees every other
// process as pid 0: it must refuse them saying why, and the tenant's program must say it too.
TEST_F(IsolationTest, GpumuxdInAPidNamespaceOfItsOwnRefusesEveryProcessSayingWhy) {
  launcher_ = {"/usr/bin/unshare", "--pid", "--fork", "--kill-child"};
  StartAgent();
  json t = Call("POST", "/v1/tenants", {{"id", "t"}, {"gpu", 0}, {"memory", "1GiB"}}, 201);
  std::string out = gpumux::testing::Shell(Env(t) + GPUMUX_ALLOC_CLIENT + " direct fill " +
                                           std::to_string(256 * kMiB) + " 0 2>&1")
                        .out;
  EXPECT_NE(out.find("\"allocated\": 0"), std::string::npos) << out;
  EXPECT_NE(out.find("no pid in gpumuxd's PID namespace"), std::string::npos) << out;
  EXPECT_NE(out.find("hostPID: true"), std::string::npos) << out;
  StopAgent(SIGKILL);  // unshare ignores SIGTERM while it waits; its death kills gpumuxd
}

}  // namespace
