#include "fleet/cluster.h"

#include <gtest/gtest.h>

#include "fleet/test_support.h"

namespace gpumux::fleet {
namespace {

TEST(Cluster, FitsChecksCpuMemoryModelAndGpuRoom) {
  Cluster c({Node("a", 16, 2, "T4", 64), Node("b", 96, 8, "G2")});
  EXPECT_EQ(c.total_gpus(), 10);
  EXPECT_TRUE(c.Fits(0, c.ShapeOf(Pod("p", 8, 1, 500))));
  EXPECT_FALSE(c.Fits(0, c.ShapeOf(Pod("p", 17, 1, 500)))) << "CPU";
  EXPECT_FALSE(c.Fits(0, c.ShapeOf(Pod("p", 1, 1, 500, {}, 65)))) << "memory";
  EXPECT_FALSE(c.Fits(0, c.ShapeOf(Pod("p", 1, 1, 500, {"G2"})))) << "model";
  EXPECT_TRUE(c.Fits(1, c.ShapeOf(Pod("p", 1, 1, 500, {"T4", "G2"}))));
  EXPECT_FALSE(c.Fits(0, c.ShapeOf(Pod("p", 1, 4, 1000)))) << "only 2 GPUs";
  EXPECT_FALSE(c.Fits(1, c.ShapeOf(Pod("p", 1, 1, 500, {"A100"})))) << "a model no node has";
}

TEST(Cluster, PlaceTakesTheGivenGpuOrTheLowestFreeOnes) {
  Cluster c({Node("b", 96, 4, "G2")});
  Shape share = c.ShapeOf(Pod("s", 2, 1, 300));
  c.Place(0, share, 2);
  EXPECT_EQ(c.node(0).gpu_left[2], 700);
  EXPECT_EQ(c.node(0).free_gpus, 3);
  Shape two = c.ShapeOf(Pod("w", 10, 2, 1000));
  c.Place(0, two, -1);
  EXPECT_EQ(c.node(0).gpu_left[0], 0);
  EXPECT_EQ(c.node(0).gpu_left[1], 0);
  EXPECT_EQ(c.node(0).gpu_left[3], 1000);
  EXPECT_EQ(c.node(0).cpu_left, 84000);
  EXPECT_EQ(c.used_gpu_milli(), 2300);
  EXPECT_EQ(c.node(0).gpu_left_total, 1700);
  EXPECT_FALSE(c.Fits(0, two)) << "one free GPU left";
  ASSERT_EQ(c.node(0).affinity.size(), 2u);
}

}  // namespace
}  // namespace gpumux::fleet
