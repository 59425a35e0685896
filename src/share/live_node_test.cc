// Re-planning a node that runs tenants (PlanInput::live): a plan made for it leaves each running
// tenant where it is (its GPU, its name, its GPU's mode, its MIG instance) wherever that keeps
// every SLO, and plans as without it otherwise.
#include "share/live_node.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

#include "core/catalog.h"
#include "share/fleet_planner.h"
#include "share/node_plan.h"
#include "share/plan_file.h"
#include "share/plan_file_test_support.h"

namespace gpumux {
namespace {

// Two pairs that each share a GPU (MPS has the most headroom; time-slicing keeps every SLO too).
const char kPairsPlan[] = R"(fleet: [{gpu: H100-SXM5-80GB, count: 3}]
tenants:
  - {name: a, workload: {kind: generic, memory: 50 GB, bandwidth: 100 GB/s, compute: 5 TFLOPS}}
  - {name: b, workload: {kind: generic, memory: 45 GB, bandwidth: 100 GB/s, compute: 5 TFLOPS}}
  - {name: c, workload: {kind: generic, memory: 20 GB, bandwidth: 1000 GB/s, compute: 100 TFLOPS}}
  - {name: d, workload: {kind: generic, memory: 20 GB, bandwidth: 1000 GB/s, compute: 100 TFLOPS}}
)";

class LiveNodeTest : public ::testing::Test {
 protected:
  NodePlan PlanFor(const std::string& yaml, const LiveNode* live) {
    PlanFile file = LoadPlanFile(WritePlanFile("live_node_test", yaml), catalog_);
    file.input.live = live;
    Plan plan = PlanFleet(file.input);
    EXPECT_TRUE(plan.unplaced.empty());
    return MakeNodePlan(file.input, plan);
  }

  // Each planned tenant's place: "GPU" or "GPU PROFILE@START".
  static std::map<std::string, std::string> Places(const NodePlan& node) {
    std::map<std::string, std::string> places;
    for (const NodeTenantPlan& t : node.tenants) {
      const NodeGpuPlan& g = *std::find_if(node.gpus.begin(), node.gpus.end(),
                                           [&](const NodeGpuPlan& n) { return n.gpu == t.gpu; });
      places[t.id] =
          std::to_string(t.gpu) + (t.instance < 0 ? "" : " " + g.layout.at(size_t(t.instance)));
    }
    return places;
  }

  Catalog catalog_ = Catalog::LoadBundled();
};

TEST_F(LiveNodeTest, WithoutTenantsRunningThePlanIsTheOneMadeWithoutTheNode) {
  LiveNode idle{{{ShareMode::kTimeSlice, {}}, {ShareMode::kTimeSlice, {}}}, {}};
  for (const char* yaml : {kMigPlanYaml, kPairsPlan})
    EXPECT_EQ(Places(PlanFor(yaml, &idle)), Places(PlanFor(yaml, nullptr))) << yaml;
}

// The large job runs on a 4g.40gb at slot 0 and a small one on the 1g.10gb at slot 6; three 1g's
// and the 4g's compute fit in the seven compute slices, so both stay, and the other small job
// takes a free placement.
TEST_F(LiveNodeTest, RunningTenantsKeepTheirMigInstancesWhereEverySloStillHolds) {
  std::map<std::string, std::string> fresh = Places(PlanFor(kMigPlanYaml, nullptr));
  ASSERT_EQ(fresh["large"], "0 3g.40gb@0") << "the case this test is about";
  LiveNode live{{{ShareMode::kMig, {"4g.40gb@0", "1g.10gb@6"}}},
                {{"large", {0, 0}}, {"small-2", {0, 1}}}};
  NodePlan node = PlanFor(kMigPlanYaml, &live);
  std::map<std::string, std::string> places = Places(node);
  EXPECT_EQ(places["large"], "0 4g.40gb@0");
  EXPECT_EQ(places["small-2"], "0 1g.10gb@6");
  EXPECT_EQ(places["small-1"].substr(0, 10), "0 1g.10gb@");
  EXPECT_NE(places["small-1"], places["small-2"]);
  EXPECT_EQ(node.gpus[0].mode, ShareMode::kMig);
}

// An instance too small for its tenant's need now is not kept: SLOs (here: memory) come first.
TEST_F(LiveNodeTest, AnInstanceThatNoLongerHoldsItsTenantIsNotKept) {
  LiveNode live{{{ShareMode::kMig, {"2g.20gb@0"}}}, {{"large", {0, 0}}}};
  EXPECT_EQ(Places(PlanFor(kMigPlanYaml, &live))["large"], "0 3g.40gb@0");
}

// 'a' runs on node GPU 1 (time-sliced, beside 'c'), and 'd' on node GPU 0: the planned GPUs are
// numbered so that each is the GPU its tenants run on, and GPU 1 stays time-sliced where MPS
// would have more headroom (its mode changes only when it is idle).
TEST_F(LiveNodeTest, PlannedGpusAreTheNodeGpusTheirTenantsRunOnInTheModeTheyRunIn) {
  NodePlan fresh = PlanFor(kPairsPlan, nullptr);
  ASSERT_EQ(Places(fresh)["a"], "0") << "the case this test is about";
  ASSERT_EQ(fresh.gpus[0].mode, ShareMode::kMps);
  LiveNode live{{{ShareMode::kMps, {}}, {ShareMode::kTimeSlice, {}}, {ShareMode::kTimeSlice, {}}},
                {{"a", {1, -1}}, {"c", {1, -1}}, {"d", {0, -1}}}};
  NodePlan node = PlanFor(kPairsPlan, &live);
  std::map<std::string, std::string> places = Places(node);
  EXPECT_EQ(places["a"], "1");
  EXPECT_EQ(places["c"], "1");
  EXPECT_EQ(places["d"], "0");
  EXPECT_EQ(places["b"], "0");
  EXPECT_EQ(node.gpus[1].mode, ShareMode::kTimeSlice);
  EXPECT_EQ(node.gpus[0].mode, ShareMode::kMps);
}

// Identical tenants are one class, named #1, #2 in the plan: each running one keeps its name on its
// GPU, wherever the plan would have put that name.
TEST_F(LiveNodeTest, ARunningTenantOfAClassKeepsItsNameOnItsGpu) {
  const char yaml[] = R"(fleet: [{gpu: H100-SXM5-80GB, count: 2}]
tenants:
  - {name: big, count: 2, workload: {kind: generic, memory: 50 GB, bandwidth: 100 GB/s, compute: 5 TFLOPS}}
)";
  ASSERT_EQ(Places(PlanFor(yaml, nullptr))["big-1"], "0");
  LiveNode live{{{ShareMode::kTimeSlice, {}}, {ShareMode::kTimeSlice, {}}},
                {{"big-1", {1, -1}}, {"big-2", {0, -1}}}};
  std::map<std::string, std::string> places = Places(PlanFor(yaml, &live));
  EXPECT_EQ(places["big-1"], "1");
  EXPECT_EQ(places["big-2"], "0");
}

// A plan of two GPUs for a node of eight, whose tenants run on GPUs 5 and 2: it is for GPUs 5
// and 2, not 0 and 1 (which would move every running tenant).
TEST_F(LiveNodeTest, APlanSmallerThanTheNodeIsForTheGpusItsTenantsRunOn) {
  const uint64_t h100 = uint64_t(catalog_.FindGpu("H100-SXM5-80GB").memory_bytes);
  LiveNode live;
  live.gpus.assign(8, LiveGpu{ShareMode::kTimeSlice, {}, h100});
  live.tenants = {{"a", {5, -1}}, {"c", {5, -1}}, {"d", {2, -1}}};
  NodePlan node = PlanFor(kPairsPlan, &live);
  std::map<std::string, std::string> places = Places(node);
  EXPECT_EQ(places["a"], "5");
  EXPECT_EQ(places["c"], "5");
  EXPECT_EQ(places["d"], "2");
  EXPECT_EQ(places["b"], "2");
  ASSERT_EQ(node.gpus.size(), 2u);
  EXPECT_EQ(node.gpus[0].gpu, 2) << "in node order";
  EXPECT_EQ(node.gpus[1].gpu, 5);
  EXPECT_EQ(node.gpus[1].mode, ShareMode::kTimeSlice) << "the mode it runs in";
}

// Planned GPUs whose tenants run nowhere take node GPUs of their kind where nothing runs: not GPU
// 0, where a tenant the plan does not name runs, nor GPU 1, a smaller GPU.
TEST_F(LiveNodeTest, PlannedGpusThatRunNothingTakeIdleNodeGpusOfTheirKind) {
  const uint64_t h100 = uint64_t(catalog_.FindGpu("H100-SXM5-80GB").memory_bytes);
  LiveNode live;
  live.gpus = {{ShareMode::kTimeSlice, {}, h100},
               {ShareMode::kTimeSlice, {}, 40ull << 30},
               {ShareMode::kTimeSlice, {}, h100 - (300ull << 20)},  // as a real one shows it
               {ShareMode::kTimeSlice, {}, h100}};
  live.tenants = {{"someone-else", {0, -1}}};
  NodePlan node = PlanFor(kPairsPlan, &live);
  ASSERT_EQ(node.gpus.size(), 2u);
  EXPECT_EQ(node.gpus[0].gpu, 2);
  EXPECT_EQ(node.gpus[1].gpu, 3);
  // Without sizes, the node's GPUs are of the kinds the plan numbers there, the idle ones first.
  for (LiveGpu& g : live.gpus) g.memory_bytes = 0;
  node = PlanFor(kPairsPlan, &live);
  EXPECT_EQ(node.gpus[0].gpu, 1);
  EXPECT_EQ(node.gpus[1].gpu, 2);
}

}  // namespace
}  // namespace gpumux
