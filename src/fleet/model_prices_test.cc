#include "fleet/model_prices.h"

#include <gtest/gtest.h>

#include "fleet/policy.h"
#include "fleet/test_support.h"

namespace gpumux::fleet {
namespace {

// 8 G2 GPUs and 2 T4 GPUs; half of the GPU request can use only the T4s.
class ModelPricesTest : public ::testing::Test {
 protected:
  ModelPricesTest() : cluster_({Node("g2", 64, 8, "G2"), Node("t4", 64, 2, "T4")}) {
    pods_ = {Pod("any", 4, 1, 1000), Pod("t4", 4, 1, 1000, {"T4"})};
    targets_ = TargetWorkloads::FromPods(cluster_, pods_);
  }
  int Model(const std::string& name) const {
    for (size_t m = 0; m < cluster_.models().size(); ++m)
      if (cluster_.models()[m] == name) return int(m);
    return -1;
  }
  Cluster cluster_;
  std::vector<PodSpec> pods_;
  TargetWorkloads targets_;
};

TEST_F(ModelPricesTest, AModelIsPricedByTheDemandConfinedToItOverWhatIsLeftOfIt) {
  ModelPrices prices(cluster_, targets_.scarce);
  ASSERT_TRUE(prices.any());
  // Still to come: half of the 10 free GPUs' worth, all of it for 2 T4 GPUs.
  EXPECT_DOUBLE_EQ(prices.Of(cluster_, Model("T4")), 0.5 * 10000 / 2000);
  EXPECT_DOUBLE_EQ(prices.Of(cluster_, Model("G2")), 0) << "no shape is confined to G2";
  // A flexible pod takes a T4: 9 GPUs free, 1 of them T4.
  cluster_.Place(1, cluster_.ShapeOf(Pod("x", 4, 1, 1000)), -1);
  EXPECT_DOUBLE_EQ(prices.Of(cluster_, Model("T4")), 0.5 * 9000 / 1000);
}

TEST_F(ModelPricesTest, WithoutModelConstraintsNothingHasAPrice) {
  TargetWorkloads any = TargetWorkloads::FromPods(cluster_, {Pod("any", 4, 1, 1000)});
  ModelPrices prices(cluster_, any.scarce);
  EXPECT_FALSE(prices.any());
  EXPECT_DOUBLE_EQ(prices.Of(cluster_, Model("T4")), 0);
}

TEST(ModelPrices, GpumuxSendsAFlexiblePodWhereTheConfinedDemandHasMoreLeft) {
  // Two T4 and two V100 GPUs, a third of the request confined to each; a flexible pod already took
  // a T4. For the next flexible pod both nodes look alike to every fragment measure (each frees the
  // other model's shape from one GPU it cannot use), but the T4s have half as much left for as much
  // demand: T4 price 1/3 x 3000 / 1000, V100 1/3 x 3000 / 2000.
  Cluster c({Node("t4", 64, 2, "T4"), Node("v100", 64, 2, "V100")});
  std::vector<PodSpec> pods = {Pod("any", 4, 1, 1000), Pod("t4", 4, 1, 1000, {"T4"}),
                               Pod("v100", 4, 1, 1000, {"V100"})};
  TargetWorkloads targets = TargetWorkloads::FromPods(c, pods);
  Shape flexible = c.ShapeOf(pods[0]);
  c.Place(0, flexible, -1);
  ModelPrices prices(c, targets.scarce);
  EXPECT_NEAR(prices.Of(c, c.node(0).model), 1.0, 1e-12);
  EXPECT_NEAR(prices.Of(c, c.node(1).model), 0.5, 1e-12);
  auto gpumux = MakePolicy("gpumux", targets);
  NodeScore t4 = gpumux->Score(c, 0, flexible), v100 = gpumux->Score(c, 1, flexible);
  EXPECT_EQ(t4.score, v100.score) << "the node-local measures tie";
  EXPECT_GT(gpumux->Final(c, 1, flexible, v100), gpumux->Final(c, 0, flexible, t4));
  auto fgd = MakePolicy("fgd", targets);
  EXPECT_EQ(fgd->Score(c, 0, flexible).score, fgd->Score(c, 1, flexible).score)
      << "FGD cannot tell them apart";
}

}  // namespace
}  // namespace gpumux::fleet
