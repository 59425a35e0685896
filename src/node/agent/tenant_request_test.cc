#include "node/agent/tenant_request.h"

#include <gtest/gtest.h>

#include <string>

#include "base/error.h"

namespace gpumux::agent {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

// The message ParseTenantRequest refuses `body` with ("" if it reads it).
std::string Refusal(const std::string& body) {
  try {
    ParseTenantRequest(body);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadInput) << body;
    return e.what();
  }
  return "";
}

// Every field a producer sets is sent and read back as it was set.
TEST(TenantRequest, WhatAProducerSendsIsWhatGpumuxdReads) {
  TenantRequest r;
  r.id = "k8s-pod-1";
  r.gpus = {{2, -1, 0}, {3, 1, 0}};
  r.memory = {4 * kGiB, 2 * kGiB};
  r.memory_per_gpu = true;
  r.compute_percent = 37.5;
  r.weight = 3;
  r.priority = node::Priority::kLow;
  r.learn_owner = true;
  r.source = "kubernetes:ns/pod/c";
  r.cgroup = "pod1234-abcd";
  r.labels.pod_namespace = "ns", r.labels.pod = "pod", r.labels.container = "c";
  nlohmann::json sent = TenantRequestJson(r);
  EXPECT_EQ(sent["gpus"], nlohmann::json::array({2, "3.1"}));
  EXPECT_EQ(sent["memory"], nlohmann::json::array({4 * kGiB, 2 * kGiB}));
  EXPECT_EQ(sent["compute"], 37.5) << "compute a number";
  EXPECT_EQ(sent["owner_uid"], "learn");
  TenantRequest read = ParseTenantRequest(sent.dump());
  EXPECT_EQ(TenantRequestJson(read), sent);
  EXPECT_EQ(read.gpus, r.gpus);
  EXPECT_EQ(read.memory, r.memory);
  EXPECT_EQ(read.priority, node::Priority::kLow);
  EXPECT_TRUE(read.old_forms.empty());

  TenantRequest one;
  one.id = "slurm-7", one.device = "MIG-5a1e", one.join = true, one.memory = {kGiB};
  one.owner_uid = 1000;
  sent = TenantRequestJson(one);
  EXPECT_EQ(sent, nlohmann::json({{"id", "slurm-7"},
                                  {"device", "MIG-5a1e"},
                                  {"join", true},
                                  {"memory", kGiB},
                                  {"owner_uid", 1000}}))
      << "memory in bytes; nothing sent that was not set";
  EXPECT_EQ(TenantRequestJson(ParseTenantRequest(sent.dump())), sent);
  EXPECT_EQ(TenantRequestJson(TenantRequestFromJson(sent)), sent) << "a body already parsed";
  EXPECT_THROW(TenantRequestFromJson(nlohmann::json::array({1})), Error) << "not an object";
}

// Sizes as text and compute as "40%" are read for one release more, and named for gpumuxd's log.
TEST(TenantRequest, OldFormsAreReadAndNamed) {
  TenantRequest r = ParseTenantRequest(R"({"id": "a", "gpu": 0, "memory": "4GiB", "compute": "40%"})");
  EXPECT_EQ(r.memory, std::vector<uint64_t>{4 * kGiB});
  EXPECT_FALSE(r.memory_per_gpu);
  EXPECT_DOUBLE_EQ(*r.compute_percent, 40.0);
  EXPECT_EQ(r.old_forms, (std::vector<std::string>{"memory", "compute"}));
  r = ParseTenantRequest(R"({"id": "a", "gpus": [0, 1], "memory": ["4GiB", 1073741824]})");
  EXPECT_EQ(r.memory, (std::vector<uint64_t>{4 * kGiB, kGiB}));
  EXPECT_EQ(r.old_forms, std::vector<std::string>{"memory"});
  r = ParseTenantRequest(R"({"id": "a", "gpu": 0, "memory": 4294967296, "compute": 40})");
  EXPECT_TRUE(r.old_forms.empty());
}

// A request means what it says, or is refused saying which key and why.
TEST(TenantRequest, ARequestThatSaysTwoThingsOrNothingIsRefusedNamingTheKey) {
  auto refused = [](const std::string& body, const std::string& says) {
    std::string why = Refusal(body);
    EXPECT_NE(why.find(says), std::string::npos) << body << " -> '" << why << "'";
  };
  // A quota of 0 on the second GPU once meant "the first one's".
  refused(R"({"id":"a","gpus":[0,1],"memory":[1073741824,0]})", "memory: a quota of 0 bytes for GPU 2");
  refused(R"({"id":"a","gpu":0,"memory":0})", "memory: a quota of 0 bytes");
  refused(R"({"id":"a","gpu":0,"device":"GPU-1","memory":1})", "device: give either");
  refused(R"({"id":"a","gpu":0,"gpus":[1],"memory":1})", "gpus: give either a list");
  refused(R"({"id":"a","gpus":[1],"devices":["GPU-1"],"memory":1})", "give either gpus or devices");
  refused(R"({"id":"a","gpus":[1,"1"],"memory":1})", "gpus: a GPU or instance is named twice");
  refused(R"({"id":"a","devices":["GPU-1","GPU-1"],"memory":1})", "devices: a UUID is named twice");
  refused(R"({"id":"a","devices":[],"memory":1})", "devices: expected 1 or more");
  refused(R"({"id":"a","gpus":["1.x"],"memory":1})", "gpus: expected GPU indices");
  refused(R"({"id":"a","gpu":0,"memory":1,"compute":0})", "compute: expected a percentage above 0");
  refused(R"({"id":"a","gpu":0,"memory":1,"compute":101})", "compute: expected");
  refused(R"({"id":"a","gpu":0,"memory":1,"compute":"lots"})", "compute 'lots'");
  refused(R"({"id":"a","gpu":0,"memory":1,"priority":"urgent"})", "priority 'urgent'");
  refused(R"({"id":"a","gpu":0,"memory":1,"owner_uid":"root"})", "owner_uid: expected a uid");
  refused(R"({"id":"a","gpu":0,"memory":1,"cgroup":"pod 1"})", "cgroup: expected");
  refused(R"({"id":"a","gpu":0,"memory":1,"pod":"a/b"})", "pod: expected letters");
  refused(R"({"id":"a","gpu":0,"memory":1,"mps_percent":0})", "mps_percent: expected above 0");
  refused(R"({"id":"a","gpu":0,"memroy":1})", "unknown field 'memroy'");
  EXPECT_EQ(Refusal(R"({"id":"a","gpu":0,"instance":2,"memory":1})"), "") << "a MIG instance";
  EXPECT_EQ(Refusal(""), "") << "an empty body is {}";
}

}  // namespace
}  // namespace gpumux::agent
