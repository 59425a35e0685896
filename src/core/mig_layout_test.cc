#include "core/mig_layout.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

#include "base/error.h"
#include "core/catalog.h"
#include "core/mig_test_support.h"

namespace gpumux {
namespace {

const MigProfile& Profile(const GpuKind& gpu, const std::string& name) {
  for (const MigProfile& p : gpu.mig->profiles) {
    if (p.name == name) return p;
  }
  throw std::runtime_error("no profile " + name);
}

class MigLayoutTest : public ::testing::Test {
 protected:
  Catalog catalog_ = Catalog::LoadBundled();
};

TEST_F(MigLayoutTest, ViolationAgreesWithTheDriverRulesOnRandomLayouts) {
  std::mt19937 rng(11);
  for (const GpuKind& gpu : catalog_.gpus()) {
    if (!gpu.mig) continue;
    const auto& profiles = gpu.mig->profiles;
    int accepted = 0;
    for (int trial = 0; trial < 20000; ++trial) {
      MigLayout layout;
      int n = 1 + int(rng() % 8);
      for (int i = 0; i < n; ++i) {
        const MigProfile& p = profiles[rng() % profiles.size()];
        // Mostly allowed starts, sometimes any slot, so both kinds of mistake are exercised.
        int start = rng() % 4 ? p.placement_starts[rng() % p.placement_starts.size()]
                              : int(rng() % gpu.mig->slots);
        layout.instances.push_back({&p, start});
      }
      bool ok = DriverAccepts(gpu, layout.instances);
      accepted += ok;
      EXPECT_EQ(layout.Violation(*gpu.mig).empty(), ok) << gpu.name << ": " << layout.Describe();
    }
    EXPECT_GT(accepted, 100) << gpu.name << ": the sample must hold valid layouts too";
  }
}

TEST_F(MigLayoutTest, UserGuideExamplesOnA100) {
  const GpuKind& a100 = catalog_.FindGpu("A100-40GB");
  const MigProfile &g1 = Profile(a100, "1g.5gb"), &g2 = Profile(a100, "2g.10gb"),
                   &g3 = Profile(a100, "3g.20gb"), &g4 = Profile(a100, "4g.20gb"),
                   &g7 = Profile(a100, "7g.40gb"), &d1 = Profile(a100, "1g.10gb"),
                   &me = Profile(a100, "1g.5gb+me");
  auto valid = [&](std::vector<MigInstance> v) {
    return MigLayout{v}.Violation(*a100.mig).empty();
  };
  EXPECT_TRUE(valid({{&g1, 0}, {&g1, 1}, {&g2, 2}, {&g3, 4}}));                      // 3-2-1-1
  EXPECT_TRUE(valid({{&g1, 0}, {&g1, 1}, {&g1, 2}, {&g1, 3}, {&g1, 6}, {&g2, 4}}));  // 2-1-1-1-1-1
  EXPECT_TRUE(valid({{&g4, 0}, {&g3, 4}}));
  EXPECT_TRUE(valid({{&d1, 0}, {&d1, 2}, {&d1, 4}, {&d1, 6}})) << "all 8 slots, 4 compute slices";
  EXPECT_FALSE(valid({{&g1, 7}})) << "slot 7 is only for 7g";
  EXPECT_FALSE(valid({{&g2, 6}})) << "2g starts at 0, 2 or 4";
  EXPECT_FALSE(valid({{&g7, 0}, {&g1, 0}}));
  EXPECT_FALSE(valid({{&me, 0}, {&me, 1}})) << "one +me instance per GPU";
  EXPECT_FALSE(valid({{&g3, 0}, {&g3, 4}, {&g1, 0}}));
}

// Creates instances in order without placements, as `nvidia-smi mig -cgi A,B,C` does.
bool CreateInOrder(const std::vector<const MigProfile*>& order, std::vector<MigInstance>* out) {
  unsigned occupied = 0;
  for (const MigProfile* p : order) {
    int start = DriverDefaultStart(*p, occupied);
    if (start < 0) return false;
    occupied |= ((1u << p->memory_slices) - 1) << start;
    out->push_back({p, start});
  }
  return true;
}

TEST_F(MigLayoutTest, DriverDefaultPlacementReproducesTheUserGuide) {
  const GpuKind& a100 = catalog_.FindGpu("A100-40GB");
  const MigProfile *g1 = &Profile(a100, "1g.5gb"), *g2 = &Profile(a100, "2g.10gb"),
                   *g3 = &Profile(a100, "3g.20gb");
  std::vector<MigInstance> got;
  EXPECT_FALSE(CreateInOrder({g1, g1, g2, g3}, &got)) << "known issue: -cgi 19,19,14,9 fails";
  got.clear();
  ASSERT_TRUE(CreateInOrder({g3, g1, g2, g1}, &got)) << "-cgi 9,19,14,19 works";
  got.clear();
  ASSERT_TRUE(CreateInOrder({g3, g2, g1, g1}, &got));
  EXPECT_EQ(MigLayout{got}.Describe(), "3g.20gb@4 2g.10gb@2 1g.5gb@1 1g.5gb@0");
  got.clear();
  ASSERT_TRUE(CreateInOrder({g2, g1, g1, g1, g1, g1}, &got));
  EXPECT_EQ(MigLayout{got}.Describe(), "2g.10gb@4 1g.5gb@6 1g.5gb@3 1g.5gb@2 1g.5gb@1 1g.5gb@0");
}

TEST_F(MigLayoutTest, PlaceInCreationOrderIsWhatTheDriverMakes) {
  const GpuKind& a100 = catalog_.FindGpu("A100-40GB");
  EXPECT_EQ(PlaceInCreationOrder(*a100.mig, {"3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"}).Describe(),
            "3g.20gb@4 2g.10gb@2 1g.5gb@1 1g.5gb@0");
  EXPECT_THROW(PlaceInCreationOrder(*a100.mig, {"1g.5gb", "1g.5gb", "2g.10gb", "3g.20gb"}), Error)
      << "the user guide's known issue: -cgi 19,19,14,9 fails";
  EXPECT_THROW(PlaceInCreationOrder(*a100.mig, {"4g.20gb", "4g.20gb"}), Error);
  EXPECT_THROW(PlaceInCreationOrder(*a100.mig, {"9g.99gb"}), Error);
}

TEST_F(MigLayoutTest, ExplicitPlacementsAreTakenAsGivenAndChecked) {
  const GpuKind& a100 = catalog_.FindGpu("A100-40GB");
  // The order the driver's default placement cannot make works with explicit starts.
  EXPECT_EQ(PlaceInCreationOrder(*a100.mig, {"1g.5gb@0", "1g.5gb@1", "2g.10gb@2", "3g.20gb@4"})
                .Describe(),
            "1g.5gb@0 1g.5gb@1 2g.10gb@2 3g.20gb@4");
  EXPECT_EQ(PlaceInCreationOrder(*a100.mig, {"3g.20gb@0", "1g.5gb"}).Describe(),
            "3g.20gb@0 1g.5gb@6");
  for (std::vector<std::string> bad :
       {std::vector<std::string>{"3g.20gb@2"},  // not an allowed start
        {"3g.20gb@0", "2g.10gb@2"},             // overlaps
        {"3g.20gb@"},
        {"3g.20gb@x"},
        {"3g.20gb@4@4"}}) {  // not a slot number
    EXPECT_THROW(PlaceInCreationOrder(*a100.mig, bad), Error) << bad.back();
  }
}

// A live layout change keeps each busy instance at its placement and number; the new instances
// fill the numbers left, in the order asked; one that would move or lose its number is refused.
TEST_F(MigLayoutTest, ALiveChangeKeepsBusyInstancesWhereAndAsWhatTheyAre) {
  const MigGeometry& h100 = *catalog_.FindGpu("H100-SXM5-80GB").mig;
  MigLayout now = PlaceInCreationOrder(h100, {"1g.10gb@6", "3g.40gb@0", "1g.10gb@5"});
  EXPECT_EQ(KeepingInstances(h100, now, {{1, "tenant 'a'"}}, {"2g.20gb@4", "3g.40gb@0"}),
            (std::vector<std::string>{"2g.20gb@4", "3g.40gb@0"}));
  EXPECT_EQ(KeepingInstances(h100, now, {{1, "a"}, {2, "b"}},
                             {"1g.10gb@5", "3g.40gb@0", "1g.10gb@4", "1g.10gb@6"}),
            (std::vector<std::string>{"1g.10gb@4", "3g.40gb@0", "1g.10gb@5", "1g.10gb@6"}));
  EXPECT_EQ(KeepingInstances(h100, now, {}, {"7g.80gb"}), std::vector<std::string>{"7g.80gb@0"})
      << "nothing busy: any layout";
  try {
    KeepingInstances(h100, now, {{1, "holding tenant 'a'"}}, {"3g.40gb@4"});
    ADD_FAILURE() << "the busy 3g.40gb would move";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kConflict);
    EXPECT_NE(std::string(e.what()).find("instance 1 (3g.40gb at 0, holding tenant 'a')"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(KeepingInstances(h100, now, {{2, "b"}}, {"1g.10gb@5"}), Error)
      << "instance 2 cannot keep its number in a layout of one";
  EXPECT_THROW(KeepingInstances(h100, now, {{1, "a"}}, {"3g.40gb@0", "2g.20gb@2"}), Error)
      << "overlaps: the geometry refuses it";
}

TEST_F(MigLayoutTest, CreationOrderReproducesTheLayoutItWasAskedFor) {
  const GpuKind& h100 = catalog_.FindGpu("H100-SXM5-80GB");
  const MigProfile &g1 = Profile(h100, "1g.10gb"), &g2 = Profile(h100, "2g.20gb"),
                   &g3 = Profile(h100, "3g.40gb");
  MigLayout layout{{{&g1, 1}, {&g3, 4}, {&g2, 2}}};
  std::vector<MigInstance> order = layout.FirstFitCreationOrder(*h100.mig);
  ASSERT_EQ(order.size(), 3u);
  std::vector<const MigProfile*> profiles;
  for (const MigInstance& i : order) profiles.push_back(i.profile);
  std::vector<MigInstance> created;
  ASSERT_TRUE(CreateInOrder(profiles, &created));
  for (size_t i = 0; i < order.size(); ++i) EXPECT_EQ(created[i].start, order[i].start);
  EXPECT_EQ(layout.CreateCommand(*h100.mig), "nvidia-smi mig -cgi 9:4,14:2,19:1 -C");
  // 1g@0 beside 2g@2 and 3g@4 cannot come from default placements (the driver would pick slot 1):
  // the command then pins every start, largest first.
  MigLayout pinned{{{&g1, 0}, {&g3, 4}, {&g2, 2}}};
  EXPECT_TRUE(pinned.FirstFitCreationOrder(*h100.mig).empty());
  EXPECT_EQ(pinned.CreateCommand(*h100.mig), "nvidia-smi mig -cgi 9:4,14:2,19:0 -C");
}

}  // namespace
}  // namespace gpumux
