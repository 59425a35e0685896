#include "integrations/kubernetes/pod_tenants.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "base/error.h"

namespace gpumux::k8s {
namespace {

class PodTenantsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() / ("gpumux_pod_tenants_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "allocations.json").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static PodRequest Pod(const std::string& uid, std::vector<std::pair<int, int>> memory_compute) {
    PodRequest p;
    p.uid = uid;
    p.name = uid;
    p.assigned = {SlotId{0, -1}};
    for (size_t i = 0; i < memory_compute.size(); ++i)
      p.containers.push_back(
          {"c", int(i), memory_compute[i].first, memory_compute[i].second, 0, -1});
    return p;
  }

  std::filesystem::path dir_;
  std::string path_;
};

TEST_F(PodTenantsTest, TenantIdsNameTheirPod) {
  std::string id = TenantId("5c0e3c6a-8f0b-4a57-9a51-2d0f0e9b7c11", 3);
  EXPECT_EQ(id, "k8s-5c0e3c6a-8f0b-4a57-9a51-2d0f0e9b7c11-3");
  EXPECT_LE(id.size(), 63u);  // gpumuxd's limit on tenant ids
  auto owner = OwnerOfTenant(id);
  ASSERT_TRUE(owner);
  EXPECT_EQ(owner->kind, TenantOwner::kPodContainer);
  EXPECT_EQ(owner->uid, "5c0e3c6a-8f0b-4a57-9a51-2d0f0e9b7c11");
  EXPECT_EQ(owner->container, 3);
  std::string claim = ClaimTenantId("5c0e3c6a-8f0b-4a57-9a51-2d0f0e9b7c11");
  EXPECT_LE(claim.size(), 63u);
  owner = OwnerOfTenant(claim);
  ASSERT_TRUE(owner);
  EXPECT_EQ(owner->kind, TenantOwner::kClaim) << "the device plugin must not take it for a pod's";
  EXPECT_EQ(owner->uid, "5c0e3c6a-8f0b-4a57-9a51-2d0f0e9b7c11");
  EXPECT_EQ(OwnerOfTenant("slurm-12.0"), std::nullopt);
  EXPECT_EQ(OwnerOfTenant("k8s-"), std::nullopt);
  EXPECT_EQ(OwnerOfTenant("k8s-claim-"), std::nullopt);
  EXPECT_EQ(OwnerOfTenant("k8s-abc-x"), std::nullopt);
}

TEST_F(PodTenantsTest, FindsTheNextContainerInOrderAndRemembersAcrossRestarts) {
  std::vector<PodRequest> pods = {Pod("a", {{4, 50}, {4, 0}}), Pod("b", {{4, 0}})};
  {
    AllocationRecord record(path_);
    auto first = record.Find(pods, kMemoryResource, 4);
    ASSERT_TRUE(first);
    EXPECT_EQ(first->tenant, TenantId("a", 0));
    record.Answered(*first, kMemoryResource);
    // The same container's compute comes next (or before): still container 0.
    auto compute = record.Find(pods, kComputeResource, 50);
    ASSERT_TRUE(compute);
    EXPECT_EQ(compute->tenant, TenantId("a", 0));
    // A count that is not the next container's is no one's.
    EXPECT_FALSE(record.Find(pods, kMemoryResource, 5));
  }
  AllocationRecord reloaded(path_);  // a restarted plugin
  auto second = reloaded.Find(pods, kMemoryResource, 4);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->tenant, TenantId("a", 1));
  reloaded.Answered(*second, kMemoryResource);
  EXPECT_EQ(reloaded.Find(pods, kMemoryResource, 4)->tenant, TenantId("b", 0));
  // Pods not assigned by the extender, or finished, wait for nothing.
  pods[1].assigned.clear();
  EXPECT_FALSE(reloaded.Find(pods, kMemoryResource, 4));
  EXPECT_EQ(reloaded.KeepOnly({"b"}), std::vector<std::string>{"a"});
  EXPECT_TRUE(AllocationRecord(path_).Find({Pod("a", {{4, 0}})}, kMemoryResource, 4));
}

TEST_F(PodTenantsTest, ACorruptRecordIsRefusedNotForgotten) {
  std::ofstream(path_) << "{\"a\": [1, 2]}";
  EXPECT_THROW(AllocationRecord record(path_), Error);
  std::ofstream(path_) << "not json";
  EXPECT_THROW(AllocationRecord record(path_), Error);
}

}  // namespace
}  // namespace gpumux::k8s
