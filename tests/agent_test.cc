// gpumuxd end to end on simulated GPUs: it admits tenants and hands out the environment that runs
// them under the shim; it refuses what does not fit; a restart loses nothing while tenants keep
// running; only operators change tenants; its metrics pass promtool.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "agent_fixture.h"
#include "base/clock.h"
#include "core/catalog.h"
#include "node/device.h"
#include "node/ledger/ledger.h"
#include "node/shim/memory_grant.h"
#include "service/http_client.h"

namespace {

using gpumux::service::CallUnix;
using gpumux::testing::kGiB;
using gpumux::testing::kMiB;
using nlohmann::json;

using gpumux::testing::AgentTest;

const std::string kClient = GPUMUX_ALLOC_CLIENT;

TEST_F(AgentTest, AdmitsATenantWhoseProgramsAreHeldToItsQuota) {
  StartAgent();
  json a = Call("POST", "/v1/tenants", {{"id", "job-1"}, {"gpu", 0}, {"memory", "1GiB"}}, 201);
  auto [code, out] = Sh(Env(a) + kClient + " direct fill " + std::to_string(64 * kMiB) + " 0");
  ASSERT_EQ(code, 0) << out;
  EXPECT_EQ(json::parse(out)["allocated"].get<uint64_t>(), kGiB);
  EXPECT_EQ(json::parse(out)["last_error"].get<int>(), 2);
  // Slurm's grants convert: 8 shards of 1 GiB; MPS 25% of an 80 GiB H100 is 20 GiB and a 25% cap.
  json shards = Call("POST", "/v1/tenants", {{"id", "job-2"}, {"gpu", 0}, {"shards", 8}}, 201);
  EXPECT_EQ(shards["memory_bytes"].get<uint64_t>(), 8 * kGiB);
  json mps = Call("POST", "/v1/tenants", {{"id", "job-3"}, {"gpu", 0}, {"mps_percent", 25}}, 201);
  EXPECT_EQ(mps["memory_bytes"].get<uint64_t>(), 20 * kGiB);
  EXPECT_EQ(mps["compute_cap_percent"].get<double>(), 25.0);
  // What does not fit is refused with the reason.
  json over = Call("POST", "/v1/tenants", {{"id", "big"}, {"gpu", 0}, {"memory", "60GiB"}}, 409);
  EXPECT_NE(over["error"].get<std::string>().find("quotas would sum"), std::string::npos) << over;
  Call("POST", "/v1/tenants", {{"id", "x"}, {"gpu", 3}, {"memory", "1GiB"}}, 400);
  Call("POST", "/v1/tenants", {{"id", "x"}, {"gpu", 0}, {"memory", "lots"}}, 400);
  // Limits that contradict themselves are a bad request, not a lack of room.
  json contradictory = Call(
      "POST", "/v1/tenants",
      {{"id", "x"}, {"gpu", 0}, {"memory", "1GiB"}, {"priority", "high"}, {"compute", "30%"}}, 400);
  EXPECT_NE(contradictory["error"].get<std::string>().find("high-priority"), std::string::npos)
      << contradictory;
  Call("POST", "/v1/tenants", {{"id", "x"}, {"gpu", 0}, {"memory", "1GiB"}, {"weight", 0}}, 400);
  auto [status_code, table] = Sh(std::string(GPUMUX_BINARY) + " status --agent " + socket_);
  EXPECT_EQ(status_code, 0);
  EXPECT_NE(table.find("job-3"), std::string::npos) << "gpumux status asks the agent: " << table;
  EXPECT_NE(table.find("GPU 0: H100"), std::string::npos) << "a line per GPU first: " << table;
  EXPECT_NE(table.find("timeslice, 0MiB / 81920MiB granted, 3 tenants, healthy"), std::string::npos)
      << table;
  EXPECT_NE(table.find("20 GiB"), std::string::npos) << "quotas as given, not 21.5 GB: " << table;
  auto [top_code, screens] =
      Sh(std::string(GPUMUX_BINARY) + " top --agent " + socket_ + " --count 2 --interval 0.1");
  EXPECT_EQ(top_code, 0);
  EXPECT_EQ(std::count(screens.begin(), screens.end(), '\033'), 4)
      << "two screens, each cleared first";
  Call("DELETE", "/v1/tenants/job-1", json(), 200);
  Call("GET", "/v1/tenants/job-1", json(), 404);
}

// One form on the wire (node/agent/tenant_request.h): memory in bytes, compute a number. The forms
// before it are read for one release more, and gpumuxd's log names them; a list with a quota of 0
// (which once meant "the first GPU's") is refused.
TEST_F(AgentTest, TheOldFormsOfARequestAreReadAndLoggedAndAZeroQuotaIsRefused) {
  StartAgentOn({"--sim", "H100", "--gpus", "2"}, {});
  json now = Call("POST", "/v1/tenants",
                  {{"id", "now"}, {"gpu", 0}, {"memory", kGiB}, {"compute", 30}}, 201);
  EXPECT_EQ(now["memory_bytes"], kGiB);
  EXPECT_EQ(now["compute_cap_percent"], 30.0);
  EXPECT_EQ(Log().find("read until the next release"), std::string::npos) << Log();
  json before = Call("POST", "/v1/tenants",
                     {{"id", "before"}, {"gpu", 0}, {"memory", "1GiB"}, {"compute", "30%"}}, 201);
  EXPECT_EQ(before["memory_bytes"], kGiB);
  EXPECT_EQ(before["compute_cap_percent"], 30.0);
  std::string log = Log();
  size_t line = log.find("read until the next release");
  ASSERT_NE(line, std::string::npos) << log;
  EXPECT_NE(log.find("memory, compute", line), std::string::npos) << log;
  json zero =
      Call("POST", "/v1/tenants", {{"id", "two"}, {"gpus", {0, 1}}, {"memory", {kGiB, 0}}}, 400);
  EXPECT_NE(zero["error"].get<std::string>().find("quota of 0 bytes for GPU 2"), std::string::npos)
      << zero;
  Call("GET", "/v1/tenants/two", json(), 404);
}

TEST_F(AgentTest, ARestartLosesNothingAndRunningTenantsKeepRunning) {
  StartAgent();
  json a = Call("POST", "/v1/tenants",
                {{"id", "steady"}, {"gpu", 0}, {"memory", "1GiB"}, {"compute", "40%"}}, 201);
  // The tenant holds 1 GiB for 3 s; the agent is killed and restarted meanwhile.
  FILE* client = popen(
      (Env(a) + kClient + " direct fill " + std::to_string(256 * kMiB) + " 3 2>/dev/null").c_str(),
      "r");
  json before = AwaitUsage("steady", kGiB);
  ASSERT_EQ(before["used_bytes"].get<uint64_t>(), kGiB) << before;
  StopAgent(SIGKILL);
  StartAgent();
  json after = Call("GET", "/v1/tenants/steady", json(), 200);
  EXPECT_EQ(after["quota_bytes"].get<uint64_t>(), kGiB);
  EXPECT_EQ(after["compute_cap_percent"].get<double>(), 40.0);
  EXPECT_EQ(after["used_bytes"].get<uint64_t>(), kGiB) << "usage survives in the ledger";
  EXPECT_EQ(after["processes"].size(), 1u);
  // Its process goes on publishing its launches into the activity file it was handed, which the
  // new gpumuxd found among its descriptors.
  std::string log = gpumux::testing::Shell("cat " + (dir_ / "agent.log").string()).out;
  EXPECT_NE(log.find("tenant's activity file taken up from its running process"), std::string::npos)
      << log;
  char buf[512] = {0};
  fread(buf, 1, sizeof(buf) - 1, client);
  EXPECT_EQ(WEXITSTATUS(pclose(client)), 0);
  EXPECT_EQ(json::parse(buf)["allocated"].get<uint64_t>(), kGiB)
      << "the tenant ran on while the agent was down";
  Call("DELETE", "/v1/tenants/steady", json(), 200);
}

// An upgrade to a gpumuxd of another ledger version makes its ledgers anew while tenants run: what
// they hold is adopted from the driver, so that their quotas still hold.
TEST_F(AgentTest, ALedgerMadeAnewAdoptsWhatRunningTenantsHoldFromTheDriver) {
  StartAgent();
  json a = Call("POST", "/v1/tenants", {{"id", "steady"}, {"gpu", 0}, {"memory", "1GiB"}}, 201);
  FILE* client = popen(
      (Env(a) + kClient + " direct fill " + std::to_string(256 * kMiB) + " 5 2>/dev/null").c_str(),
      "r");
  json before = AwaitUsage("steady", kGiB);
  ASSERT_EQ(before["used_bytes"].get<uint64_t>(), kGiB) << before;
  StopAgent(SIGKILL);
  // Both ledgers as a gpumuxd of the next layout version would find them.
  for (const char* ledger : {"/run/gpu0.ledger", "/run/private/gpu0.ledger"})
    gpumux::testing::SetLedgerVersion(dir_.string() + ledger, gpumux::node::kLedgerVersion + 1);
  StartAgent();
  std::string log = gpumux::testing::Shell("cat " + (dir_ / "agent.log").string()).out;
  ASSERT_NE(log.find("ledger made anew"), std::string::npos) << log;
  EXPECT_NE(log.find("adopted what a running tenant process holds"), std::string::npos) << log;
  json after = Call("GET", "/v1/tenants/steady", json(), 200);
  EXPECT_EQ(after["used_bytes"].get<uint64_t>(), kGiB) << after;
  EXPECT_EQ(after["processes"].size(), 1u) << after;
  // A second program of the tenant finds the quota taken (without adoption it got 1 GiB more).
  std::string out =
      Sh(Env(a) + kClient + " direct fill " + std::to_string(64 * kMiB) + " 0").second;
  EXPECT_EQ(json::parse(out)["allocated"].get<uint64_t>(), 0u) << out;
  char buf[512] = {0};
  fread(buf, 1, sizeof(buf) - 1, client);
  EXPECT_EQ(WEXITSTATUS(pclose(client)), 0);
  EXPECT_EQ(json::parse(buf)["allocated"].get<uint64_t>(), kGiB) << "it ran on: " << buf;
  // What it held leaves with it (reclaimed twice a second).
  json gone = AwaitUsage("steady", 0);
  EXPECT_EQ(gone["used_bytes"].get<uint64_t>(), 0u) << gone;
}

// The other half of such an upgrade: a running process's shim cannot read the new view, and the
// gate it followed in the old one is no longer written. It must not stay shut: the gate opens.
class UpgradeTest : public gpumux::testing::AgentTest {
 protected:
  // Admits tenant "capped" (20%), starts a busy program as it through the shim (its view at
  // `view_path`, gpumuxd's own when empty: a container's is a bind mount of it), waits until it
  // runs, and kills gpumuxd leaving the tenant's gate shut. The program's result comes later.
  std::future<gpumux::testing::ShellResult> RunUntilGpumuxdDiesWithTheGateShut(
      const std::string& view_path) {
    json t = Call("POST", "/v1/tenants",
                  {{"id", "capped"}, {"gpu", 0}, {"memory", "1GiB"}, {"compute", "20%"}}, 201);
    std::string start = std::to_string(gpumux::NowNs() + 1'000'000'000ull);
    std::string ledger = view_path.empty() ? "" : "GPUMUX_LEDGER=" + view_path + " ";
    auto run = std::async(std::launch::async, gpumux::testing::Shell,
                          "timeout 20 " + Env(t) + ledger + std::string(GPUMUX_COMPUTE_CLIENT) +
                              " launch busy " + start + " 3 1 2>" + Err());
    // The shim registers on the program's first call, and launches once gpumuxd has answered: GPU
    // time measured says both happened (the process listed alone may still await its answer, which
    // a gpumuxd killed then never gives).
    json seen = json::object();
    for (int i = 0; i < 250 && seen.value("gpu_time_s", 0.0) == 0.0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      seen = Call("GET", "/v1/tenants/capped", json(), 200);
    }
    EXPECT_EQ(seen["processes"].size(), 1u) << seen;
    EXPECT_GT(seen.value("gpu_time_s", 0.0), 0.0) << seen;
    StopAgent(SIGKILL);
    gpumux::node::Ledger view = gpumux::node::Ledger::Open(View());
    view.SetGate(*view.FindTenant("capped"), true);  // as a gpumuxd killed while it held it
    return run;
  }
  // The program ran to its end (not held for good), had most of the GPU, and said why.
  void ExpectLetGo(std::future<gpumux::testing::ShellResult> run) {
    gpumux::testing::ShellResult r = run.get();
    std::string said = gpumux::testing::Shell("cat " + Err()).out;
    ASSERT_EQ(r.exit_code, 0) << "held for good (124: timed out): " << r.out << said;
    EXPECT_GT(json::parse(r.out)["gpu_share"].get<double>(), 0.5) << r.out;
    EXPECT_NE(said.find("no longer held for its compute share"), std::string::npos) << said;
  }
  std::string View() const { return (dir_ / "run" / "gpu0.ledger").string(); }
  std::string Err() const { return (dir_ / "client.err").string(); }
};

TEST_F(UpgradeTest, AProcessWhoseViewWasMadeAnewIsNotHeldForGood) {
  StartAgent();
  auto run = RunUntilGpumuxdDiesWithTheGateShut("");
  // The next gpumuxd's view, of the next layout version, made anew at the same path.
  gpumux::testing::Shell("cp " + View() + " " + View() + ".new");
  gpumux::testing::SetLedgerVersion(View() + ".new", gpumux::node::kLedgerVersion + 1);
  std::filesystem::rename(View() + ".new", View());
  ExpectLetGo(std::move(run));
}

// In a container the view is a bind mount of gpumuxd's file: the path keeps naming the old file
// after gpumuxd makes its view anew, so gpumuxd retires the old one (its magic number zeroed),
// which every process that still maps it sees. The bind mount is stood for by a hard link.
TEST_F(UpgradeTest, AViewGpumuxdMakesAnewIsRetiredForTheProcessesThatStillMapIt) {
  StartAgent();
  std::filesystem::create_directories(dir_ / "mnt");
  const std::string mounted = (dir_ / "mnt" / "gpu0.ledger").string();
  std::filesystem::create_hard_link(View(), mounted);
  auto run = RunUntilGpumuxdDiesWithTheGateShut(mounted);
  // A view gpumuxd cannot use (another GPU's name in its header): the next gpumuxd makes it anew.
  {
    std::fstream f(View(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(offsetof(gpumux::node::LedgerHeader, gpu_name));
    f.write("another GPU", 12);
  }
  StartAgent();
  ExpectLetGo(std::move(run));
  EXPECT_NE(
      gpumux::testing::Shell("cat " + (dir_ / "agent.log").string()).out.find("ledger made anew"),
      std::string::npos);
}

// A tensor-parallel job as one gpumuxd tenant over two GPUs: its program sees both, is held to the
// quota on each, draws credit on the GPU it allocates on, and the tenant survives a restart whole.
TEST_F(AgentTest, ATenantOverTwoGpusIsHeldToItsQuotaOnEachAndKeptWhole) {
  StartAgentOn({"--sim", "H100", "--gpus", "2"}, {});
  json a = Call("POST", "/v1/tenants", {{"id", "tp"}, {"gpus", {0, 1}}, {"memory", "1GiB"}}, 201);
  EXPECT_EQ(a["gpus"], json::array({0, 1}));
  auto [code, out] =
      Sh(Env(a) + GPUMUX_LLM_CLIENT + std::string(" fill-each ") + std::to_string(64 * kMiB));
  ASSERT_EQ(code, 0) << out;
  json j = json::parse(out);
  EXPECT_EQ(j["allocated"], json::array({kGiB, kGiB})) << j;
  EXPECT_EQ(j["used_after_each_fill"][0], json::array({kGiB, 0})) << "nothing charged on GPU 1";
  // Freed: the process keeps up to two batches of credit from gpumuxd, which are its own to
  // allocate, so cuMemGetInfo does not count them as used.
  EXPECT_EQ(j["used_at_end"], json::array({0, 0})) << j;
  json t = Call("GET", "/v1/tenants/tp", json(), 200);
  EXPECT_EQ(t["gpus"], json::array({0, 1}));
  EXPECT_EQ(t["used_bytes"], 0) << "its credit on both GPUs went back when it exited";
  EXPECT_EQ(t["per_gpu"].size(), 2u) << t;
  // What cannot be: a GPU twice, one the node lacks, both ways of naming GPUs at once, a
  // neighbour's GPU list changed by a repeated POST.
  Call("POST", "/v1/tenants", {{"id", "x"}, {"gpus", {0, 0}}, {"memory", "1GiB"}}, 400);
  Call("POST", "/v1/tenants", {{"id", "x"}, {"gpus", {0, 5}}, {"memory", "1GiB"}}, 400);
  Call("POST", "/v1/tenants", {{"id", "x"}, {"gpus", {0, 1}}, {"gpu", 0}, {"memory", "1GiB"}}, 400);
  Call("POST", "/v1/tenants", {{"id", "tp"}, {"gpus", {1}}, {"memory", "1GiB"}}, 409);
  // All or none: GPU 1 nearly full refuses a two-GPU tenant, and GPU 0 keeps nothing of it.
  Call("POST", "/v1/tenants", {{"id", "full"}, {"gpu", 1}, {"memory", "78GiB"}}, 201);
  Call("POST", "/v1/tenants", {{"id", "big"}, {"gpus", {0, 1}}, {"memory", "2GiB"}}, 409);
  EXPECT_EQ(Call("GET", "/v1/tenants", json(), 200)["tenants"].size(), 2u);
  Call("DELETE", "/v1/tenants/full", json(), 200);
  // Its GPUs stay time-sliced while it is there.
  Call("PUT", "/v1/gpus/1", {{"mode", "mps"}}, 409);
  StopAgent(SIGKILL);
  StartAgentOn({"--sim", "H100", "--gpus", "2"}, {});
  EXPECT_EQ(Call("GET", "/v1/tenants/tp", json(), 200)["gpus"], json::array({0, 1}));
  Call("DELETE", "/v1/tenants/tp", json(), 200);
  Call("PUT", "/v1/gpus/1", {{"mode", "mps"}}, 200);
}

// A tenant over two MIG instances ("GPU.INSTANCE"; on a real GPU also by UUID, "devices"), with a
// quota of its own on each; and over whole GPUs with unequal quotas. Kept so across a restart.
TEST_F(AgentTest, ATenantOverMigInstancesOrGpusHoldsAQuotaOfItsOwnOnEach) {
  StartAgentOn({"--sim", "H100", "--gpus", "2"}, {});
  Call("PUT", "/v1/gpus/0", {{"mode", "mig"}, {"layout", {"3g.40gb", "3g.40gb"}}}, 200);
  json devices = {"0.0", "0.1"};
  json a = Call("POST", "/v1/tenants",
                {{"id", "mig-tp"}, {"gpus", devices}, {"memory", {"1GiB", "2GiB"}}}, 201);
  ASSERT_EQ(a["per_gpu"].size(), 2u) << a;
  EXPECT_EQ(a["per_gpu"][1], json({{"gpu", 0}, {"instance", 1}, {"memory_bytes", 2 * kGiB}}));
  auto [code, out] =
      Sh(Env(a) + GPUMUX_LLM_CLIENT + std::string(" fill-each ") + std::to_string(64 * kMiB));
  ASSERT_EQ(code, 0) << out;
  json j = json::parse(out);
  EXPECT_EQ(j["allocated"], json::array({kGiB, 2 * kGiB})) << j;
  EXPECT_EQ(j["used_after_each_fill"][0], json::array({kGiB, 0})) << "nothing on instance 1";

  json b =
      Call("POST", "/v1/tenants", {{"id", "uneven"}, {"gpus", {1}}, {"memory", {"3GiB"}}}, 201);
  EXPECT_EQ(b["memory_bytes"], 3 * kGiB);
  // One quota per place, or one for all: any other count is refused, naming it.
  json refused =
      Call("POST", "/v1/tenants", {{"id", "x"}, {"gpus", devices}, {"memory", {"1GiB"}}}, 400);
  EXPECT_NE(refused["error"].get<std::string>().find("1 quotas for the tenant's 2 GPUs"),
            std::string::npos)
      << refused;
  Call("POST", "/v1/tenants",
       {{"id", "x"}, {"devices", {"MIG-a"}}, {"gpus", {1}}, {"memory", "1GiB"}}, 400);
  Call("POST", "/v1/tenants", {{"id", "x"}, {"devices", {"MIG-nope"}}, {"memory", "1GiB"}}, 400);
  Call("POST", "/v1/tenants", {{"id", "x"}, {"gpus", {"0.1=5"}}, {"memory", "1GiB"}}, 400);
  // Past an instance's memory on one place: refused on all.
  Call("POST", "/v1/tenants", {{"id", "x"}, {"gpus", devices}, {"memory", {"1GiB", "50GiB"}}}, 409);
  EXPECT_EQ(Call("GET", "/v1/tenants", json(), 200)["tenants"].size(), 2u);

  StopAgent(SIGKILL);
  StartAgentOn({"--sim", "H100", "--gpus", "2"}, {});
  json t = Call("GET", "/v1/tenants/mig-tp", json(), 200);
  EXPECT_EQ(t["quota_bytes"], kGiB);
  EXPECT_EQ(Call("POST", "/v1/tenants", {{"id", "mig-tp"}, {"join", true}},
                 200)["per_gpu"][1]["memory_bytes"],
            2 * kGiB)
      << "each quota kept across the restart";
}

TEST_F(AgentTest, OnlyOperatorsChangeTenantsAndOthersReadOnlyTheirOwn) {
  if (getuid() != 0) GTEST_SKIP() << "needs root to act as another user (CI runs as root)";
  StartAgent();
  const uid_t nobody = 65534;
  json theirs =
      Call("POST", "/v1/tenants",
           {{"id", "theirs"}, {"gpu", 0}, {"memory", "1GiB"}, {"owner_uid", nobody}}, 201);
  Call("POST", "/v1/tenants", {{"id", "other"}, {"gpu", 0}, {"memory", "1GiB"}}, 201);
  std::string text = AsUser(nobody, [&] {
    json r;
    r["put"] = CallUnix(socket_, "PUT", "/v1/tenants/theirs", R"({"memory": "70GiB"})").first;
    r["delete"] = CallUnix(socket_, "DELETE", "/v1/tenants/other").first;
    r["list"] = json::parse(CallUnix(socket_, "GET", "/v1/tenants").second);
    r["other"] = CallUnix(socket_, "GET", "/v1/tenants/other").first;
    // Its programs run under the shim as this user.
    auto [code, out] =
        Sh(Env(theirs) + kClient + " direct fill " + std::to_string(256 * kMiB) + " 0");
    r["program"] = json::parse(out, nullptr, false);
    return r.dump();
  });
  json r = json::parse(text);
  EXPECT_EQ(r["put"].get<int>(), 403) << "a tenant cannot raise its own quota";
  EXPECT_EQ(r["delete"].get<int>(), 403);
  ASSERT_EQ(r["list"]["tenants"].size(), 1u) << r;
  EXPECT_EQ(r["list"]["tenants"][0]["id"], "theirs") << "it reads its own state only";
  EXPECT_EQ(r["other"].get<int>(), 403);
  EXPECT_EQ(Call("GET", "/v1/tenants/theirs", json(), 200)["quota_bytes"].get<uint64_t>(), kGiB)
      << "unchanged";
  EXPECT_EQ(r["program"].value("allocated", 0ull), kGiB)
      << "a non-root tenant's program is held to its quota: " << r["program"];
}

TEST_F(AgentTest, LimitsRewrittenInTheLedgerAreRestored) {
  StartAgent();
  json t = Call("POST", "/v1/tenants",
                {{"id", "sneaky"}, {"gpu", 0}, {"memory", "1GiB"}, {"compute", "20%"}}, 201);
  // What root (or a ledger written before tenants were read-only) could do: rewrite limits in the
  // view ledger.
  gpumux::node::Ledger ledger =
      gpumux::node::Ledger::Open(t["env"]["GPUMUX_LEDGER"].get<std::string>());
  ledger.AddTenant("sneaky", {70 * kGiB});
  bool restored = false;
  for (int i = 0; i < 40 && !restored; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    for (const auto& u : ledger.Snapshot())
      restored |= u.id == "sneaky" && u.quota == kGiB && u.cap_permille == 200;
  }
  EXPECT_TRUE(restored) << "gpumuxd puts the granted limits back within 2 s";
}

TEST_F(AgentTest, SharingModeIsSetPerGpuHandedToTenantsAndKept) {
  StartAgent();
  EXPECT_EQ(Call("GET", "/v1/gpus", json(), 200)["gpus"][0]["mode"], "timeslice");
  Call("PUT", "/v1/gpus/0", {{"mode", "mps"}}, 200);
  Call("PUT", "/v1/gpus/0", {{"mode", "spatial"}}, 400);
  Call("PUT", "/v1/gpus/7", {{"mode", "mps"}}, 404);
  json a = Call("POST", "/v1/tenants", {{"id", "m"}, {"gpu", 0}, {"memory", "1GiB"}}, 201);
  EXPECT_EQ(a["env"]["GPUMUX_SIM_MODE"], "mps") << "the simulated GPU runs its work MPS-style";
  StopAgent(SIGKILL);
  StartAgent();
  EXPECT_EQ(Call("GET", "/v1/gpus", json(), 200)["gpus"][0]["mode"], "mps")
      << "kept across a restart";
}

TEST_F(AgentTest, AMigLayoutMakesInstancesWhoseTenantsAreHeldToThem) {
  StartAgent();
  Call("PUT", "/v1/gpus/0", {{"mode", "mig"}, {"layout", {"4g.40gb", "4g.40gb"}}},
       400);  // one 4g fits, not two
  Call("PUT", "/v1/gpus/0", {{"mode", "mig"}, {"layout", {"4g.40gb", "3g.40gb"}}}, 200);
  json gpu = Call("GET", "/v1/gpus", json(), 200)["gpus"][0];
  ASSERT_EQ(gpu["instances"].size(), 2u) << gpu;
  EXPECT_EQ(gpu["instances"][1]["memory_bytes"].get<uint64_t>(), uint64_t(39.5 * kGiB))
      << "3g.40gb holds 39.5 GiB";
  EXPECT_EQ(gpu["nvidia_smi"], "nvidia-smi mig -cgi 9:4,5:0 -C")
      << "the planner's command for the same layout";
  Call("POST", "/v1/tenants", {{"id", "nowhere"}, {"gpu", 0}, {"memory", "1GiB"}},
       400);  // which instance?
  Call("POST", "/v1/tenants", {{"id", "big"}, {"gpu", 0}, {"instance", 1}, {"memory", "50GiB"}},
       409);
  json t = Call("POST", "/v1/tenants",
                {{"id", "sliced"}, {"gpu", 0}, {"instance", 1}, {"memory", "1GiB"}}, 201);
  EXPECT_EQ(t["env"]["GPUMUX_SIM_MEMORY"], std::to_string(uint64_t(39.5 * kGiB)))
      << "the program sees the instance";
  auto [code, out] = Sh(Env(t) + kClient + " direct fill " + std::to_string(256 * kMiB) + " 0");
  ASSERT_EQ(code, 0) << out;
  EXPECT_EQ(json::parse(out)["allocated"].get<uint64_t>(), kGiB);
  Call("PUT", "/v1/gpus/0", {{"mode", "timeslice"}}, 409);  // its tenant must go first
  StopAgent(SIGKILL);
  StartAgent();
  EXPECT_EQ(Call("GET", "/v1/gpus", json(), 200)["gpus"][0]["instances"].size(), 2u)
      << "the layout is kept";
  EXPECT_EQ(Call("GET", "/v1/tenants/sliced", json(), 200)["instance"].get<int>(), 1);
  Call("DELETE", "/v1/tenants/sliced", json(), 200);
  Call("PUT", "/v1/gpus/0", {{"mode", "timeslice"}}, 200);
  EXPECT_FALSE(Call("GET", "/v1/gpus", json(), 200)["gpus"][0].contains("instances"));
}

// A MIG layout changes instance by instance around a busy one (issue 45): a 2g.20gb added and an
// idle 1g.10gb removed while a tenant's program holds 8 GiB on a 3g.40gb; the program runs on and
// keeps its memory, its instance its number. A layout that would move or remove the busy instance
// is refused naming it and its tenant.
TEST_F(AgentTest, AMigLayoutChangesAroundABusyInstanceWhoseProgramRunsOn) {
  StartAgent();
  Call("PUT", "/v1/gpus/0", {{"mode", "mig"}, {"layout", {"1g.10gb@6", "3g.40gb@0"}}}, 200);
  json busy = Call("POST", "/v1/tenants",
                   {{"id", "busy"}, {"gpu", 0}, {"instance", 1}, {"memory", 8 * kGiB}}, 201);
  FILE* program = popen(
      (Env(busy) + kClient + " direct fill " + std::to_string(kGiB) + " 6 2>/dev/null").c_str(),
      "r");
  ASSERT_EQ(AwaitUsage("busy", 8 * kGiB, 5)["used_bytes"].get<uint64_t>(), 8 * kGiB);
  json moved = Call("PUT", "/v1/gpus/0", {{"mode", "mig"}, {"layout", {"3g.40gb@4"}}}, 409);
  EXPECT_NE(moved["error"].get<std::string>().find(
                "instance 1 (3g.40gb at 0, holding tenant 'busy') would move or go"),
            std::string::npos)
      << moved;
  Call("PUT", "/v1/gpus/0", {{"mode", "mig"}, {"layout", {"7g.80gb"}}}, 409);
  // The new layout in any order: the busy instance keeps number 1, the new one takes number 0.
  Call("PUT", "/v1/gpus/0", {{"mode", "mig"}, {"layout", {"3g.40gb@0", "2g.20gb@4"}}}, 200);
  json gpu = Call("GET", "/v1/gpus", json(), 200)["gpus"][0];
  EXPECT_EQ(gpu["layout"], json({"2g.20gb@4", "3g.40gb@0"})) << gpu;
  ASSERT_EQ(gpu["instances"].size(), 2u) << gpu;
  EXPECT_NE(gpu["instances"][0]["name"].get<std::string>().find("2g.20gb"), std::string::npos)
      << gpu;
  json after = Call("GET", "/v1/tenants/busy", json(), 200);
  EXPECT_EQ(after["instance"], 1);
  EXPECT_EQ(after["used_bytes"].get<uint64_t>(), 8 * kGiB) << "its memory intact: " << after;
  EXPECT_EQ(after["processes"].size(), 1u) << "its program still there: " << after;
  // The new instance takes a tenant of its own; the busy one's program ends as it would have.
  json added = Call("POST", "/v1/tenants",
                    {{"id", "added"}, {"gpu", 0}, {"instance", 0}, {"memory", 4 * kGiB}}, 201);
  EXPECT_EQ(added["env"]["GPUMUX_SIM_MEMORY"],
            std::to_string(gpu["instances"][0]["memory_bytes"].get<uint64_t>()))
      << "the program sees the new instance";
  auto [code, out] = Sh(Env(added) + kClient + " direct fill " + std::to_string(kGiB) + " 0");
  ASSERT_EQ(code, 0) << out;
  EXPECT_EQ(json::parse(out)["allocated"].get<uint64_t>(), 4 * kGiB) << out;
  char buf[512] = {0};
  fread(buf, 1, sizeof(buf) - 1, program);
  EXPECT_EQ(WEXITSTATUS(pclose(program)), 0) << buf;
  EXPECT_EQ(json::parse(buf)["allocated"].get<uint64_t>(), 8 * kGiB) << buf;
}

// The simulated NVML standing for a real GPU of catalog kind `kind` (with MIG where the catalog has
// its geometry), its state in the test's directory.
std::vector<std::pair<std::string, std::string>> NvmlGpu(const std::filesystem::path& dir,
                                                         const std::string& kind) {
  gpumux::Catalog catalog = gpumux::Catalog::LoadBundled();
  gpumux::node::Device gpu = gpumux::node::SimulatedDevice(catalog.FindGpu(kind), 0);
  return gpumux::node::SimulatedGpuEnvironment(
      gpu, (dir / "nvml-gpu0.state").string(),
      std::filesystem::path(GPUMUXD_BINARY).parent_path().string());
}
std::vector<std::pair<std::string, std::string>> NvmlH100(const std::filesystem::path& dir) {
  return NvmlGpu(dir, "H100");
}

TEST_F(AgentTest, OnARealGpuMigInstancesAreMadeThroughNvmlKeptAcrossRestartsAndRemoved) {
  StartRealAgent(NvmlH100(dir_));
  json gpu = Call("GET", "/v1/gpus", json(), 200)["gpus"][0];
  ASSERT_FALSE(gpu["simulated"].get<bool>()) << "gpumuxd took the GPU from NVML: " << gpu;
  Call("PUT", "/v1/gpus/0", {{"mode", "mig"}, {"layout", {"4g.40gb", "4g.40gb"}}},
       400);  // the driver's geometry refuses it
  Call("PUT", "/v1/gpus/0", {{"mode", "mig"}, {"layout", {"3g.40gb", "2g.20gb", "1g.10gb"}}}, 200);
  gpu = Call("GET", "/v1/gpus", json(), 200)["gpus"][0];
  ASSERT_EQ(gpu["instances"].size(), 3u) << gpu;
  std::vector<std::string> uuids;
  for (const json& instance : gpu["instances"]) {
    uuids.push_back(instance.value("uuid", ""));
    EXPECT_EQ(uuids.back().rfind("MIG-", 0), 0u) << instance;
  }
  EXPECT_EQ(std::set<std::string>(uuids.begin(), uuids.end()).size(), 3u)
      << "one MIG device per instance";
  EXPECT_EQ(gpu["instances"][0]["memory_bytes"].get<uint64_t>(), uint64_t(39.5 * kGiB))
      << "3g.40gb, as the driver lists it";
  EXPECT_EQ(gpu["instances"][2]["memory_bytes"].get<uint64_t>(), uint64_t(9.75 * kGiB))
      << "1g.10gb";

  json two =
      Call("POST", "/v1/tenants",
           {{"id", "two"}, {"devices", {uuids[2], uuids[0]}}, {"memory", {"1GiB", "2GiB"}}}, 201);
  EXPECT_EQ(two["env"]["CUDA_VISIBLE_DEVICES"], uuids[2] + "," + uuids[0])
      << "it sees its two MIG devices, in the order given";
  EXPECT_EQ(two["per_gpu"][0]["instance"], 2) << two;
  Call("DELETE", "/v1/tenants/two", json(), 200);
  json t = Call("POST", "/v1/tenants",
                {{"id", "sliced"}, {"gpu", 0}, {"instance", 1}, {"memory", "4GiB"}}, 201);
  EXPECT_EQ(t["env"]["CUDA_VISIBLE_DEVICES"], uuids[1]) << "the tenant sees only its MIG device";
  EXPECT_FALSE(t["env"].contains("GPUMUX_SIM_STATE")) << t;
  Call("POST", "/v1/tenants", {{"id", "big"}, {"gpu", 0}, {"instance", 2}, {"memory", "12GiB"}},
       409);
  json capped = Call(
      "POST", "/v1/tenants",
      {{"id", "capped"}, {"gpu", 0}, {"instance", 2}, {"memory", "1GiB"}, {"compute", "30%"}}, 400);
  EXPECT_NE(capped["error"].get<std::string>().find("MIG"), std::string::npos)
      << "unenforceable there, so refused";
  json by_uuid =
      Call("POST", "/v1/tenants", {{"id", "small"}, {"device", uuids[2]}, {"memory", "1GiB"}}, 201);
  EXPECT_EQ(by_uuid["instance"], 2) << "a MIG device's UUID names its instance";
  Call("POST", "/v1/tenants",
       {{"id", "lost"}, {"device", "MIG-00000000-0000-0000-0000-000000000000"}, {"memory", "1GiB"}},
       400);
  Call("DELETE", "/v1/tenants/small", json(), 200);

  StopAgent(SIGKILL);
  StartRealAgent(NvmlH100(dir_));
  gpu = Call("GET", "/v1/gpus", json(), 200)["gpus"][0];
  ASSERT_EQ(gpu["instances"].size(), 3u) << gpu;
  for (size_t k = 0; k < 3; ++k)
    EXPECT_EQ(gpu["instances"][k]["uuid"], uuids[k]) << "the same instances, not new ones";
  EXPECT_EQ(Call("GET", "/v1/tenants/sliced", json(), 200)["instance"].get<int>(), 1);

  Call("PUT", "/v1/gpus/0", {{"mode", "mig"}, {"layout", {"7g.80gb"}}},
       409);  // its tenant must go first
  Call("DELETE", "/v1/tenants/sliced", json(), 200);
  Call("PUT", "/v1/gpus/0", {{"mode", "mig"}, {"layout", {"7g.80gb"}}}, 200);
  gpu = Call("GET", "/v1/gpus", json(), 200)["gpus"][0];
  ASSERT_EQ(gpu["instances"].size(), 1u) << gpu;
  EXPECT_EQ(std::count(uuids.begin(), uuids.end(), gpu["instances"][0]["uuid"].get<std::string>()),
            0)
      << "a new instance";

  Call("PUT", "/v1/gpus/0", {{"mode", "timeslice"}}, 200);
  std::ifstream driver(dir_ / "nvml-gpu0.state.mig");
  std::string first_line;
  std::getline(driver, first_line);
  EXPECT_EQ(first_line.rfind("mode 0 0", 0), 0u)
      << "MIG mode is off on the GPU again: " << first_line;
}

TEST_F(AgentTest, AMigModeThatWaitsForAGpuResetIsRefusedSayingSo) {
  auto env = NvmlH100(dir_);
  env.push_back({"GPUMUX_SIM_MIG_RESET_REQUIRED", "1"});
  StartRealAgent(env);
  json answer = Call("PUT", "/v1/gpus/0", {{"mode", "mig"}, {"layout", {"7g.80gb"}}}, 503);
  EXPECT_NE(answer.dump().find("nvidia-smi -i 0 -r"), std::string::npos) << answer;
  EXPECT_EQ(Call("GET", "/v1/gpus", json(), 200)["gpus"][0]["mode"], "timeslice");
}

TEST_F(AgentTest, MigOnARealGpuWithoutItIsRefusedSayingSo) {
  StartRealAgent(NvmlGpu(dir_, "L4"));
  json answer = Call("PUT", "/v1/gpus/0", {{"mode", "mig"}, {"layout", {"1g.6gb"}}}, 503);
  EXPECT_NE(answer.dump().find("does this GPU support MIG"), std::string::npos) << answer;
  EXPECT_EQ(Call("GET", "/v1/gpus", json(), 200)["gpus"][0]["mode"], "timeslice");
  Call("PUT", "/v1/gpus/0", {{"mode", "timeslice"}},
       200);  // leaving MIG on a GPU without it is a no-op
}

TEST_F(AgentTest, OnARealGpuMpsModeRunsTheControlDaemonAndHandsClientsTheirLimits) {
  auto env = NvmlH100(dir_);
  env.push_back({"PATH", std::string(GPUMUX_FAKE_BIN) + ":" +
                             std::getenv("PATH")});  // nvidia-cuda-mps-control
  std::string log = (dir_ / "mps.log").string();
  env.push_back({"GPUMUX_FAKE_MPS_LOG", log});
  StartRealAgent(env);
  std::string uuid = Call("GET", "/v1/gpus", json(), 200)["gpus"][0].value("uuid", "");
  Call("PUT", "/v1/gpus/0", {{"mode", "mps"}}, 200);
  json t = Call("POST", "/v1/tenants",
                {{"id", "served"}, {"gpu", 0}, {"memory", "4GiB"}, {"compute", "30%"}}, 201);
  std::string pipe = (dir_ / "run" / "mps0").string();
  EXPECT_EQ(t["env"]["CUDA_MPS_PIPE_DIRECTORY"], pipe) << t;
  EXPECT_EQ(t["env"]["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"], "0=4096M")
      << "the driver holds it to its quota";
  EXPECT_EQ(t["env"]["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"], "30") << "and to its share of the SMs";
  EXPECT_EQ(t["env"]["CUDA_VISIBLE_DEVICES"], uuid) << "its GPU, by UUID";
  EXPECT_FALSE(t["env"].contains("CUDA_MPS_CLIENT_PRIORITY")) << "a normal client";
  json batch = Call("POST", "/v1/tenants",
                    {{"id", "batch"}, {"gpu", 0}, {"memory", "1GiB"}, {"priority", "low"}}, 201);
  EXPECT_EQ(batch["env"]["CUDA_MPS_CLIENT_PRIORITY"], "1") << "best effort: below normal";
  Call("DELETE", "/v1/tenants/batch", json(), 200);
  Call("DELETE", "/v1/tenants/served", json(), 200);
  Call("PUT", "/v1/gpus/0", {{"mode", "timeslice"}}, 200);
  std::ifstream in(log);
  std::vector<std::string> calls;
  for (std::string line; std::getline(in, line);) calls.push_back(line.substr(0, line.find(' ')));
  EXPECT_EQ(calls,
            (std::vector<std::string>{"start", "get_server_list", "quit", "get_server_list"}))
      << "started once, stopped once";
  std::ifstream again(log);
  std::string first;
  std::getline(again, first);
  EXPECT_NE(first.find("pipe=" + pipe), std::string::npos) << first;
  EXPECT_NE(first.find("visible=0"), std::string::npos)
      << "the daemon serves GPU 0 only: " << first;
}

// The same adoption through the NVIDIA backend: gpumuxd reads what each process holds from NVML's
// running processes (here the simulated NVML standing for a real GPU).
TEST_F(AgentTest, OnARealGpuALedgerMadeAnewAdoptsFromNvmlsRunningProcesses) {
  auto env = NvmlH100(dir_);
  StartRealAgent(env);
  json t = Call("POST", "/v1/tenants", {{"id", "steady"}, {"gpu", 0}, {"memory", "1GiB"}}, 201);
  std::string gpu = "env";  // the client reaches the same simulated GPU as gpumuxd's NVML
  for (const auto& [k, v] : env) gpu += " " + k + "='" + v + "'";
  FILE* client = popen((gpu + " " + Env(t) + kClient + " direct fill " +
                        std::to_string(256 * kMiB) + " 4 2>/dev/null")
                           .c_str(),
                       "r");
  ASSERT_EQ(AwaitUsage("steady", kGiB)["used_bytes"].get<uint64_t>(), kGiB);
  StopAgent(SIGKILL);
  gpumux::testing::SetLedgerVersion((dir_ / "run" / "private" / "gpu0.ledger").string(),
                                    gpumux::node::kLedgerVersion + 1);
  StartRealAgent(env);
  json after = Call("GET", "/v1/tenants/steady", json(), 200);
  EXPECT_EQ(after["used_bytes"].get<uint64_t>(), kGiB) << after;
  EXPECT_EQ(after["processes"].size(), 1u) << after;
  char buf[512] = {0};
  fread(buf, 1, sizeof(buf) - 1, client);
  EXPECT_EQ(WEXITSTATUS(pclose(client)), 0) << buf;
  EXPECT_EQ(json::parse(buf)["allocated"].get<uint64_t>(), kGiB) << buf;
}

// Per-pod metrics: a tenant admitted with its pod's namespace, name and container (or its Slurm
// job) carries them on every metric, across a restart; and every query of the Grafana dashboard
// (deploy/kubernetes/common/gpumux-pods.json) names a metric and labels gpumuxd exports.
TEST_F(AgentTest, MetricsCarryThePodAndTheDashboardAsksOnlyWhatGpumuxdExports) {
  StartAgent();
  Call("POST", "/v1/tenants",
       {{"id", "k1"},
        {"gpu", 0},
        {"memory", "1GiB"},
        {"pod_namespace", "ml"},
        {"pod", "llama-0"},
        {"container", "server"}},
       201);
  Call("POST", "/v1/tenants", {{"id", "s1"}, {"gpu", 0}, {"memory", "1GiB"}, {"job", "1234"}}, 201);
  Call("POST", "/v1/tenants", {{"id", "bad"}, {"gpu", 0}, {"memory", "1GiB"}, {"pod", "a\"b"}},
       400);
  for (int restart = 0; restart < 2; ++restart) {
    std::string text = CallUnix(socket_, "GET", "/metrics").second;
    EXPECT_NE(text.find("gpumux_tenant_memory_quota_bytes{gpu=\"0\",tenant=\"k1\",namespace="
                        "\"ml\",pod=\"llama-0\",container=\"server\"} 1073741824"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("gpumux_tenant_gpu_time_seconds_total{gpu=\"0\",tenant=\"s1\",job="
                        "\"1234\"} 0"),
              std::string::npos)
        << text;
    if (restart == 0) {
      StopAgent(SIGTERM);
      StartAgent();
    }
  }
  // What gpumuxd exports: metric families and label names.
  std::string text = CallUnix(socket_, "GET", "/metrics").second;
  std::set<std::string> families, labels;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("# TYPE ", 0) == 0) families.insert(line.substr(7, line.find(' ', 7) - 7));
    if (line.empty() || line[0] == '#') continue;
    std::regex label("([a-z_]+)=\"");
    for (std::sregex_iterator m(line.begin(), line.end(), label), end; m != end; ++m)
      labels.insert((*m)[1]);
  }
  std::ifstream in(std::string(GPUMUX_SOURCE_DIR) + "/deploy/kubernetes/common/gpumux-pods.json");
  json dashboard = json::parse(in);
  int queries = 0;
  for (const json& panel : dashboard["panels"]) {
    for (const json& target : panel["targets"]) {
      std::string expr = target["expr"];
      ++queries;
      std::regex metric("gpumux_[a-z_]+");
      for (std::sregex_iterator m(expr.begin(), expr.end(), metric), end; m != end; ++m)
        EXPECT_TRUE(families.count(m->str())) << panel["title"] << ": no metric " << m->str();
      // Labels in "by (...)" and in selectors "{name=...}".
      std::regex by("by \\(([a-z_, ]+)\\)"), selector("[{,]([a-z_]+)(=|!=|=~|!~)\"");
      for (std::sregex_iterator m(expr.begin(), expr.end(), by), end; m != end; ++m) {
        std::string names = (*m)[1];
        std::regex word("[a-z_]+");
        for (std::sregex_iterator w(names.begin(), names.end(), word); w != end; ++w)
          EXPECT_TRUE(labels.count(w->str())) << panel["title"] << ": no label " << w->str();
      }
      for (std::sregex_iterator m(expr.begin(), expr.end(), selector), end; m != end; ++m)
        EXPECT_TRUE(labels.count((*m)[1])) << panel["title"] << ": no label " << (*m)[1];
    }
  }
  EXPECT_GE(queries, 8);
}

TEST_F(AgentTest, MetricsPassPromtool) {
  StartAgent();
  // Ids are letters, digits and "._-" (quotes and newlines are refused at admission), so labels
  // need no escaping; every character an id may hold is in this one.
  json a =
      Call("POST", "/v1/tenants", {{"id", "metered-one_1.x"}, {"gpu", 0}, {"memory", "1GiB"}}, 201);
  Sh(Env(a) + kClient + " direct fill " + std::to_string(256 * kMiB) + " 0");
  auto [status, text] = CallUnix(socket_, "GET", "/metrics");
  ASSERT_EQ(status, 200);
  EXPECT_NE(
      text.find("gpumux_tenant_refused_allocations_total{gpu=\"0\",tenant=\"metered-one_1.x\"} 1"),
      std::string::npos)
      << text;
  std::ofstream(dir_ / "metrics.txt") << text;
  auto [code, out] = Sh("promtool check metrics < " + (dir_ / "metrics.txt").string() + " 2>&1");
  EXPECT_EQ(code, 0)
      << "promtool (Debian package prometheus, installed by scripts/install-deps.sh): " << out;
}

}  // namespace

namespace {

// Through NVML (the NVIDIA backend), the layout changes instance by instance too: the busy GPU
// instance is kept (its MIG device, its UUID), the idle one destroyed, the new one created.
TEST_F(AgentTest, OnARealGpuAMigLayoutChangesAroundABusyInstanceKeepingItsDevice) {
  StartRealAgent(NvmlH100(dir_));
  Call("PUT", "/v1/gpus/0", {{"mode", "mig"}, {"layout", {"1g.10gb@6", "3g.40gb@0"}}}, 200);
  json gpu = Call("GET", "/v1/gpus", json(), 200)["gpus"][0];
  ASSERT_EQ(gpu["instances"].size(), 2u) << gpu;
  const std::string idle = gpu["instances"][0]["uuid"], busy = gpu["instances"][1]["uuid"];
  Call("POST", "/v1/tenants", {{"id", "busy"}, {"device", busy}, {"memory", 4 * kGiB}}, 201);
  Call("PUT", "/v1/gpus/0", {{"mode", "mig"}, {"layout", {"3g.40gb@4"}}}, 409);
  Call("PUT", "/v1/gpus/0", {{"mode", "mig"}, {"layout", {"2g.20gb@4", "3g.40gb@0"}}}, 200);
  gpu = Call("GET", "/v1/gpus", json(), 200)["gpus"][0];
  ASSERT_EQ(gpu["instances"].size(), 2u) << gpu;
  EXPECT_EQ(gpu["instances"][1]["uuid"], busy) << "the same MIG device: " << gpu;
  EXPECT_NE(gpu["instances"][0]["uuid"], idle) << "a new one: " << gpu;
  EXPECT_NE(gpu["instances"][0]["name"].get<std::string>().find("2g.20gb"), std::string::npos)
      << gpu;
  EXPECT_EQ(Call("GET", "/v1/tenants/busy", json(), 200)["instance"], 1);
}

// Issue 45: the driver refuses to destroy a compute instance a process runs on, even one gpumuxd
// does not know (a program started by hand with CUDA_VISIBLE_DEVICES=MIG-...). A layout that would
// remove that instance fails with the driver's answer and changes nothing; once the program has
// ended, the same layout is made.
TEST_F(AgentTest, OnARealGpuTheDriverRefusesToRemoveAnInstanceAProgramRunsOn) {
  auto env = NvmlH100(dir_);
  StartRealAgent(env);
  Call("PUT", "/v1/gpus/0", {{"mode", "mig"}, {"layout", {"1g.10gb@6", "3g.40gb@0"}}}, 200);
  json before = Call("GET", "/v1/gpus", json(), 200)["gpus"][0];
  ASSERT_EQ(before["instances"].size(), 2u) << before;
  const std::string used = before["instances"][0]["uuid"];
  std::string prefix = "env";
  for (const auto& [k, v] : env) prefix += " " + k + "='" + v + "'";
  FILE* program = popen((prefix + " CUDA_VISIBLE_DEVICES=" + used + " " + kClient +
                         " direct take " + std::to_string(kGiB) + " 4 2>&1")
                            .c_str(),
                        "r");
  // It prints once it holds its memory (registered with the driver since its first call), then
  // holds it 4 s.
  char line[512] = {0};
  ASSERT_NE(fgets(line, sizeof(line), program), nullptr);
  EXPECT_NE(std::string(line).find("\"allocated\": " + std::to_string(kGiB)), std::string::npos)
      << line;
  json refused = Call("PUT", "/v1/gpus/0", {{"mode", "mig"}, {"layout", {"3g.40gb@0"}}}, 409);
  EXPECT_NE(refused["error"].get<std::string>().find("is a process using it"), std::string::npos)
      << refused;
  json after = Call("GET", "/v1/gpus", json(), 200)["gpus"][0];
  EXPECT_EQ(after["instances"], before["instances"]) << "nothing changed";
  EXPECT_EQ(WEXITSTATUS(pclose(program)), 0) << "it ran to its end";
  Call("PUT", "/v1/gpus/0", {{"mode", "mig"}, {"layout", {"3g.40gb@0"}}}, 200);
  after = Call("GET", "/v1/gpus", json(), 200)["gpus"][0];
  ASSERT_EQ(after["instances"].size(), 1u) << after;
  EXPECT_EQ(after["instances"][0]["uuid"], before["instances"][1]["uuid"]) << after;
}

TEST_F(AgentTest, ANewMigLayoutKeepsNoRoomFromTheOldOne) {
  StartAgent();
  Call("PUT", "/v1/gpus/0", {{"mode", "mig"}, {"layout", {"3g.40gb"}}}, 200);
  // Instance 0 becomes a 9.5 GiB 1g.10gb: two 5 GiB quotas no longer fit in it.
  Call("PUT", "/v1/gpus/0", {{"mode", "mig"}, {"layout", {"1g.10gb"}}}, 200);
  Call("POST", "/v1/tenants", {{"id", "a"}, {"gpu", 0}, {"instance", 0}, {"memory", "5GiB"}}, 201);
  json over = Call("POST", "/v1/tenants",
                   {{"id", "b"}, {"gpu", 0}, {"instance", 0}, {"memory", "5GiB"}}, 409);
  EXPECT_NE(over["error"].get<std::string>().find("quotas would sum"), std::string::npos) << over;
}

}  // namespace
