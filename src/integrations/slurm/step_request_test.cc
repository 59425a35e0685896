#include "integrations/slurm/step_request.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace gpumux::slurm {
namespace {

TEST(StepRequest, ShardsOnAGpuByIndexBecomeItsQuota) {
  StepGrant grant;
  grant.step_gpus = "1", grant.visible_devices = "0", grant.shards = "3";
  auto r = StepRequest(grant, "slurm-7");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->gpu, 1) << "the node's GPU index (SLURM_STEP_GPUS), not the task's view";
  EXPECT_EQ(r->shards, 3u);
  EXPECT_EQ(r->id, "slurm-7");
  EXPECT_TRUE(r->join) << "later steps join the job's tenant";
  EXPECT_FALSE(r->device);
}

TEST(StepRequest, AStepOnTwoGpusIsOneTenantOverBothWithItsShardsSplit) {
  StepGrant grant;
  grant.step_gpus = "2,3", grant.visible_devices = "0,1", grant.shards = "5";
  auto r = StepRequest(grant, "slurm-10");
  ASSERT_TRUE(r);
  EXPECT_EQ(agent::TenantRequestJson(*r)["gpus"], nlohmann::json::array({2, 3}));
  EXPECT_FALSE(r->gpu);
  EXPECT_EQ(r->shards, 3u) << "5 shards over 2 GPUs: 3 on each (rounded up)";
  grant.shards.clear(), grant.mem = "10GiB";
  EXPECT_EQ(StepRequest(grant, "slurm-10")->memory, std::vector<uint64_t>{10ull << 30})
      << "a quota on each GPU, in bytes";
}

TEST(StepRequest, AMigDeviceSlurmNamesByUuidIsAskedForByUuid) {
  StepGrant grant;
  grant.step_gpus = "2", grant.visible_devices = "MIG-5a1e0000-0000-4000-8000-000000000003",
  grant.mem = "4GiB";
  auto r = StepRequest(grant, "slurm-8");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->device, "MIG-5a1e0000-0000-4000-8000-000000000003");
  EXPECT_FALSE(r->gpu) << "gpumuxd maps the UUID to the GPU and instance";
  EXPECT_EQ(r->memory, std::vector<uint64_t>{4ull << 30});
}

TEST(StepRequest, SeveralMigDevicesAreOneTenantOverAll) {
  StepGrant grant;
  grant.step_gpus = "0", grant.shards = "6",
  grant.visible_devices =
      "MIG-5a1e0000-0000-4000-8000-000000000003,"
      "MIG-5a1e0000-0000-4000-8000-000000000001";
  auto r = StepRequest(grant, "slurm-11");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->devices, (std::vector<std::string>{"MIG-5a1e0000-0000-4000-8000-000000000003",
                                                  "MIG-5a1e0000-0000-4000-8000-000000000001"}));
  EXPECT_FALSE(r->device);
  EXPECT_EQ(r->shards, 3u) << "6 shards over 2 devices";
}

TEST(StepRequest, OptionsAndMpsPercentageAreCarried) {
  StepGrant grant;
  grant.step_gpus = "0", grant.mps_percent = "25", grant.compute = "40%", grant.priority = "low";
  auto r = StepRequest(grant, "slurm-9");
  ASSERT_TRUE(r);
  EXPECT_DOUBLE_EQ(*r->mps_percent, 25.0);
  EXPECT_DOUBLE_EQ(*r->compute_percent, 40.0);
  EXPECT_EQ(r->priority, node::Priority::kLow);
  EXPECT_EQ(agent::TenantRequestJson(*r)["compute"], 40.0) << "a number on the wire";
}

TEST(StepRequest, AnOptionThatDoesNotParseIsRefusedNamingIt) {
  StepGrant grant;
  grant.step_gpus = "0", grant.mem = "ten gigs";
  try {
    StepRequest(grant, "slurm-12");
    FAIL() << "a size that does not parse was sent";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--gpumux-mem"), std::string::npos) << e.what();
  }
  grant.mem = "4GiB", grant.priority = "urgent";
  EXPECT_THROW(StepRequest(grant, "slurm-12"), Error);
}

TEST(StepRequest, AStepWithoutAShareOfAGpuAsksForNothing) {
  StepGrant whole;
  whole.step_gpus = "0", whole.visible_devices = "0";
  EXPECT_FALSE(StepRequest(whole, "slurm-1")) << "a whole GPU: nothing to share";
  StepGrant no_gpu;
  no_gpu.shards = "2";
  EXPECT_FALSE(StepRequest(no_gpu, "slurm-1")) << "no GPU on this node";
}

}  // namespace
}  // namespace gpumux::slurm
