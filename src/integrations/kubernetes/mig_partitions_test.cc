#include "integrations/kubernetes/mig_partitions.h"

#include <gtest/gtest.h>

#include <set>

#include "core/catalog.h"
#include "node/agent/agent_client.h"

namespace gpumux::k8s {
namespace {

using nlohmann::json;

// GPU 0 in MIG mode as gpumuxd describes an H100 (the catalog's geometry), with `instances`
// ({"profile", "start"} each, numbered in order).
json H100InMig(const std::vector<std::pair<std::string, int>>& instances) {
  static const Catalog catalog = Catalog::LoadBundled();
  const MigGeometry& geo = *catalog.FindGpu("H100-SXM5-80GB").mig;
  json made = json::array();
  for (size_t k = 0; k < instances.size(); ++k)
    made.push_back({{"instance", k},
                    {"profile", instances[k].first},
                    {"start", instances[k].second},
                    {"memory_bytes", 10ull << 30}});
  return {{"index", 0},
          {"name", "H100-SXM5-80GB"},
          {"mode", "mig"},
          {"instances", made},
          {"mig_geometry", agent::MigGeometryJson(geo)}};
}

json Tenants(const std::vector<std::pair<std::string, int>>& on) {
  json list = json::array();
  for (const auto& [id, instance] : on)
    list.push_back({{"id", id}, {"gpu", 0}, {"instance", instance}});
  return {{"tenants", list}};
}

std::set<std::string> Names(const std::vector<json>& devices) {
  std::set<std::string> names;
  for (const json& d : devices) names.insert(d["name"]);
  return names;
}

// An empty H100: every placement of every profile but +me: 7 + 4 + 3 + 2 + 1 + 1.
TEST(MigPartitions, AnEmptyGpuOffersEveryPlacementAndItsWholeCounterSet) {
  std::optional<MigGpu> gpu = MigGpu::Read(H100InMig({}), Tenants({}));
  ASSERT_TRUE(gpu);
  std::vector<json> devices = gpu->Devices();
  EXPECT_EQ(devices.size(), 18u);
  EXPECT_TRUE(Names(devices).count("gpu-0-mig-1g-10gb-at-6"));
  EXPECT_TRUE(Names(devices).count("gpu-0-mig-7g-80gb-at-0"));
  json set = gpu->CounterSet();
  EXPECT_EQ(set["name"], "gpu-0-mig");
  EXPECT_EQ(set["counters"].size(), 9u) << set;
  EXPECT_EQ(set["counters"]["compute-slices"]["value"], "7");
  // A 3g.40gb at 4 consumes slices 4-7 and three compute slices.
  for (const json& d : devices) {
    if (d["name"] != "gpu-0-mig-3g-40gb-at-4") continue;
    json used = d["consumesCounters"][0]["counters"];
    EXPECT_EQ(used.size(), 5u) << used;
    EXPECT_EQ(used["memory-slice-7"]["value"], "1");
    EXPECT_EQ(used["compute-slices"]["value"], "3");
  }
  EXPECT_EQ(GpuOfMigPlacementDevice("gpu-12-mig-1g-10gb-at-3"), 12);
  EXPECT_FALSE(GpuOfMigPlacementDevice("gpu-0-mig-1"));
  EXPECT_FALSE(GpuOfMigPlacementDevice("gpu--mig-1g-10gb-at-3"));
}

// A 2g.20gb at 0 held by a tenant that is not a claim, a claim's 1g.10gb at 4, an idle 1g.10gb at
// 6: what overlaps the held one is not offered and its compute is off the set; the claim's and the
// idle one are offered (the scheduler counts the claim's); making a 3g.40gb at 4 drops the idle
// instance it overlaps and keeps the claim's, which gpumuxd then refuses to move.
TEST(MigPartitions, AnInstanceOthersHoldIsNotOfferedNorAnythingOverlappingIt) {
  std::optional<MigGpu> gpu = MigGpu::Read(
      H100InMig({{"2g.20gb", 0}, {"1g.10gb", 4}, {"1g.10gb", 6}}),
      Tenants({{"operator-job", 0}, {"k8s-claim-c1a1c1a1-0000-4000-8000-000000000001", 1}}));
  ASSERT_TRUE(gpu);
  std::set<std::string> offered = Names(gpu->Devices());
  EXPECT_FALSE(offered.count("gpu-0-mig-2g-20gb-at-0"));
  EXPECT_FALSE(offered.count("gpu-0-mig-1g-10gb-at-1"));
  EXPECT_FALSE(offered.count("gpu-0-mig-7g-80gb-at-0"));
  EXPECT_TRUE(offered.count("gpu-0-mig-1g-10gb-at-4"));
  EXPECT_TRUE(offered.count("gpu-0-mig-1g-10gb-at-6"));
  EXPECT_TRUE(offered.count("gpu-0-mig-3g-40gb-at-4"));
  json counters = gpu->CounterSet()["counters"];
  EXPECT_EQ(counters["compute-slices"]["value"], "5");
  EXPECT_EQ(counters["memory-slice-1"]["value"], "0");
  EXPECT_EQ(counters["memory-slice-2"]["value"], "1");

  std::optional<MigPlacement> p = gpu->Offered("gpu-0-mig-3g-40gb-at-4");
  ASSERT_TRUE(p);
  EXPECT_EQ(gpu->LayoutMaking(*p),
            (std::vector<std::string>{"2g.20gb@0", "1g.10gb@4", "3g.40gb@4"}));
  EXPECT_EQ(gpu->LayoutWithout({2}), (std::vector<std::string>{"2g.20gb@0", "1g.10gb@4"}));
  EXPECT_TRUE(gpu->instances[2].idle());
  EXPECT_FALSE(gpu->instances[1].idle());
  EXPECT_FALSE(gpu->Offered("gpu-0-mig-1g-10gb-at-1"));
}

// A tenant over two instances (gpumuxd lists each of its places) holds both: neither is offered
// nor idle. Without "places" (an older gpumuxd) only its first is known.
TEST(MigPartitions, ATenantOverSeveralInstancesHoldsEachOfThem) {
  json tenants = {
      {"tenants", {{{"id", "tp-job"}, {"gpu", 0}, {"instance", 0}, {"places", {"0.0", "0.2"}}}}}};
  std::optional<MigGpu> gpu =
      MigGpu::Read(H100InMig({{"1g.10gb", 0}, {"1g.10gb", 1}, {"1g.10gb", 2}}), tenants);
  ASSERT_TRUE(gpu);
  EXPECT_FALSE(gpu->instances[0].idle());
  EXPECT_TRUE(gpu->instances[1].idle());
  EXPECT_FALSE(gpu->instances[2].idle());
  std::set<std::string> offered = Names(gpu->Devices());
  EXPECT_FALSE(offered.count("gpu-0-mig-1g-10gb-at-2"));
  EXPECT_TRUE(offered.count("gpu-0-mig-1g-10gb-at-1"));
  EXPECT_EQ(gpu->CounterSet()["counters"]["compute-slices"]["value"], "5");
}

// An idle instance the driver did not make (kept) is offered itself, as a made device, but no
// placement overlapping it is: making one would remove it. Not kept, an idle instance gives way.
TEST(MigPartitions, AKeptIdleInstanceIsOfferedItselfButNothingThatWouldReplaceIt) {
  std::optional<MigGpu> gpu = MigGpu::Read(H100InMig({{"1g.10gb", 6}}), Tenants({}));
  ASSERT_TRUE(gpu);
  std::set<std::string> given_way = Names(gpu->Devices());
  EXPECT_TRUE(given_way.count("gpu-0-mig-1g-20gb-at-6")) << "not kept: it may be replaced";
  EXPECT_EQ(gpu->LayoutMaking(*gpu->Offered("gpu-0-mig-1g-20gb-at-6")),
            std::vector<std::string>{"1g.20gb@6"});
  gpu->instances[0].kept = true;
  std::set<std::string> offered = Names(gpu->Devices());
  EXPECT_TRUE(offered.count("gpu-0-mig-1g-10gb-at-6"));
  EXPECT_FALSE(offered.count("gpu-0-mig-1g-20gb-at-6"));
  EXPECT_FALSE(offered.count("gpu-0-mig-7g-80gb-at-0"));
  EXPECT_TRUE(offered.count("gpu-0-mig-3g-40gb-at-0"));
  EXPECT_EQ(gpu->LayoutMaking(*gpu->Offered("gpu-0-mig-3g-40gb-at-0")),
            (std::vector<std::string>{"1g.10gb@6", "3g.40gb@0"}));
}

TEST(MigPartitions, AGpuNotInMigModeOrWithoutGeometryIsNotPartitioned) {
  json gpu = H100InMig({});
  gpu["mode"] = "timeslice";
  EXPECT_FALSE(MigGpu::Read(gpu, Tenants({})));
  gpu = H100InMig({});
  gpu.erase("mig_geometry");
  EXPECT_FALSE(MigGpu::Read(gpu, Tenants({})));
}

}  // namespace
}  // namespace gpumux::k8s
