#include "share/node_plan.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "base/error.h"
#include "core/mig_layout.h"
#include "share/plan_file.h"
#include "share/plan_file_test_support.h"

namespace gpumux {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

std::string WriteFile(const std::string& text) { return WritePlanFile("node_plan_test", text); }

// Every GPU's quotas cover each tenant's need and together hand out the GPU's memory, to within a
// MiB per tenant of rounding.
void ExpectQuotasShareOutTheGpu(const NodePlan& node) {
  std::map<std::pair<int, int>, uint64_t> sum;
  std::map<std::pair<int, int>, int> count;
  for (const NodeTenantPlan& t : node.tenants) {
    EXPECT_GE(t.memory_bytes, t.need_bytes) << t.id;
    EXPECT_EQ(t.memory_bytes % kMiB, 0u) << t.id;
    sum[{t.gpu, t.instance}] += t.memory_bytes;
    ++count[{t.gpu, t.instance}];
  }
  for (const NodeGpuPlan& g : node.gpus) {
    if (g.mode == ShareMode::kMig) continue;
    std::pair<int, int> whole{g.gpu, -1};
    EXPECT_LE(sum[whole], g.memory_bytes) << "GPU " << g.gpu;
    EXPECT_GT(sum[whole] + uint64_t(count[whole]) * kMiB, g.memory_bytes) << "GPU " << g.gpu;
  }
}

TEST(NodePlan, TheWorkedExampleBecomesModesAndQuotasForGpumuxd) {
  Catalog catalog = Catalog::LoadBundled();
  PlanFile f = LoadPlanFile(GPUMUX_SOURCE_DIR "/examples/p5-48xlarge.yaml", catalog);
  Plan plan = PlanFleet(f.input);
  NodePlan node = MakeNodePlan(f.input, plan);
  ASSERT_EQ(node.gpus.size(), plan.gpus.size());
  size_t planned_tenants = 0;
  for (size_t i = 0; i < plan.gpus.size(); ++i) {
    EXPECT_EQ(node.gpus[i].gpu, int(i));
    EXPECT_EQ(node.gpus[i].kind, "H100-SXM5-80GB");
    EXPECT_EQ(node.gpus[i].mode, plan.gpus[i].chosen.kind);
    planned_tenants += plan.gpus[i].tenant_names.size();
  }
  EXPECT_EQ(node.tenants.size(), planned_tenants);
  ExpectQuotasShareOutTheGpu(node);
  bool renamed = false;
  for (const NodeTenantPlan& t : node.tenants) {
    if (t.name == "chat-13b#1") renamed = t.id == "chat-13b-1";
    EXPECT_FALSE(t.compute_percent) << "no tenant of the example sets an MPS thread cap";
  }
  EXPECT_TRUE(renamed) << "'#' is outside gpumuxd's id alphabet";
}

TEST(NodePlan, MigTenantsHoldTheirInstanceAndMpsThreadCapsBecomeComputeCaps) {
  Catalog catalog = Catalog::LoadBundled();
  PlanFile mig = LoadPlanFile(WriteFile(R"(fleet: [{gpu: H100-SXM5-80GB, count: 2}]
strategies: [mig]
tenants:
  - {name: small, count: 3, workload: {kind: generic, memory: 8 GB, bandwidth: 100 GB/s, compute: 5 TFLOPS}}
)"),
                              catalog);
  Plan plan = PlanFleet(mig.input);
  NodePlan node = MakeNodePlan(mig.input, plan);
  ASSERT_EQ(node.gpus.size(), 1u);
  ASSERT_EQ(node.gpus[0].mode, ShareMode::kMig);
  ASSERT_EQ(node.gpus[0].layout.size(), 3u);
  // The layout names each instance's start, and is exactly the planned one.
  const MigGeometry& geo = *catalog.FindGpu("H100-SXM5-80GB").mig;
  EXPECT_EQ(PlaceInCreationOrder(geo, node.gpus[0].layout).Describe(),
            plan.gpus[0].chosen.layout->Describe());
  for (const NodeTenantPlan& t : node.tenants) {
    ASSERT_GE(t.instance, 0);
    const MigProfile& p = *plan.gpus[0].chosen.layout->instances[size_t(t.instance)].profile;
    EXPECT_EQ(t.memory_bytes, uint64_t(p.memory_bytes) / kMiB * kMiB)
        << "the instance is the tenant's alone";
  }

  PlanFile mps = LoadPlanFile(WriteFile(R"(fleet: [{gpu: H100-SXM5-80GB, count: 1}]
strategies: [mps]
tenants:
  - {name: capped, mps_thread_percentage: 30, workload: {kind: generic, memory: 8 GB, bandwidth: 100 GB/s, compute: 5 TFLOPS}}
  - {name: free, workload: {kind: generic, memory: 8 GB, bandwidth: 100 GB/s, compute: 5 TFLOPS}}
)"),
                              catalog);
  NodePlan capped = MakeNodePlan(mps.input, PlanFleet(mps.input));
  ASSERT_EQ(capped.tenants.size(), 2u);
  for (const NodeTenantPlan& t : capped.tenants) {
    EXPECT_EQ(t.compute_percent.has_value(), t.name == "capped") << t.name;
    if (t.compute_percent) {
      EXPECT_DOUBLE_EQ(*t.compute_percent, 30);
    }
  }
  ExpectQuotasShareOutTheGpu(capped);
}

// A tenant whose users wait on each step (a tokens-per-second or ms-per-token SLO) runs at high
// priority on a GPU it shares, by time or MPS, with one whose SLO is a slowdown or none; among
// equals, alone in a MIG instance, or capped, it stays normal.
TEST(NodePlan, AServerBesideABatchJobIsPlannedHighPriority) {
  Catalog catalog = Catalog::LoadBundled();
  const std::string generic =
      "{name: batch, workload: {kind: generic, memory: 8 GB, bandwidth: 300 GB/s, compute: 20 "
      "TFLOPS}, slo: ";
  const std::string batch = generic + "{max_slowdown: 3}}";
  auto plan_of = [&](const std::string& strategy, const std::string& other,
                     const std::string& cap) {
    PlanFile f = LoadPlanFile(WriteFile(R"(fleet: [{gpu: H100-SXM5-80GB, count: 1}]
strategies: [)" + strategy + R"(]
tenants:
  - name: chat
    workload: {kind: llm-decode, model: Llama-3-8B, dtype: bf16, batch: 1, context: 2048}
    slo: {max_ms_per_token: 40})" + cap + R"(
  - )" + other + "\n"),
                              catalog);
    Plan plan = PlanFleet(f.input);
    EXPECT_EQ(plan.gpus.size(), 1u) << strategy << ": " << other;
    return MakeNodePlan(f.input, plan);
  };
  auto priority_of = [](const NodePlan& node, const std::string& id) {
    for (const NodeTenantPlan& t : node.tenants)
      if (t.id == id) return t.priority;
    ADD_FAILURE() << "no tenant " << id;
    return Priority::kLow;
  };
  for (const char* strategy : {"timeslice", "mps"}) {
    NodePlan node = plan_of(strategy, batch, "");
    ASSERT_EQ(node.gpus[0].mode, strategy == std::string("mps") ? ShareMode::kMps
                                                                 : ShareMode::kTimeSlice);
    EXPECT_EQ(priority_of(node, "chat"), Priority::kHigh) << strategy;
    EXPECT_EQ(priority_of(node, "batch"), Priority::kNormal) << strategy;
    for (const NodeTenantPlan& t : node.tenants) EXPECT_EQ(t.weight, 1u);
  }
  NodePlan steps = plan_of("timeslice", generic + "{min_steps_per_second: 0.1}}", "");
  EXPECT_EQ(priority_of(steps, "chat"), Priority::kHigh) << "a generic job's rate is throughput";
  NodePlan equals = plan_of(
      "timeslice",
      "{name: other, workload: {kind: llm-decode, model: Llama-3-8B, dtype: bf16, batch: 1, "
      "context: 2048}, slo: {min_tokens_per_second: 10}}",
      "");
  EXPECT_EQ(priority_of(equals, "chat"), Priority::kNormal) << "two servers: neither above";
  EXPECT_EQ(priority_of(equals, "other"), Priority::kNormal);
  NodePlan mig = plan_of("mig", batch, "");
  ASSERT_EQ(mig.gpus[0].mode, ShareMode::kMig);
  EXPECT_EQ(priority_of(mig, "chat"), Priority::kNormal) << "alone in its instance";
  // A tensor-parallel server's parts ("chat.tp0", "chat.tp1") are the server's: high priority on
  // each GPU they share with a batch job.
  PlanFile tp = LoadPlanFile(WriteFile(R"(fleet: [{gpu: H100-SXM5-80GB, count: 2}]
strategies: [timeslice]
tenants:
  - name: chat
    workload: {kind: llm-decode, model: Llama-2-70B, dtype: bf16, batch: 1, context: 2048, tp: 2}
    slo: {max_ms_per_token: 200}
  - )" + generic + "{max_slowdown: 3}, count: 2}\n"),
                             catalog);
  NodePlan parts = MakeNodePlan(tp.input, PlanFleet(tp.input));
  int high_parts = 0;
  for (const NodeTenantPlan& t : parts.tenants) {
    if (t.id.rfind("chat.tp", 0) != 0) continue;
    bool shared = false;
    for (const NodeTenantPlan& u : parts.tenants) shared |= u.gpu == t.gpu && u.id != t.id;
    EXPECT_EQ(t.priority, shared ? Priority::kHigh : Priority::kNormal) << t.id;
    high_parts += t.priority == Priority::kHigh;
  }
  EXPECT_GT(high_parts, 0) << "a part shares a GPU with a batch job";
  NodePlan capped = plan_of("mps", batch, "\n    mps_thread_percentage: 50");
  EXPECT_EQ(priority_of(capped, "chat"), Priority::kNormal)
      << "gpumuxd runs a high-priority tenant uncapped: the cap is kept";
}

TEST(NodePlan, ShareOutMemoryGivesTheSpareInProportionAndNeverLessThanTheNeed) {
  uint64_t gib = 1024 * kMiB;
  std::vector<uint64_t> q = ShareOutMemory({10 * gib, 30 * gib}, 80 * gib);
  EXPECT_EQ(q[0], 20 * gib);
  EXPECT_EQ(q[1], 60 * gib);
  // Needs that are not whole MiB round up; the spare rounds down.
  q = ShareOutMemory({1, kMiB + 1}, 10 * kMiB);
  EXPECT_GE(q[0], kMiB);
  EXPECT_GE(q[1], 2 * kMiB);
  EXPECT_LE(q[0] + q[1], 10 * kMiB);
  // Needs past the capacity are given as they are: the node refuses them, saying why.
  q = ShareOutMemory({50 * gib, 40 * gib}, 80 * gib);
  EXPECT_EQ(q[0], 50 * gib);
  EXPECT_EQ(q[1], 40 * gib);
}

TEST(NodePlan, TenantIdsKeepTheSafeAlphabet) {
  EXPECT_EQ(TenantIdFor("chat-13b#2"), "chat-13b-2");
  EXPECT_EQ(TenantIdFor("a b/c"), "a-b-c");
  EXPECT_EQ(TenantIdFor(".."), "tenant..");
  EXPECT_EQ(TenantIdFor(std::string(80, 'x')).size(), 63u);
}

TEST(NodePlan, TwoNamesThatBecomeOneIdAreRefused) {
  Catalog catalog = Catalog::LoadBundled();
  PlanFile f = LoadPlanFile(WriteFile(R"(fleet: [{gpu: H100-SXM5-80GB, count: 2}]
tenants:
  - {name: "a#1", workload: {kind: generic, memory: 8 GB, bandwidth: 100 GB/s, compute: 5 TFLOPS}}
  - {name: "a-1", workload: {kind: generic, memory: 8 GB, bandwidth: 100 GB/s, compute: 5 TFLOPS}}
)"),
                            catalog);
  EXPECT_THROW(MakeNodePlan(f.input, PlanFleet(f.input)), Error);
}

}  // namespace
}  // namespace gpumux
