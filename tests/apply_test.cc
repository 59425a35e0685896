// The plan reaches the node: `gpumux plan --apply` and `gpumux apply` bring gpumuxd on a simulated
// 8-GPU node to what a plan asks (modes, MIG layouts, quotas), every tenant's programs are then
// held to its planned quota, applying twice changes nothing, and a plan that cannot be applied
// changes nothing either.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "agent_fixture.h"
#include "share/plan_file_test_support.h"

namespace {

using gpumux::testing::AgentTest;
using gpumux::testing::kGiB;
using gpumux::testing::kMiB;
using nlohmann::json;

const std::string kGpumux = GPUMUX_BINARY;
const std::string kClient = GPUMUX_ALLOC_CLIENT;
const std::string kExample = GPUMUX_SOURCE_DIR "/examples/p5-48xlarge.yaml";

class ApplyTest : public AgentTest {
 protected:
  void StartEightGpuNode() { StartAgentOn({"--sim", "H100-SXM5-80GB", "--gpus", "8"}, {}); }

  // Writes `text` into the test's folder as `name`; returns its path.
  std::string WriteFile(const std::string& name, const std::string& text) {
    std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }

  // `gpumux ARGS --agent SOCKET`, with stderr.
  std::pair<int, std::string> Gpumux(const std::string& args) {
    gpumux::testing::ShellResult r =
        gpumux::testing::Shell(kGpumux + " " + args + " --agent " + socket_ + " 2>&1");
    return {r.exit_code, r.out};
  }

  // The plan's "agent" section, as `gpumux plan --json` writes it.
  static json AgentSection(const std::string& plan_file) {
    auto [code, out] = Sh(kGpumux + " plan " + plan_file + " --json");
    EXPECT_EQ(code, 0) << out;
    return json::parse(out)["agent"];
  }

  // Runs a program as each of the plan's tenants: it allocates 1 MiB at a time until refused, and
  // is refused at exactly the tenant's quota.
  void ExpectEveryTenantHeldToItsQuota(const json& agent_section) {
    ASSERT_FALSE(agent_section["tenants"].empty());
    for (const json& t : agent_section["tenants"]) {
      std::string id = t["id"].get<std::string>();
      json joined = Call("POST", "/v1/tenants", {{"id", id}, {"join", true}}, 200);
      EXPECT_EQ(joined["memory_bytes"], t["memory"]) << id;
      auto [code, out] = Sh(Env(joined) + kClient + " direct fill " + std::to_string(kMiB) + " 0");
      ASSERT_EQ(code, 0) << id << ": " << out;
      json result = json::parse(out);
      EXPECT_EQ(result["allocated"].get<uint64_t>(), t["memory"].get<uint64_t>()) << id;
      EXPECT_EQ(result["last_error"].get<int>(), 2)
          << id << ": refused with CUDA_ERROR_OUT_OF_MEMORY";
    }
  }
};

TEST_F(ApplyTest, TheWorkedExampleRunsOnAnEightGpuNodeAtItsPlannedQuotas) {
  StartEightGpuNode();
  json agent = AgentSection(kExample);

  // A dry run prints the calls and makes none.
  auto [dry_code, dry] = Gpumux("plan " + kExample + " --apply --dry-run");
  ASSERT_EQ(dry_code, 0) << dry;
  size_t calls = agent["tenants"].size();
  for (const json& g : agent["gpus"]) calls += g["mode"] != "timeslice";
  EXPECT_NE(dry.find("would make " + std::to_string(calls) + " calls"), std::string::npos) << dry;
  EXPECT_TRUE(Call("GET", "/v1/tenants", json(), 200)["tenants"].empty());

  auto [code, out] = Gpumux("plan " + kExample + " --apply");
  ASSERT_EQ(code, 0) << out;
  json gpus = Call("GET", "/v1/gpus", json(), 200)["gpus"];
  ASSERT_EQ(gpus.size(), 8u);
  for (size_t i = 0; i < gpus.size(); ++i) {
    std::string planned =
        i < agent["gpus"].size() ? agent["gpus"][i]["mode"].get<std::string>() : "timeslice";
    EXPECT_EQ(gpus[i]["mode"], planned) << "GPU " << i;
  }
  EXPECT_EQ(Call("GET", "/v1/tenants", json(), 200)["tenants"].size(), agent["tenants"].size());
  ExpectEveryTenantHeldToItsQuota(agent);

  // The plan's JSON is what gpumux apply takes; the node already runs it.
  std::string plan_json = (dir_ / "plan.json").string();
  ASSERT_EQ(Sh(kGpumux + " plan " + kExample + " --json > " + plan_json).first, 0);
  auto [again_code, again] = Gpumux("apply " + plan_json);
  EXPECT_EQ(again_code, 0) << again;
  EXPECT_NE(again.find("nothing to do"), std::string::npos) << again;
}

TEST_F(ApplyTest, AMigPlanLaysOutItsInstancesAndEachTenantHoldsOne) {
  StartEightGpuNode();
  std::string plan = WriteFile("mig.yaml", gpumux::kMigPlanYaml);
  json agent = AgentSection(plan);
  ASSERT_EQ(agent["gpus"].size(), 1u);
  ASSERT_EQ(agent["gpus"][0]["mode"], "mig");
  auto [code, out] = Gpumux("plan " + plan + " --apply");
  ASSERT_EQ(code, 0) << out;
  json gpu = Call("GET", "/v1/gpus", json(), 200)["gpus"][0];
  EXPECT_EQ(gpu["mode"], "mig");
  EXPECT_EQ(gpu["layout"], agent["gpus"][0]["layout"]) << "placed where the plan placed them";
  EXPECT_EQ(gpu["instances"].size(), agent["tenants"].size());
  ExpectEveryTenantHeldToItsQuota(agent);
  EXPECT_NE(Gpumux("plan " + plan + " --apply").second.find("nothing to do"), std::string::npos);
}

// Re-planning a node that runs tenants (issue 45): 'large' runs a program holding 8 GiB on a
// 4g.40gb that an earlier layout made. A plan made without the node gives it a 3g.40gb, which
// `gpumux apply` refuses, naming the instance that would have to drain; `gpumux plan --apply`
// plans around it: the 4g.40gb stays where it is, the two small tenants get instances beside it,
// and the program runs on with its memory.
TEST_F(ApplyTest, APlanForANodeThatRunsTenantsKeepsTheirInstancesAndChangesOnlyIdleOnes) {
  StartEightGpuNode();
  std::string plan = WriteFile("mig.yaml", gpumux::kMigPlanYaml);
  Call("PUT", "/v1/gpus/0", {{"mode", "mig"}, {"layout", {"4g.40gb", "1g.10gb@6"}}}, 200);
  json large = Call("POST", "/v1/tenants",
                    {{"id", "large"}, {"gpu", 0}, {"instance", 0}, {"memory", 8 * kGiB}}, 201);
  FILE* program = popen(
      (Env(large) + kClient + " direct fill " + std::to_string(kGiB) + " 8 2>/dev/null").c_str(),
      "r");
  ASSERT_EQ(AwaitUsage("large", 8 * kGiB, 5)["used_bytes"].get<uint64_t>(), 8 * kGiB);

  std::string plain = (dir_ / "plain.json").string();
  ASSERT_EQ(Sh(kGpumux + " plan " + plan + " --json > " + plain).first, 0);
  auto [refused_code, refused] = Gpumux("apply " + plain);
  EXPECT_EQ(refused_code, 3) << refused;
  EXPECT_NE(refused.find("must drain first (remove their tenants): instance 0 (4g.40gb at 0: "
                         "'large')"),
            std::string::npos)
      << refused;

  auto [code, out] = Gpumux("plan " + plan + " --apply");
  ASSERT_EQ(code, 0) << out;
  json gpu = Call("GET", "/v1/gpus", json(), 200)["gpus"][0];
  ASSERT_EQ(gpu["layout"].size(), 3u) << gpu;
  EXPECT_EQ(gpu["layout"][0], "4g.40gb@0") << gpu;
  json after = Call("GET", "/v1/tenants/large", json(), 200);
  EXPECT_EQ(after["instance"], 0);
  EXPECT_EQ(after["used_bytes"].get<uint64_t>(), 8 * kGiB) << "its memory intact: " << after;
  EXPECT_EQ(after["processes"].size(), 1u) << "its program still there: " << after;
  json tenants = Call("GET", "/v1/tenants", json(), 200)["tenants"];
  EXPECT_EQ(tenants.size(), 3u) << tenants;
  EXPECT_NE(Gpumux("plan " + plan + " --apply").second.find("nothing to do"), std::string::npos);
  char buf[512] = {0};
  fread(buf, 1, sizeof(buf) - 1, program);
  EXPECT_EQ(WEXITSTATUS(pclose(program)), 0) << buf;
  EXPECT_EQ(json::parse(buf)["allocated"].get<uint64_t>(), 8 * kGiB) << buf;
}

// The same on GPU 5 of the eight: the plan of one GPU is for GPU 5, where 'large' runs, not GPU 0
// (which would have moved it); GPU 0 stays as it was.
TEST_F(ApplyTest, APlanOfOneGpuForANodeOfEightIsForTheGpuItsTenantRunsOn) {
  StartEightGpuNode();
  std::string plan = WriteFile("mig.yaml", gpumux::kMigPlanYaml);
  Call("PUT", "/v1/gpus/5", {{"mode", "mig"}, {"layout", {"4g.40gb", "1g.10gb@6"}}}, 200);
  Call("POST", "/v1/tenants", {{"id", "large"}, {"gpu", 5}, {"instance", 0}, {"memory", 8 * kGiB}},
       201);
  auto [code, out] = Gpumux("plan " + plan + " --apply");
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("GPU 5 (H100-SXM5-80GB): mig"), std::string::npos) << out;
  json gpus = Call("GET", "/v1/gpus", json(), 200)["gpus"];
  ASSERT_EQ(gpus[5]["layout"].size(), 3u) << gpus[5];
  EXPECT_EQ(gpus[5]["layout"][0], "4g.40gb@0");
  EXPECT_EQ(gpus[0]["mode"], "timeslice") << "a GPU the plan does not name is left alone";
  json tenants = Call("GET", "/v1/tenants", json(), 200)["tenants"];
  ASSERT_EQ(tenants.size(), 3u) << tenants;
  for (const json& t : tenants) EXPECT_EQ(t["gpu"], 5) << t;
  EXPECT_EQ(Call("GET", "/v1/tenants/large", json(), 200)["instance"], 0);
}

// The plan carries each tenant's priority: a server whose users wait on each token beside a batch
// job on one time-sliced GPU is admitted high priority, the batch job normal; a plan that changes
// a priority updates the tenant in place.
TEST_F(ApplyTest, AServerBesideABatchJobIsAdmittedHighPriority) {
  StartEightGpuNode();
  std::string plan = WriteFile("slo.yaml", R"(fleet: [{gpu: H100-SXM5-80GB, count: 1}]
strategies: [timeslice]
tenants:
  - name: chat
    workload: {kind: llm-decode, model: Llama-3-8B, dtype: bf16, batch: 1, context: 2048}
    slo: {max_ms_per_token: 40}
  - name: batch
    workload: {kind: generic, memory: 8 GB, bandwidth: 300 GB/s, compute: 20 TFLOPS}
    slo: {max_slowdown: 3}
)");
  json agent = AgentSection(plan);
  ASSERT_EQ(agent["gpus"].size(), 1u);
  ASSERT_EQ(agent["gpus"][0]["mode"], "timeslice");
  auto [shown_code, shown] = Gpumux("plan " + plan);
  EXPECT_NE(shown.find("high"), std::string::npos) << "gpumux plan shows it: " << shown;
  auto [code, out] = Gpumux("plan " + plan + " --apply");
  ASSERT_EQ(code, 0) << out;
  json chat = Call("GET", "/v1/tenants/chat", json(), 200);
  json batch = Call("GET", "/v1/tenants/batch", json(), 200);
  EXPECT_EQ(chat["priority"], "high") << chat;
  EXPECT_EQ(batch["priority"], "normal") << batch;
  EXPECT_NE(Gpumux("plan " + plan + " --apply").second.find("nothing to do"), std::string::npos);

  // The same plan with the server normal, as PLAN.json: one update, in place.
  std::string plan_json = (dir_ / "plan.json").string();
  json whole;
  {
    auto [json_code, text] = Sh(kGpumux + " plan " + plan + " --json");
    ASSERT_EQ(json_code, 0) << text;
    whole = json::parse(text);
  }
  for (json& t : whole["agent"]["tenants"])
    if (t["id"] == "chat") t["priority"] = "normal";
  std::ofstream(plan_json) << whole.dump();
  auto [update_code, update] = Gpumux("apply " + plan_json);
  ASSERT_EQ(update_code, 0) << update;
  EXPECT_NE(update.find("update chat"), std::string::npos) << update;
  EXPECT_EQ(Call("GET", "/v1/tenants/chat", json(), 200)["priority"], "normal");
}

TEST_F(ApplyTest, APlanIsRefusedAsAWholeWhileAGpuItWouldChangeHasLiveTenants) {
  StartEightGpuNode();
  json squatter =
      Call("POST", "/v1/tenants", {{"id", "squatter"}, {"gpu", 1}, {"memory", "1GiB"}}, 201);
  // It holds 256 MiB on GPU 1 for 3 s; the plan wants GPU 1 under MPS for its own tenants.
  FILE* running = popen(
      (Env(squatter) + kClient + " direct fill " + std::to_string(256 * kMiB) + " 3 2>/dev/null")
          .c_str(),
      "r");
  for (int i = 0;
       i < 100 && Call("GET", "/v1/tenants/squatter", json(), 200).value("used_bytes", 0ull) == 0;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // A plan written without the node numbers its GPUs 0 to 4: applied, it would change GPU 1.
  std::string plain = (dir_ / "plain.json").string();
  ASSERT_EQ(Sh(kGpumux + " plan " + kExample + " --json > " + plain).first, 0);
  auto [code, out] = Gpumux("apply " + plain);
  EXPECT_EQ(code, 3) << out;
  EXPECT_NE(out.find("GPU 1 has tenant 'squatter'"), std::string::npos) << out;
  // Nothing changed: not GPU 0, which could have been, nor any tenant.
  json gpus = Call("GET", "/v1/gpus", json(), 200)["gpus"];
  for (const json& g : gpus) EXPECT_EQ(g["mode"], "timeslice") << g;
  json tenants = Call("GET", "/v1/tenants", json(), 200)["tenants"];
  ASSERT_EQ(tenants.size(), 1u);
  EXPECT_EQ(tenants[0]["id"], "squatter");
  // A plan made for the node (--apply) takes the idle GPUs instead and leaves GPU 1 alone.
  auto [live_code, live_out] = Gpumux("plan " + kExample + " --apply");
  EXPECT_EQ(live_code, 0) << live_out;
  gpus = Call("GET", "/v1/gpus", json(), 200)["gpus"];
  EXPECT_EQ(gpus[1]["mode"], "timeslice");
  for (const json& t : Call("GET", "/v1/tenants", json(), 200)["tenants"])
    EXPECT_TRUE(t["id"] == "squatter" || t["gpu"] != 1) << t;
  EXPECT_EQ(Call("GET", "/v1/tenants/squatter", json(), 200)["gpu"], 1);
  pclose(running);
}

TEST_F(ApplyTest, ABadPlanFileIsABadInputThatNamesTheField) {
  StartEightGpuNode();
  std::string plan_json = (dir_ / "plan.json").string();
  json plan = {
      {"agent",
       {{"gpus", {{{"gpu", 0}, {"kind", "H100-SXM5-80GB"}, {"memory_bytes", 1}, {"mode", "mps"}}}},
        {"tenants", {{{"id", "x"}, {"gpu", 0}, {"memory", "lots"}}}}}}};
  std::ofstream(plan_json) << plan.dump();
  auto [code, out] = Gpumux("apply " + plan_json);
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("agent.tenants[0]: memory"), std::string::npos) << out;
  std::ofstream(plan_json) << "{not json";
  EXPECT_EQ(Gpumux("apply " + plan_json).first, 2);
  EXPECT_TRUE(Call("GET", "/v1/tenants", json(), 200)["tenants"].empty());
}

// A node measured once (`gpumux calibrate`) and given to gpumuxd (--calibration): gpumuxd serves
// the figures with each GPU they were measured on, a plan made for the node (--apply) uses them
// without being told, and applying a plan made without them says so. A calibration of another GPU
// stops gpumuxd from starting, saying why.
TEST_F(ApplyTest, ANodesCalibrationIsServedWithItsGpusAndPlansForTheNodeUseIt) {
  std::string file = (dir_ / "h100.json").string();
  auto [measured, how] =
      Sh(kGpumux + " calibrate --sim H100 --seconds 0.2 --processes 2 --out " + file + " 2>&1");
  ASSERT_EQ(measured, 0) << how;
  json c = json::parse(std::ifstream(file));
  c["bandwidth_bytes_per_second"] = 0.8 * c["bandwidth_bytes_per_second"].get<double>();
  std::ofstream(file) << c.dump();  // a GPU slower than its catalog kind, as measured

  StartAgentOn({"--sim", "H100-SXM5-80GB", "--gpus", "8", "--calibration", file}, {});
  json gpus = Call("GET", "/v1/gpus", json(), 200)["gpus"];
  ASSERT_EQ(gpus.size(), 8u);
  for (const json& g : gpus) {
    ASSERT_TRUE(g.contains("calibration")) << g;
    EXPECT_EQ(g["calibration"]["bandwidth_bytes_per_second"], c["bandwidth_bytes_per_second"]);
    EXPECT_EQ(g["calibration_file"], file);
  }
  // ... and in its metrics, which promtool accepts.
  auto [metrics_status, metrics] = gpumux::service::CallUnix(socket_, "GET", "/metrics");
  ASSERT_EQ(metrics_status, 200);
  for (int gpu : {0, 7})
    EXPECT_NE(metrics.find("gpumux_gpu_calibrated_bandwidth_bytes_per_second{gpu=\"" +
                           std::to_string(gpu) + "\"} "),
              std::string::npos)
        << metrics;
  EXPECT_NE(metrics.find("gpumux_gpu_calibrated_flops_per_second{gpu=\"0\"} "), std::string::npos);
  std::ofstream(dir_ / "metrics.txt") << metrics;
  auto [promtool, verdict] =
      Sh("promtool check metrics < " + (dir_ / "metrics.txt").string() + " 2>&1");
  EXPECT_EQ(promtool, 0) << verdict;

  // The plan for this node (--apply) is made with the node's calibration: the rates it predicts
  // are those the same file given by hand gives, not the catalog's (batch-1 decoders that state no
  // efficiency take the measured one).
  std::string plan_file = (dir_ / "chat.yaml").string();
  std::ofstream(plan_file) << "fleet:\n  - {gpu: H100-SXM5-80GB, count: 8}\ntenants:\n"
                              "  - name: chat\n    count: 3\n    workload: {kind: llm-decode, "
                              "model: Llama-2-13B, dtype: bf16, batch: 1, context: 2048}\n"
                              "    slo: {min_tokens_per_second: 20}\n";
  auto rates = [](const std::string& plan_json) {
    std::map<std::string, double> rate;
    json plan = json::parse(plan_json);
    for (const json& g : plan["gpus"])
      for (const json& t : g["chosen"]["tenants"]) rate[t["name"]] = t["solo_rate"];
    return rate;
  };
  auto [plain_code, plain] = Sh(kGpumux + " plan " + plan_file + " --json");
  ASSERT_EQ(plain_code, 0) << plain;
  auto [told_code, told] = Sh(kGpumux + " plan " + plan_file + " --json --calibration " + file);
  ASSERT_EQ(told_code, 0) << told;
  auto [code, out] = Sh(kGpumux + " plan " + plan_file + " --json --apply --dry-run --agent " +
                        socket_ + " 2>/dev/null");
  ASSERT_EQ(code, 0) << out;
  json calibrated = json::parse(out);
  ASSERT_EQ(calibrated["calibrations"].size(), 1u) << calibrated["calibrations"];
  std::string used = calibrated["calibrations"][0].get<std::string>();
  EXPECT_NE(used.find(file), std::string::npos) << used;
  EXPECT_NE(used.find("gpumuxd at " + socket_), std::string::npos) << used;
  std::map<std::string, double> node = rates(out), by_hand = rates(told), catalog = rates(plain);
  ASSERT_EQ(node.size(), 3u) << out;
  for (const auto& [name, rate] : node) {
    EXPECT_DOUBLE_EQ(rate, by_hand[name]) << name;
    EXPECT_GT(std::abs(rate / catalog[name] - 1), 0.05) << name << ": " << rate << " vs the "
                                                        << "catalog's " << catalog[name];
  }
  // Told a calibration, a plan for the node uses that one.
  auto [told_node_code, told_node] =
      Sh(kGpumux + " plan " + plan_file + " --json --apply --dry-run --agent " + socket_ +
         " --calibration " + file + " 2>/dev/null");
  EXPECT_EQ(json::parse(told_node)["calibrations"][0].get<std::string>().find("gpumuxd"),
            std::string::npos);

  // A plan made without the node's calibration is applied with a note that says so.
  std::string plan_json = (dir_ / "plan.json").string();
  std::ofstream(plan_json) << plain;
  auto [apply_code, applied] = Gpumux("apply " + plan_json + " --dry-run");
  EXPECT_EQ(apply_code, 0) << applied;
  EXPECT_NE(applied.find("planned without a calibration"), std::string::npos) << applied;
  EXPECT_NE(applied.find(file), std::string::npos) << applied;

  // gpumuxd given a calibration of another GPU, or a broken one, does not start, and says why.
  for (const char* kind : {"A100-SXM4-80GB", "H100-SXM5-80GB"}) {
    std::string bad = (dir_ / "bad.json").string();
    std::ofstream(bad) << (std::string(kind) == "H100-SXM5-80GB" ? "{\"gpu\": 1}" : c.dump());
    gpumux::testing::ShellResult r = gpumux::testing::Shell(
        std::string(GPUMUXD_BINARY) + " --sim " + kind + " --calibration " + bad + " --socket " +
        (dir_ / "b.sock").string() + " --tenant-socket " + (dir_ / "bt.sock").string() +
        " --state " + (dir_ / "b.db").string() + " --runtime-dir " + (dir_ / "brun").string() +
        " 2>&1");
    EXPECT_EQ(r.exit_code, 2) << kind << ": " << r.out;
    EXPECT_NE(r.out.find(bad), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(std::string(kind) == "H100-SXM5-80GB" ? "'gpu' must be a string"
                                                               : "none of this node's GPUs"),
              std::string::npos)
        << r.out;
  }
}

// Told no calibration, gpumuxd takes the node's own (GPUMUX_CALIBRATION_DIR) for the GPUs they were
// measured on, and starts over one of a GPU it does not have (it uses none of that).
TEST_F(ApplyTest, GpumuxdTakesTheNodesOwnCalibrationsOfItsGpus) {
  std::filesystem::path dir = dir_ / "calibrations";
  std::filesystem::create_directories(dir);
  auto [measured, how] = Sh(kGpumux + " calibrate --sim H100 --seconds 0.1 --processes 1 --out " +
                            (dir / "H100-SXM5-80GB.json").string() + " 2>&1");
  ASSERT_EQ(measured, 0) << how;
  json other = json::parse(std::ifstream(dir / "H100-SXM5-80GB.json"));
  other["gpu"] = "A100-SXM4-80GB";
  other["device_name"] = "NVIDIA A100-SXM4-80GB";
  other["simulated"] = false;
  std::ofstream(dir / "A100-SXM4-80GB.json") << other.dump();
  StartAgentOn({"--sim", "H100-SXM5-80GB", "--gpus", "2"},
               {{"GPUMUX_CALIBRATION_DIR", dir.string()}});
  for (const json& g : Call("GET", "/v1/gpus", json(), 200)["gpus"]) {
    ASSERT_TRUE(g.contains("calibration")) << g;
    EXPECT_EQ(g["calibration_file"], (dir / "H100-SXM5-80GB.json").string());
  }
}

// Five plans that a naive pre-check passes and gpumuxd refuses midway (issue 21): each is refused
// before the first call, and the node is left as it was.
TEST_F(ApplyTest, PlansGpumuxdWouldRefuseMidwayChangeNothing) {
  StartEightGpuNode();
  auto plan_with = [](const json& gpu1, const json& tenant) {
    json ok = {{"id", "fine"}, {"gpu", 0}, {"memory", 1ull << 30}};
    return json{{"agent",
                 {{"gpus",
                   {{{"gpu", 0},
                     {"kind", "H100-SXM5-80GB"},
                     {"memory_bytes", 85899345920ull},
                     {"mode", "mps"}},
                    gpu1}},
                  {"tenants", {ok, tenant}}}}};
  };
  json mps1 = {
      {"gpu", 1}, {"kind", "H100-SXM5-80GB"}, {"memory_bytes", 85899345920ull}, {"mode", "mps"}};
  json mig1 = {{"gpu", 1},
               {"kind", "H100-SXM5-80GB"},
               {"memory_bytes", 85899345920ull},
               {"mode", "mig"},
               {"layout", {"7g.80gb", "7g.80gb"}}};
  uint64_t half = 1ull << 63;
  std::vector<json> plans = {
      plan_with(mps1, {{"id", "a/b"}, {"gpu", 1}, {"memory", 1ull << 30}}),
      plan_with(mps1, {{"id", std::string(64, 'x')}, {"gpu", 1}, {"memory", 1ull << 30}}),
      plan_with(mps1, {{"id", "tiny"}, {"gpu", 1}, {"memory", 1ull << 30}, {"compute", "0.01%"}}),
      plan_with(mps1, {{"id", "huge"}, {"gpu", 0}, {"memory", half}}),
      plan_with(mig1, {{"id", "mig"}, {"gpu", 1}, {"instance", 0}, {"memory", 1ull << 30}}),
  };
  plans[3]["agent"]["tenants"][0]["memory"] = half;  // with "huge", past 2^64 bytes on GPU 0
  for (const json& plan : plans) {
    std::string path = (dir_ / "plan.json").string();
    std::ofstream(path) << plan.dump();
    auto [code, out] = Gpumux("apply " + path);
    EXPECT_TRUE(code == 2 || code == 3) << code << ": " << out;
    EXPECT_EQ(out.find("was refused"), std::string::npos) << "refused before any call: " << out;
    EXPECT_NE(out.find("gpumux: "), std::string::npos) << "and says why: " << out;
    json gpus = Call("GET", "/v1/gpus", json(), 200)["gpus"];  // kept: the loop reads into it
    for (const json& g : gpus) EXPECT_EQ(g["mode"], "timeslice") << plan.dump() << " changed " << g;
    EXPECT_TRUE(Call("GET", "/v1/tenants", json(), 200)["tenants"].empty()) << plan.dump();
  }
}

}  // namespace
