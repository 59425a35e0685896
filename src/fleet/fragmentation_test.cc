#include "fleet/fragmentation.h"

#include <gtest/gtest.h>

#include <random>

#include "fleet/test_support.h"

namespace gpumux::fleet {
namespace {

// Target workload: half whole-GPU pods (8 cores), half 600-milli sharing pods (2 cores).
class FragmentationTest : public ::testing::Test {
 protected:
  FragmentationTest() : cluster_({Node("n", 20, 2, "G2")}) {
    pods_ = {Pod("w1", 8, 1, 1000), Pod("w2", 8, 1, 1000), Pod("s1", 2, 1, 600),
             Pod("s2", 2, 1, 600)};
    target_ = TargetWorkload::FromPods(cluster_, pods_, 1.0);
  }
  Cluster cluster_;
  std::vector<PodSpec> pods_;
  TargetWorkload target_;
};

TEST_F(FragmentationTest, TargetWorkloadKeepsThePopularShapes) {
  ASSERT_EQ(target_.classes().size(), 2u);
  EXPECT_DOUBLE_EQ(target_.classes()[0].probability, 0.5);
  // 95% coverage of 20 pods where one shape is 18 of them keeps just that one... and the next.
  std::vector<PodSpec> many(18, Pod("a", 1, 1, 500));
  many.push_back(Pod("b", 1, 1, 300));
  many.push_back(Pod("c", 1, 1, 200));
  EXPECT_EQ(TargetWorkload::FromPods(cluster_, many, 0.95).classes().size(), 2u);
}

TEST(ScarcityWeights, AShapeWeighsAsManyTimesMoreAsTheShareOfTheFleetItMayUseIsSmaller) {
  // 8 G2 GPUs and 2 T4 GPUs: a T4-only shape may use a fifth of the fleet's GPUs.
  Cluster c({Node("g2", 64, 8, "G2"), Node("t4", 16, 2, "T4"), Node("cpu", 32, 0, "")});
  std::vector<PodSpec> pods = {Pod("any", 4, 1, 1000), Pod("t4", 4, 1, 1000, {"T4"}),
                               Pod("cpu", 4, 0, 0), Pod("nowhere", 4, 1, 1000, {"A100"})};
  TargetWorkload popular = TargetWorkload::FromPods(c, pods, 1.0);
  TargetWorkload scarce = TargetWorkload::FromPods(c, pods, 1.0, ClassWeight::kScarcity);
  ASSERT_EQ(scarce.classes().size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    const TargetClass& k = scarce.classes()[i];
    EXPECT_DOUBLE_EQ(popular.classes()[i].weight, 0.25) << "popularity: the probability";
    EXPECT_DOUBLE_EQ(k.probability, 0.25);
    bool t4_only = k.shape.models == c.MaskOf({"T4"}) && !k.shape.cpu_only();
    // CPU-only shapes, shapes of any model and shapes no node can take keep their probability.
    EXPECT_DOUBLE_EQ(k.weight, t4_only ? 0.25 * 10 / 2 : 0.25) << i;
  }
  // On the empty G2 node every shape but "any" loses all 8000 free milli: the T4 one five times.
  EXPECT_DOUBLE_EQ(NodeFragmentation(c.node(0), popular), 8000 * 0.75);
  EXPECT_DOUBLE_EQ(NodeFragmentation(c.node(0), scarce), 8000 * (1.25 + 0.25 + 0.25));
}

TEST_F(FragmentationTest, EmptyNodeHasNoFragment) {
  EXPECT_DOUBLE_EQ(NodeFragmentation(cluster_.node(0), target_), 0);
}

TEST_F(FragmentationTest, ASmallLeftoverIsFragmentForTheShapesItCannotHold) {
  // A 500-milli pod on GPU 0 leaves 500: too small for both shapes (600 and 1000).
  Shape s = cluster_.ShapeOf(Pod("x", 1, 1, 500));
  EXPECT_DOUBLE_EQ(NodeFragmentationAfter(cluster_.node(0), target_, s, 0), 500);
  // 400 left: the same.
  cluster_.Place(0, cluster_.ShapeOf(Pod("y", 1, 1, 600)), 0);
  EXPECT_DOUBLE_EQ(NodeFragmentation(cluster_.node(0), target_), 400);
}

TEST_F(FragmentationTest, NotEnoughCpuMakesAllFreeGpuFragment) {
  // 13 cores taken: 7 left < 8 for whole pods (all 2000 free count), >= 2 for sharing pods (0).
  Shape cpu = cluster_.ShapeOf(Pod("c", 13, 0, 0));
  EXPECT_DOUBLE_EQ(NodeFragmentationAfter(cluster_.node(0), target_, cpu, -1), 0.5 * 2000);
}

TEST_F(FragmentationTest, CapacityMeasureSeesCpuThatRunsOutBeforeTheGpus) {
  // 12 cores left: FGD's measure sees one more whole pod fit and counts no fragment; filling the
  // node with whole pods would stop after one (8 cores each), leaving a GPU unusable.
  Shape cpu = cluster_.ShapeOf(Pod("c", 8, 0, 0));
  EXPECT_DOUBLE_EQ(NodeFragmentationAfter(cluster_.node(0), target_, cpu, -1), 0);
  // Whole pods: 1 of 2 GPUs usable -> 1000; sharing pods: 6 fit by CPU, 2 by GPU room (600 each of
  // 2000) -> 800 unusable.
  EXPECT_DOUBLE_EQ(NodeCapacityFragmentationAfter(cluster_.node(0), target_, cpu, -1),
                   0.5 * 1000 + 0.5 * 800);
}

TEST_F(FragmentationTest, StrandedGpuIsWhatTheFreeCpuCannotFeedInTheWorkloadsMix) {
  // The mix asks (0.5 * 8000 + 0.5 * 2000) CPU milli per (0.5 * 1000 + 0.5 * 600) GPU milli.
  EXPECT_DOUBLE_EQ(target_.cpu_per_gpu_milli(), 6.25);
  const NodeState& empty = cluster_.node(0);  // 20 cores feed 3.2 GPUs: nothing stranded
  EXPECT_DOUBLE_EQ(NodeStrandedGpu(empty, target_), 0);
  // 8 cores taken leave 12, which feed 1.92 of the 2 free GPUs; 13 taken leave 7 for 1.12.
  EXPECT_DOUBLE_EQ(NodeStrandedGpuAfter(empty, target_, cluster_.ShapeOf(Pod("c", 8, 0, 0))), 80);
  EXPECT_DOUBLE_EQ(NodeStrandedGpuAfter(empty, target_, cluster_.ShapeOf(Pod("c", 13, 0, 0))), 880);
  // A whole pod takes its GPU with its cores: 12 cores for the last GPU, nothing stranded.
  EXPECT_DOUBLE_EQ(NodeStrandedGpuAfter(empty, target_, cluster_.ShapeOf(Pod("w", 8, 1, 1000))), 0);
  cluster_.Place(0, cluster_.ShapeOf(Pod("c", 13, 0, 0)), -1);
  EXPECT_DOUBLE_EQ(NodeStrandedGpu(cluster_.node(0), target_), 880);
  // A workload of CPU-only pods needs no CPU for GPUs: nothing is stranded.
  TargetWorkload cpu_only = TargetWorkload::FromPods(cluster_, {Pod("c", 4, 0, 0)}, 1.0);
  EXPECT_DOUBLE_EQ(NodeStrandedGpu(cluster_.node(0), cpu_only), 0);
}

TEST(FragmentationEachGpu, EqualsTheOneGpuMeasuresBitForBitOnRandomNodes) {
  // Nodes of 1-8 GPUs of two models, filled at random with sharing, whole and CPU-only pods; the
  // target mixes sharing shapes of many sizes, multi-GPU and CPU-only shapes and a model-bound one.
  std::mt19937 rng(5);
  std::vector<NodeSpec> nodes;
  for (int i = 0; i < 200; ++i)
    nodes.push_back(Node("n" + std::to_string(i), 8 + int(rng() % 96), 1 + int(rng() % 8),
                         i % 3 ? "G2" : "T4"));
  Cluster cluster(nodes);
  std::vector<PodSpec> pods;
  for (int i = 0; i < 60; ++i) {
    int kind = int(rng() % 6);
    pods.push_back(kind == 0   ? Pod("cpu", 1 + int(rng() % 8), 0, 0)
                   : kind == 1 ? Pod("whole", 4, 1 + int(rng() % 2), 1000)
                   : kind == 2 ? Pod("t4", 2, 1, 100 + int(rng() % 9) * 100, {"T4"})
                               : Pod("share", 1 + int(rng() % 4), 1, 1 + int(rng() % 999)));
  }
  for (int n = 0; n < cluster.size(); ++n) {
    for (int k = 0; k < 12; ++k) {
      Shape s = cluster.ShapeOf(pods[rng() % pods.size()]);
      if (!cluster.Fits(n, s)) continue;
      int gpu = -1;
      for (int g = 0; g < cluster.node(n).gpus && s.shares_gpu(); ++g)
        if (cluster.node(n).gpu_left[g] >= s.gpu_milli && (gpu < 0 || rng() % 2)) gpu = g;
      cluster.Place(n, s, gpu);
    }
  }
  for (auto weighting : {ClassWeight::kPopularity, ClassWeight::kScarcity}) {
    TargetWorkload target = TargetWorkload::FromPods(cluster, pods, 0.99, weighting);
    int compared = 0;
    for (int n = 0; n < cluster.size(); ++n) {
      for (const PodSpec& pod : pods) {
        Shape s = cluster.ShapeOf(pod);
        if (!s.shares_gpu() || !cluster.Fits(n, s)) continue;
        PerGpu fragmentation, capacity;
        NodeFragmentationAfterEachGpu(cluster.node(n), target, s, &fragmentation);
        NodeCapacityFragmentationAfterEachGpu(cluster.node(n), target, s, &capacity);
        for (int g = 0; g < cluster.node(n).gpus; ++g) {
          if (cluster.node(n).gpu_left[g] < s.gpu_milli) continue;
          ASSERT_EQ(fragmentation[size_t(g)], NodeFragmentationAfter(cluster.node(n), target, s, g))
              << "node " << n << " GPU " << g;
          ASSERT_EQ(capacity[size_t(g)],
                    NodeCapacityFragmentationAfter(cluster.node(n), target, s, g))
              << "node " << n << " GPU " << g;
          ++compared;
        }
      }
    }
    EXPECT_GT(compared, 5000);
  }
}

}  // namespace
}  // namespace gpumux::fleet
