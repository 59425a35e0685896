#include "integrations/kubernetes/node_gpus.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "integrations/kubernetes/mig_room_fixture.h"

namespace gpumux::k8s {
namespace {

using nlohmann::json;

json Node(const std::map<std::string, std::string>& annotations) {
  return {{"metadata", {{"name", "n"}, {"annotations", annotations}}}};
}

TEST(MigRoom, APlacementCostsTheFreePlacementsItOverlaps) {
  MigRoom room = H100Room(0);
  EXPECT_EQ(room.Weight(), 7 + 4 * 2 + 3 * 2 + 2 * 4 + 4 + 8);
  // 1g.10gb@6 rules out itself, 1g.20gb@6, 3g.40gb@4 and 7g.80gb@0; @0 also 1g.20gb@0,
  // 2g.20gb@0, 3g.40gb@0 and 4g.40gb@0.
  EXPECT_EQ(room.Loss(*room.Find("1g.10gb", 6)), 1 + 2 + 4 + 8);
  EXPECT_EQ(room.Loss(*room.Find("1g.10gb", 0)), 1 + 2 + 2 + 4 + 4 + 8);
  room.held = 0x0f;  // a busy 3g.40gb@0
  EXPECT_FALSE(room.Free(*room.Find("1g.10gb", 3)));
  EXPECT_TRUE(room.Free(*room.Find("1g.10gb", 4)));
  EXPECT_EQ(room.Loss(*room.Find("1g.10gb", 6)), 1 + 2 + 4);
  room.Count(*room.Find("1g.20gb", 6), +1);
  EXPECT_FALSE(room.Free(*room.Find("1g.10gb", 7 - 1)));
  EXPECT_EQ(room.Taken(), 0xcfu);
  room.Count(*room.Find("1g.20gb", 6), -1);
  EXPECT_EQ(room.Taken(), 0x0fu);
  room.healthy = false;
  EXPECT_FALSE(room.Free(*room.Find("1g.10gb", 4)));
}

TEST(NodeGpus, APodAskingAProfileTakesThePlacementThatRulesOutLeastOnTheFullerGpu) {
  MigRoom empty = H100Room(0), partly = H100Room(1);
  partly.held = 0x0f;
  NodeGpus node({}, {empty, partly});
  MigChoice c = node.ChooseMigPlacement(MigPod("1g.10gb"));
  ASSERT_EQ(c.room, 1) << "beside the busy instance, not on the empty GPU";
  EXPECT_EQ(node.mig_rooms()[1].placements[size_t(c.placement)].start, 6);
  EXPECT_NEAR(c.score, 10.0 * (1 - 7.0 / 41), 1e-9);
  EXPECT_TRUE(node.Fits(MigPod("1g.10gb")));
  // A 4g.40gb has one placement, taken on GPU 1: only the empty GPU holds it.
  c = node.ChooseMigPlacement(MigPod("4g.40gb"));
  EXPECT_EQ(c.room, 0);
  // A profile these GPUs do not make, and a full node, say why GPU by GPU.
  std::string why;
  EXPECT_EQ(node.ChooseMigPlacement(MigPod("2g.24gb"), &why).room, -1);
  EXPECT_EQ(why, "GPU 0: makes no 2g.24gb instance; GPU 1: makes no 2g.24gb instance");
  node.mig_rooms()[0].held = 0xff;
  node.mig_rooms()[1].held = 0xff;
  EXPECT_FALSE(node.Fits(MigPod("1g.10gb")));
  node.FittingSlots(MigPod("1g.10gb"), &why);
  EXPECT_EQ(why,
            "GPU 0: no 1g.10gb placement left beside the instances there; GPU 1: no 1g.10gb "
            "placement left beside the instances there");
  // Slots (whole GPUs, instances not made on demand) never take such a pod, nor rooms a share.
  NodeGpus slots_only({Slot{{0, -1}, 80}, Slot{{1, 2}, 10}});
  EXPECT_FALSE(slots_only.Fits(MigPod("1g.10gb")));
  slots_only.FittingSlots(MigPod("1g.10gb"), &why);
  EXPECT_NE(why.find("no GPU whose MIG instances are made on demand"), std::string::npos) << why;
  PodRequest share;
  share.containers.push_back({"c", 0, 4});
  EXPECT_FALSE(NodeGpus({}, {H100Room(0)}).Fits(share));
}

TEST(NodeGpus, MigRoomsGoThroughTheirAnnotationAndABadOneIsRefusedSayingWhatIsExpected) {
  MigRoom room = H100Room(3);
  room.held = 0x30;
  room.healthy = false;
  NodeGpus node({Slot{{3, 0}, 9}}, {room});
  NodeGpus back = NodeGpus::FromNode(Node({{kNodeGpusAnnotation, node.Annotation()},
                                           {kMigRoomsAnnotation, node.MigRoomsAnnotation()}}));
  EXPECT_EQ(back.slots(), node.slots());
  EXPECT_EQ(back.mig_rooms(), node.mig_rooms());
  EXPECT_EQ(NodeGpus().MigRoomsAnnotation(), "");
  EXPECT_EQ(NodeGpus::FromNode(Node({{kMigRoomsAnnotation, node.MigRoomsAnnotation()}}))
                .mig_rooms()
                .size(),
            1u)
      << "rooms without slots";
  for (const char* bad : {
           "{}",                                                               // not a list
           R"([{"gpu": 0, "placements": []}])",                                // no slices
           R"([{"gpu": 0, "slices": 17, "placements": []}])",                  // too many
           R"([{"gpu": 0, "slices": 8, "held": [8], "placements": []}])",      // a slice past them
           R"([{"gpu": 0, "slices": 8, "placements": [["1g.10gb", 7, 2]]}])",  // past the end
           R"([{"gpu": 0, "slices": 8, "placements": [["1g.10gb", 0, 0]]}])",  // no slices
           R"([{"gpu": 0, "slices": 8, "placements": [[1, 0, 1]]}])",          // not a name
           R"([{"gpu": -1, "slices": 8, "placements": []}])",
       }) {
    try {
      NodeGpus::FromNode(Node({{kMigRoomsAnnotation, bad}}));
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadInput);
      EXPECT_NE(std::string(e.what()).find("gpumux.io/mig-rooms"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace gpumux::k8s
