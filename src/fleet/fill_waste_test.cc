#include "fleet/fill_waste.h"

#include <gtest/gtest.h>

#include "fleet/test_support.h"

namespace gpumux::fleet {
namespace {

TEST(FillWaste, IsTheRoomNoSumOfTheSizesFills) {
  FillWaste w({230, 320, 470});
  EXPECT_EQ(w.Of(350), 30) << "one 320";
  EXPECT_EQ(w.Of(450), 130) << "one 320; two 230s need 460";
  EXPECT_EQ(w.Of(460), 0) << "two 230s";
  EXPECT_EQ(w.Of(770), 70) << "470 + 230 = 700; the next sums are 780 and 790";
  EXPECT_EQ(w.Of(190), 190) << "nothing fits";
  EXPECT_EQ(w.Of(0), 0);
  EXPECT_EQ(w.Of(kMilli), 0) << "a whole free GPU is not waste: whole-GPU pods take it";
}

TEST(FillWaste, WithoutSizesEveryPartRoomIsWaste) {
  FillWaste w({});
  EXPECT_EQ(w.Of(999), 999);
  EXPECT_EQ(w.Of(kMilli), 0);
}

TEST(FillWaste, CountsTheCommonSharingSizesOfAFifthOfAGpuOrMore) {
  Cluster c({Node("n", 96, 8, "G2")});
  std::vector<PodSpec> pods;
  auto add = [&](int count, int milli, int cores) {
    for (int i = 0; i < count; ++i) pods.push_back(Pod("p", cores, 1, milli));
  };
  add(100, 1000, 8);  // whole GPUs: not a sharing size
  add(60, 810, 4);
  add(30, 320, 4);  // 320 counts: merged across CPU, 30 + 20 of 1,000 pods
  add(20, 320, 8);
  add(40, 160, 2);  // common, but under a fifth of a GPU
  add(4, 470, 6);   // 0.4% of pods: too rare
  add(746, 0, 2);   // CPU-only
  ASSERT_EQ(pods.size(), 1000u);
  FillWaste w = FillWaste::FromTarget(TargetWorkload::FromPods(c, pods, 1.0));
  EXPECT_EQ(w.sizes(), (std::vector<int>{320, 810}));
  EXPECT_EQ(w.Of(190), 190) << "the 160s do not count";
}

}  // namespace
}  // namespace gpumux::fleet
