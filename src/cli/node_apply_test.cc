#include "cli/node_apply.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <mutex>
#include <thread>

#include "base/error.h"
#include "cli/node_plan_json.h"
#include "service/http_server.h"

namespace gpumux {
namespace {

using nlohmann::json;

constexpr uint64_t kGiB = 1ull << 30;

// Two planned H100s: GPU 0 under MPS with two tenants, GPU 1 in MIG with one tenant per instance.
NodePlan TwoGpuPlan() {
  NodePlan p;
  p.gpus = {{0, "H100-SXM5-80GB", 80 * kGiB, ShareMode::kMps, {}},
            {1, "H100-SXM5-80GB", 80 * kGiB, ShareMode::kMig, {"3g.40gb@0", "3g.40gb@4"}}};
  p.tenants = {{"a", "a", 0, -1, 50 * kGiB, 30 * kGiB, std::nullopt},
               {"b", "b", 0, -1, 30 * kGiB, 18 * kGiB, 40.0},
               {"c", "c", 1, 0, 39 * kGiB, 10 * kGiB, std::nullopt},
               {"d", "d", 1, 1, 39 * kGiB, 10 * kGiB, std::nullopt}};
  return p;
}

// `GET /v1/gpus` of a node with `n` GPUs of `memory` bytes, all time-sliced.
json Gpus(int n, uint64_t memory = 80 * kGiB) {
  json gpus = json::array();
  for (int i = 0; i < n; ++i) {
    gpus.push_back({{"index", i},
                    {"name", "H100-SXM5-80GB (simulated)"},
                    {"memory_bytes", memory},
                    {"mode", "timeslice"}});
  }
  return {{"gpus", gpus}};
}

json Tenant(const std::string& id, int gpu, int instance, uint64_t quota, double cap = 100,
            int processes = 0) {
  json procs = json::array();
  for (int i = 0; i < processes; ++i) procs.push_back({{"pid", 100 + i}, {"used_bytes", 1}});
  return {{"id", id},
          {"gpu", gpu},
          {"instance", instance},
          {"quota_bytes", quota},
          {"compute_cap_percent", cap},
          {"processes", procs}};
}

json Tenants(json list = json::array()) { return {{"tenants", list}}; }

// The node as it is once the plan is applied.
void ApplyInPlace(const std::vector<AgentCall>& calls, json& gpus, json& tenants) {
  for (const AgentCall& c : calls) {
    if (c.path.rfind("/v1/gpus/", 0) == 0) {
      json& g = gpus["gpus"][size_t(std::stoi(c.path.substr(9)))];
      g["mode"] = c.body["mode"];
      if (c.body.contains("layout")) g["layout"] = c.body["layout"];
    } else if (c.method == "POST") {
      tenants["tenants"].push_back(Tenant(c.body["id"], c.body["gpu"], c.body.value("instance", -1),
                                          c.body["memory"], c.body.value("compute", 100.0)));
    }
  }
}

TEST(NodeApply, AFreshNodeGetsModesThenTenantsAndASecondApplyMakesNoCall) {
  json gpus = Gpus(8), tenants = Tenants();
  std::vector<AgentCall> calls = CallsToApply(TwoGpuPlan(), gpus, tenants);
  ASSERT_EQ(calls.size(), 6u);
  EXPECT_EQ(calls[0].path, "/v1/gpus/0");
  EXPECT_EQ(calls[0].body, json({{"mode", "mps"}}));
  EXPECT_EQ(calls[1].path, "/v1/gpus/1");
  EXPECT_EQ(calls[1].body, json({{"mode", "mig"}, {"layout", {"3g.40gb@0", "3g.40gb@4"}}}));
  EXPECT_EQ(calls[3].body, json({{"id", "b"},
                                 {"gpu", 0},
                                 {"memory", 30 * kGiB},
                                 {"compute", 40.0},
                                 {"priority", "normal"},
                                 {"weight", 1},
                                 {"source", "plan"}}));
  EXPECT_EQ(calls[5].body, json({{"id", "d"},
                                 {"gpu", 1},
                                 {"instance", 1},
                                 {"memory", 39 * kGiB},
                                 {"priority", "normal"},
                                 {"weight", 1},
                                 {"source", "plan"}}));
  ApplyInPlace(calls, gpus, tenants);
  EXPECT_TRUE(CallsToApply(TwoGpuPlan(), gpus, tenants).empty())
      << "applying twice is applying once";
}

// A new MIG layout on a node whose instances run tenants: applied where the plan keeps each busy
// instance at its placement and number (gpumuxd changes the rest around it), or can be laid out
// again to; refused naming every instance that would have to drain where it cannot.
TEST(NodeApply, ANewMigLayoutKeepsBusyInstancesOrNamesThoseThatMustDrain) {
  json gpus = Gpus(8), tenants = Tenants();
  ApplyInPlace(CallsToApply(TwoGpuPlan(), gpus, tenants), gpus, tenants);
  tenants["tenants"][2] = Tenant("c", 1, 0, 39 * kGiB, 100, 1);  // c runs on instance 0
  NodePlan grown = TwoGpuPlan();
  grown.gpus[1].layout = {"3g.40gb@0", "2g.20gb@4", "1g.10gb@6"};
  grown.tenants.pop_back();  // d goes: its instance is replaced
  grown.tenants.push_back({"e", "e", 1, 1, 19 * kGiB, 10 * kGiB, std::nullopt});
  tenants["tenants"].erase(3);  // d was removed first
  std::vector<AgentCall> calls = CallsToApply(grown, gpus, tenants);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].path, "/v1/gpus/1");
  EXPECT_EQ(calls[0].body["layout"], json({"3g.40gb@0", "2g.20gb@4", "1g.10gb@6"}));
  EXPECT_EQ(calls[1].body["id"], "e");

  // A plan that places c's 3g.40gb elsewhere is laid out again around it: c keeps its instance,
  // the new 2g.20gb goes where there is room, and e's instance number follows.
  NodePlan around = TwoGpuPlan();
  around.gpus[1].layout = {"2g.20gb@0", "3g.40gb@4"};
  around.tenants.pop_back();
  around.tenants[2].instance = 1;  // c on the plan's 3g.40gb
  around.tenants.push_back({"e", "e", 1, 0, 19 * kGiB, 10 * kGiB, std::nullopt});
  calls = CallsToApply(around, gpus, tenants);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].body["layout"], json({"3g.40gb@0", "2g.20gb@4"}));
  EXPECT_EQ(calls[1].body["id"], "e");
  EXPECT_EQ(calls[1].body["instance"], 1);

  // A plan that gives c a smaller instance: c must drain first, and is named.
  NodePlan shrunk = TwoGpuPlan();
  shrunk.gpus[1].layout = {"2g.20gb@0", "3g.40gb@4"};  // c (instance 0) on a 2g.20gb
  shrunk.tenants[2].memory_bytes = 19 * kGiB;
  tenants["tenants"].push_back(Tenant("d", 1, 1, 39 * kGiB));
  try {
    CallsToApply(shrunk, gpus, tenants);
    ADD_FAILURE() << "c's instance would change";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kConflict);
    EXPECT_NE(std::string(e.what()).find("instance 0 (3g.40gb at 0: 'c')"), std::string::npos)
        << e.what();
    EXPECT_EQ(std::string(e.what()).find("'d'"), std::string::npos) << "d keeps its: " << e.what();
  }
}

TEST(NodeApply, APlanThatCannotBeAppliedIsRefusedBeforeAnyCall) {
  auto refused = [](const json& gpus, const json& tenants, ErrorCode code,
                    const std::string& says) {
    try {
      CallsToApply(TwoGpuPlan(), gpus, tenants);
      ADD_FAILURE() << "applied, though: " << says;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  refused(Gpus(1), Tenants(), ErrorCode::kDoesNotFit, "this node has 1 GPU");
  refused(Gpus(2, 40 * kGiB), Tenants(), ErrorCode::kDoesNotFit,
          "the plan was made for a H100-SXM5-80GB");
  refused(Gpus(2), Tenants({Tenant("x", 0, -1, kGiB)}), ErrorCode::kConflict,
          "GPU 0 has tenant 'x'");
  refused(Gpus(2), Tenants({Tenant("a", 1, 0, kGiB)}), ErrorCode::kConflict,
          "tenant 'a' is on GPU 1 instance 0");
  // GPU 0 must become MPS; its planned tenant runs there now.
  refused(Gpus(2), Tenants({Tenant("a", 0, -1, 50 * kGiB, 100, 1)}), ErrorCode::kConflict,
          "tenant 'a' runs there");
  // A tenant of an unplanned GPU is none of the plan's business.
  EXPECT_NO_THROW(CallsToApply(TwoGpuPlan(), Gpus(3), Tenants({Tenant("x", 2, -1, kGiB, 100, 1)})));
}

TEST(NodeApply, QuotasShrinkToAGpuALittleSmallerThanItsKindAndNeverBelowTheNeed) {
  uint64_t real = 81559ull << 20;  // what the driver shows of an "80GB" H100
  std::vector<AgentCall> calls = CallsToApply(TwoGpuPlan(), Gpus(2, real), Tenants());
  uint64_t sum = 0;
  for (const AgentCall& c : calls) {
    if (c.method != "POST" || c.body["gpu"] != 0) continue;
    sum += c.body["memory"].get<uint64_t>();
    EXPECT_GE(c.body["memory"].get<uint64_t>(), c.body["id"] == "a" ? 30 * kGiB : 18 * kGiB);
  }
  EXPECT_LE(sum, real);
  EXPECT_GT(sum, real - 2 * (1ull << 20));
}

TEST(NodeApply, ChangedLimitsAreUpdatesAndShrinkingOnesComeFirst) {
  json gpus = Gpus(2), tenants = Tenants();
  ApplyInPlace(CallsToApply(TwoGpuPlan(), gpus, tenants), gpus, tenants);
  NodePlan next = TwoGpuPlan();
  next.tenants[0].memory_bytes = 60 * kGiB;  // a grows
  next.tenants[1].memory_bytes = 20 * kGiB;  // b shrinks, and loses its cap
  next.tenants[1].compute_percent.reset();
  std::vector<AgentCall> calls = CallsToApply(next, gpus, tenants);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].path, "/v1/tenants/b");
  EXPECT_EQ(
      calls[0].body,
      json({{"memory", 20 * kGiB}, {"compute", 100.0}, {"priority", "normal"}, {"weight", 1}}))
      << "memory in bytes and compute a number: one form on the wire";
  EXPECT_EQ(calls[1].path, "/v1/tenants/a");
}

TEST(NodeApply, TheAgentSectionReadsBackAndBadFieldsAreNamed) {
  NodePlan plan = TwoGpuPlan();
  NodePlan back = NodePlanFromJson(ToJson(plan), "plan.json: agent");
  ASSERT_EQ(back.gpus.size(), 2u);
  EXPECT_EQ(back.gpus[1].layout, plan.gpus[1].layout);
  ASSERT_EQ(back.tenants.size(), 4u);
  EXPECT_EQ(back.tenants[1].compute_percent, 40.0);
  EXPECT_EQ(back.tenants[3].instance, 1);
  EXPECT_EQ(back.tenants[0].need_bytes, 30 * kGiB);

  auto says = [](json j, const std::string& where) {
    try {
      NodePlanFromJson(j, "plan.json: agent");
      ADD_FAILURE() << "accepted " << j.dump();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadInput);
      EXPECT_NE(std::string(e.what()).find(where), std::string::npos) << e.what();
    }
  };
  // One field changed at a time: (tenant or GPU entry, key, value) and what the refusal says.
  struct Change {
    const char* list;
    size_t index;
    const char* key;
    json value;
    const char* says;
  };
  for (const Change& c : std::vector<Change>{
           {"tenants", 2, "memory", "lots",
            "plan.json: agent.tenants[2]: memory: 'lots' is not a number"},
           {"gpus", 0, "mode", "whole", "agent.gpus[0].mode"},
           {"tenants", 0, "gpu", 5, "agent.tenants[0].gpu: GPU 5 is not in the plan's gpus"},
           {"tenants", 1, "compute", "150%", "agent.tenants[1]: compute '150%'"},
           {"tenants", 1, "compute", 150, "agent.tenants[1]: compute: expected"},
           {"tenants", 1, "memory", json::array({kGiB, kGiB}),
            "agent.tenants[1]: memory: expected the quota in bytes"}}) {
    json j = ToJson(plan);
    j[c.list][c.index][c.key] = c.value;
    says(j, c.says);
  }
  json j = ToJson(plan);
  j.erase("gpus");
  says(j, "agent.gpus: missing");
}

// Plans that pass a naive look and would fail midway at gpumuxd are refused before any call, with
// gpumuxd's own rules.
TEST(NodeApply, WhatGpumuxdWouldRefuseIsRefusedBeforeAnyCall) {
  auto refused = [](NodePlan plan, ErrorCode code, const std::string& says) {
    try {
      CallsToApply(plan, Gpus(2), Tenants());
      ADD_FAILURE() << "applied, though: " << says;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  NodePlan p = TwoGpuPlan();
  p.tenants[1].id = "b/etc";
  refused(p, ErrorCode::kBadInput, "tenants[1] ('b'): tenant id 'b/etc'");
  p = TwoGpuPlan();
  p.tenants[1].id = std::string(64, 'b');
  refused(p, ErrorCode::kBadInput, "use 1 to 63 letters");
  p = TwoGpuPlan();
  p.tenants[1].compute_percent = 0.01;  // 0 per mille: gpumuxd refuses it
  refused(p, ErrorCode::kBadInput, "compute cap must be above 0%");
  p = TwoGpuPlan();
  p.tenants[0].memory_bytes = p.tenants[0].need_bytes = 1ull << 63;
  p.tenants[1].memory_bytes = p.tenants[1].need_bytes = 1ull << 63;
  refused(p, ErrorCode::kDoesNotFit, "the quotas sum past 2^64 bytes");
  p = TwoGpuPlan();
  p.gpus[1].layout = {"7g.80gb", "7g.80gb"};
  refused(p, ErrorCode::kBadInput, "GPU 1 MIG layout");
  p = TwoGpuPlan();
  p.tenants[2].memory_bytes = 45 * kGiB;  // a 3g.40gb instance holds 39.5 GiB
  refused(p, ErrorCode::kDoesNotFit, "is more than the");
  p = TwoGpuPlan();
  p.tenants[3].id = "c";
  refused(p, ErrorCode::kBadInput, "id 'c' appears twice");
}

// A gpumuxd that records the calls it is sent, answers GET with a fixed node, and refuses the
// `refuse`-th tenant admission (the node changed under the plan) with 409.
class RecordingAgent {
 public:
  RecordingAgent(json gpus, int refuse) : gpus_(std::move(gpus)), refuse_(refuse) {
    path_ = (std::filesystem::temp_directory_path() /
             ("gpumux_apply_" + std::to_string(getpid()) + ".sock"))
                .string();
    server_.ListenUnix(path_);
    thread_ = std::thread([this] { server_.Serve([this](const auto& r) { return Handle(r); }); });
  }
  ~RecordingAgent() {
    server_.Stop();
    thread_.join();
  }
  const std::string& path() const { return path_; }
  std::vector<std::string> calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }

 private:
  service::HttpResponse Handle(const service::HttpRequest& r) {
    if (r.method == "GET" && r.path == "/v1/gpus") return {200, gpus_.dump()};
    if (r.method == "GET") return {200, Tenants().dump()};
    std::lock_guard<std::mutex> lock(mu_);
    calls_.push_back(r.method + " " + r.path + " " + r.body);
    if (r.method == "POST" && ++admissions_ == refuse_)
      return {409, R"({"error": "quotas would sum past the GPU"})"};
    return {r.method == "POST" ? 201 : 200, R"({"id": "x", "gpu": 0, "env": {}})"};
  }
  json gpus_;
  int refuse_, admissions_ = 0;
  std::string path_;
  service::HttpServer server_;
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> calls_;
};

TEST(NodeApply, ACallRefusedMidwayUndoesWhatWasDoneLastFirst) {
  RecordingAgent node(Gpus(2), /*refuse=*/3);
  agent::AgentClient client(node.path());
  try {
    ApplyNodePlan(client, TwoGpuPlan(), false);
    ADD_FAILURE() << "applied, though the third admission was refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kConflict) << e.what();
    EXPECT_NE(std::string(e.what()).find("call 5 of 6"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("the 4 made before it undone"), std::string::npos)
        << e.what();
  }
  std::vector<std::string> calls = node.calls();
  ASSERT_EQ(calls.size(), 9u);
  // Two modes, two admissions, the refused one; then the two tenants removed and the two GPUs put
  // back, last first.
  EXPECT_EQ(calls[4].substr(0, 17), "POST /v1/tenants ");
  EXPECT_EQ(calls[5].substr(0, 20), "DELETE /v1/tenants/b");
  EXPECT_EQ(calls[6].substr(0, 20), "DELETE /v1/tenants/a");
  EXPECT_EQ(calls[7], R"(PUT /v1/gpus/1 {"mode":"timeslice"})");
  EXPECT_EQ(calls[8], R"(PUT /v1/gpus/0 {"mode":"timeslice"})");
}

}  // namespace
}  // namespace gpumux
