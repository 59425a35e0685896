#include "fleet/fragmentation.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace gpumux::fleet
