// Each policy's choice on small hand-built clusters where the right answer is known.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "base/error.h"
#include "fleet/policy.h"
#include "fleet/test_support.h"

namespace gpumux::fleet {
namespace {

// The node a policy picks among feasible ones (highest score, lowest index on ties), and its GPU.
std::pair<int, int> Choose(const Policy& p, const Cluster& c, const Shape& s) {
  int best = -1, gpu = -1;
  double score = 0;
  for (int i = 0; i < c.size(); ++i) {
    if (!c.Fits(i, s)) continue;
    NodeScore ns = p.Score(c, i, s);
    if (best < 0 || ns.score > score) best = i, score = ns.score, gpu = ns.gpu;
  }
  return {best, gpu};
}

class PoliciesTest : public ::testing::Test {
 protected:
  // Two 4-GPU nodes; node 1 is partly used (one GPU at 400 free, 32 of 64 cores taken).
  PoliciesTest() : cluster_({Node("empty", 64, 4, "G2"), Node("used", 64, 4, "G2")}) {
    cluster_.Place(1, cluster_.ShapeOf(Pod("old", 32, 1, 600)), 2);
    pods_ = {Pod("a", 4, 1, 1000), Pod("b", 4, 1, 400), Pod("c", 4, 1, 600)};
    target_ = TargetWorkload::FromPods(cluster_, pods_, 1.0);
    targets_ = {target_, target_, target_};
  }
  Shape Share(int milli, int cores = 2) { return cluster_.ShapeOf(Pod("p", cores, 1, milli)); }
  Cluster cluster_;
  std::vector<PodSpec> pods_;
  TargetWorkload target_;
  TargetWorkloads targets_;  // FGD measures against target_
};

TEST_F(PoliciesTest, BestFitPacksOntoTheUsedNodeAndTheTightestGpu) {
  auto [node, gpu] = Choose(*MakePolicy("bestfit", targets_), cluster_, Share(300));
  EXPECT_EQ(node, 1);
  EXPECT_EQ(gpu, 2) << "the GPU with 400 free is the tightest that holds 300";
}

TEST_F(PoliciesTest, DotProductPrefersLessFreeResourceAlongThePodsRequest) {
  EXPECT_EQ(Choose(*MakePolicy("dotprod", targets_), cluster_, Share(300)).first, 1);
}

TEST_F(PoliciesTest, PackingUsesSharedGpusFirstThenUsedNodesThenIdleOnes) {
  auto packing = MakePolicy("packing", targets_);
  auto [node, gpu] = Choose(*packing, cluster_, Share(300));
  EXPECT_EQ(node, 1);
  EXPECT_EQ(gpu, 2);
  // A whole GPU: a free GPU on the used node beats opening the idle node.
  EXPECT_EQ(Choose(*packing, cluster_, cluster_.ShapeOf(Pod("w", 2, 1, 1000))).first, 1);
}

TEST_F(PoliciesTest, ClusteringKeepsPodKindsTogether) {
  auto clustering = MakePolicy("clustering", targets_);
  EXPECT_EQ(Choose(*clustering, cluster_, Share(300)).first, 1)
      << "the node already running sharing pods";
  // A 2-GPU pod: the used node runs another kind only (0-25), the idle node scores 25-50.
  EXPECT_EQ(Choose(*clustering, cluster_, cluster_.ShapeOf(Pod("w", 2, 2, 1000))).first, 0);
}

TEST_F(PoliciesTest, FgdFillsTheLeftoverThatMatchesATargetShape) {
  // A 400-milli pod: on GPU 2 (400 free) it leaves nothing; elsewhere it leaves 600 on a GPU
  // (usable by the 600 shape, but no longer by whole pods).
  auto [node, gpu] = Choose(*MakePolicy("fgd", targets_), cluster_, Share(400));
  EXPECT_EQ(node, 1);
  EXPECT_EQ(gpu, 2);
}

TEST_F(PoliciesTest, GpumuxSendsCpuOnlyPodsWhereTheirCpuStrandsNoGpu) {
  // Two idle 2-GPU nodes; whole pods need 16 cores. A 20-core CPU-only pod leaves node "tight"
  // (48 cores) unable to feed both GPUs, but leaves "roomy" (96 cores) able to. FGD sees no
  // difference (the next whole pod fits on either); gpumux's stranding measure does.
  Cluster c({Node("tight", 48, 2, "G2"), Node("roomy", 96, 2, "G2")});
  std::vector<PodSpec> pods = {Pod("w", 16, 1, 1000)};
  TargetWorkloads t = TargetWorkloads::FromPods(c, pods);
  Shape cpu = c.ShapeOf(Pod("cpu", 20, 0, 0));
  EXPECT_EQ(MakePolicy("fgd", t)->Score(c, 0, cpu).score,
            MakePolicy("fgd", t)->Score(c, 1, cpu).score);
  EXPECT_EQ(Choose(*MakePolicy("gpumux", t), c, cpu).first, 1);
}

TEST_F(PoliciesTest, GpumuxLeavesAGpuRoomThatCommonPodsCanFillToTheEnd) {
  // Two one-GPU nodes, one holding a 550-milli pod (450 free), the other a 650 (350 free). A
  // 230-milli pod leaves 220 on the first, which a 220 pod fills, or 120 on the second, which
  // nothing fills (before, a 320 would have filled it but for 30). FGD sees only that no target
  // shape but the smallest fits 220 and none fits 120, and prefers the second.
  Cluster c({Node("after550", 96, 1, "G2"), Node("after650", 96, 1, "G2")});
  std::vector<PodSpec> pods;
  for (int milli : {1000, 320, 230, 220})
    for (int i = 0; i < 25; ++i) pods.push_back(Pod("p", 4, 1, milli));
  c.Place(0, c.ShapeOf(Pod("old", 4, 1, 550)), 0);
  c.Place(1, c.ShapeOf(Pod("old", 4, 1, 650)), 0);
  TargetWorkloads t = TargetWorkloads::FromPods(c, pods);
  Shape pod = c.ShapeOf(Pod("new", 4, 1, 230));
  EXPECT_EQ(Choose(*MakePolicy("fgd", t), c, pod).first, 1);
  EXPECT_EQ(Choose(*MakePolicy("gpumux", t), c, pod).first, 0);
}

TEST_F(PoliciesTest, RandomPicksEveryFeasibleNodeAndGpuAndNothingElse) {
  Cluster c({Node("a", 8, 2, "G2"), Node("b", 8, 2, "G2"), Node("full", 1, 2, "G2")});
  auto random = MakePolicy("random", targets_);
  Shape s = c.ShapeOf(Pod("p", 2, 1, 500));
  std::vector<int> feasible;
  for (int i = 0; i < c.size(); ++i) {
    if (c.Fits(i, s)) feasible.push_back(i);
  }
  ASSERT_EQ(feasible, (std::vector<int>{0, 1}));
  Rng rng(1);
  std::map<int, int> nodes, gpus;
  for (int i = 0; i < 2000; ++i) {
    ++nodes[feasible[size_t(random->PickNth(int(feasible.size()), rng))]];
    ++gpus[random->PickGpu(c, 0, s, -1, rng)];
  }
  EXPECT_EQ(nodes.size(), 2u);
  EXPECT_GT(nodes[0], 850);
  EXPECT_GT(nodes[1], 850);
  EXPECT_GT(gpus[0], 850);
  EXPECT_GT(gpus[1], 850);
}

TEST(Policies, UnknownNameListsTheKnownOnes) {
  Cluster c({Node("a", 8, 2, "G2")});
  TargetWorkloads t = TargetWorkloads::FromPods(c, {Pod("p", 1, 1, 500)});
  try {
    MakePolicy("fdg", t);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown policy 'fdg' (known: random, dotprod"),
              std::string::npos)
        << e.what();
  }
  for (const std::string& name : PolicyNames()) EXPECT_NO_THROW(MakePolicy(name, t)) << name;
}

}  // namespace
}  // namespace gpumux::fleet
