// The MIG strategy against the driver's rules (core/mig_test_support.h).
#include <gtest/gtest.h>

#include <random>

#include "core/catalog.h"
#include "core/mig_test_support.h"
#include "share/strategy_registry.h"
#include "share/test_support.h"

namespace gpumux {
namespace {

class MigLayoutTest : public ::testing::Test {
 protected:
  Catalog catalog_ = Catalog::LoadBundled();
};

// The property the issue asks for: whatever tenants it is given, the MIG strategy never proposes a
// layout the driver would refuse, and every instance holds its tenant's memory.
TEST_F(MigLayoutTest, ProposedLayoutsAreAlwaysAccepted) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(0, 1);
  int proposed = 0;
  for (const GpuKind& gpu : catalog_.gpus()) {
    if (!gpu.mig) continue;
    for (int trial = 0; trial < 150; ++trial) {
      TenantSet set(gpu);
      int n = 1 + int(u(rng) * 7);
      for (int i = 0; i < n; ++i) {
        double params = (0.5 + u(rng) * 0.3 * gpu.memory_bytes / 2e9) * 1e9 / 2;
        set.AddDecoder("t", params, 0.7, u(rng) < 0.5 ? Slo{} : MinRate(20 + 200 * u(rng)));
      }
      StrategyResult r = StrategyFor(ShareMode::kMig).Evaluate(gpu, set.loads());
      if (!r.layout) continue;
      ++proposed;
      EXPECT_TRUE(DriverAccepts(gpu, r.layout->instances))
          << gpu.name << ": " << r.layout->Describe();
      for (size_t i = 0; i < r.tenants.size(); ++i) {
        EXPECT_GE(r.tenants[i].stranded_memory, 0) << gpu.name;
      }
      EXPECT_EQ(r.fits, StrategyFor(ShareMode::kMig).Fits(gpu, set.loads()))
          << gpu.name << ": " << r.verdict;
    }
  }
  EXPECT_GT(proposed, 300);
}

}  // namespace
}  // namespace gpumux
