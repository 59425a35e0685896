#include "fleet/simulator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "base/error.h"
#include "fleet/experiment.h"
#include "fleet/policy.h"
#include "fleet/test_support.h"

namespace gpumux::fleet {
namespace {

// A small random cluster and trace with every kind of pod, GPU model constraints included.
struct World {
  std::vector<NodeSpec> nodes;
  std::vector<PodSpec> pods;
};

World MakeWorld(uint64_t seed) {
  Rng rng(seed);
  World w;
  const char* models[] = {"A", "B", "C"};
  for (int i = 0; i < 40; ++i) {
    int gpus = std::vector<int>{1, 2, 4, 8}[rng.Below(4)];
    w.nodes.push_back(Node("n" + std::to_string(i), 16 + int(rng.Below(112)), gpus,
                           models[rng.Below(3)], 64 + int(rng.Below(512))));
  }
  const int sizes[] = {50, 230, 320, 470, 650, 810};
  for (int i = 0; i < 400; ++i) {
    std::string name = "p" + std::to_string(1000 + i);
    int kind = int(rng.Below(10));
    std::vector<std::string> spec;
    if (rng.Below(5) == 0) spec = {models[rng.Below(3)]};
    if (kind < 2) {
      w.pods.push_back(Pod(name, 1 + int(rng.Below(16)), 0, 0, {}, 1 + int(rng.Below(32))));
    } else if (kind < 6) {
      w.pods.push_back(
          Pod(name, 1 + int(rng.Below(12)), 1, sizes[rng.Below(6)], spec, 1 + int(rng.Below(48))));
    } else if (kind < 9) {
      w.pods.push_back(Pod(name, 2 + int(rng.Below(16)), 1, 1000, spec, 1 + int(rng.Below(64))));
    } else {
      w.pods.push_back(Pod(name, 8 + int(rng.Below(64)), std::vector<int>{2, 4, 8}[rng.Below(3)],
                           1000, spec, 16));
    }
  }
  return w;
}

TEST(Simulator, StreamIsTheWholeTraceOnceThenClonesUpToTheInflation) {
  World w = MakeWorld(3);
  w.pods.resize(100);  // less GPU request than capacity, so clones must follow
  Cluster c(w.nodes);
  Rng rng(42);
  std::vector<int> stream = BuildStream(w.pods, c.gpu_capacity_milli(), 1.3, rng);
  ASSERT_GT(stream.size(), w.pods.size());
  std::vector<int> first(stream.begin(), stream.begin() + long(w.pods.size()));
  std::sort(first.begin(), first.end());
  for (size_t i = 0; i < first.size(); ++i)
    ASSERT_EQ(first[i], int(i)) << "every pod exactly once first";
  int64_t total = 0;
  for (int i : stream) total += w.pods[i].total_gpu_milli();
  EXPECT_LE(double(total), 1.3 * double(c.gpu_capacity_milli()) + 7000)
      << "at most one multi-GPU overshoot";
  EXPECT_GT(double(total), 1.3 * double(c.gpu_capacity_milli()) - 1000);
}

// Replays every placement on a fresh cluster: each must fit (CPU, memory, GPU model, GPU room), so
// no GPU goes over 1000 milli and no node over its CPU or memory.
TEST(Simulator, EveryPolicyRespectsCapacityAndModelsOnEveryRun) {
  for (uint64_t seed : {1, 2}) {
    World w = MakeWorld(seed);
    Cluster empty(w.nodes);
    TargetWorkloads target = TargetWorkloads::FromPods(empty, w.pods);
    for (const std::string& policy : PolicyNames()) {
      std::vector<Placement> placements;
      Simulation sim = Simulate(empty, w.pods, target, policy, seed, 1.3, &placements);
      Cluster replay = empty;
      for (const Placement& p : placements) {
        Shape s = replay.ShapeOf(w.pods[p.pod]);
        ASSERT_TRUE(replay.Fits(p.node, s))
            << policy << ": " << w.pods[p.pod].name << " on " << w.nodes[p.node].name;
        if (s.shares_gpu()) {
          ASSERT_GE(replay.node(p.node).gpu_left[p.gpu], s.gpu_milli) << policy;
        }
        if (!s.cpu_only() && !w.pods[p.pod].gpu_spec.empty()) {
          EXPECT_EQ(w.pods[p.pod].gpu_spec[0], w.nodes[p.node].model) << policy;
        }
        replay.Place(p.node, s, p.gpu);
      }
      for (int i = 0; i < replay.size(); ++i) {
        EXPECT_GE(replay.node(i).cpu_left, 0);
        EXPECT_GE(replay.node(i).memory_left, 0);
        for (int g = 0; g < replay.node(i).gpus; ++g) {
          EXPECT_GE(replay.node(i).gpu_left[g], 0);
          EXPECT_LE(replay.node(i).gpu_left[g], kMilli);
        }
      }
      ASSERT_FALSE(sim.rows.empty());
      EXPECT_EQ(sim.rows.back().used_milli, replay.used_gpu_milli()) << policy;
      EXPECT_EQ(int(placements.size()) + sim.failed_pods, int(sim.rows.size())) << policy;
      for (const CurvePoint& p : Curve(sim, 130)) {
        if (p.present) {
          EXPECT_NEAR(p.allocation_pct + p.unallocated_pct, 100, 1e-9) << policy;
        }
      }
    }
  }
}

TEST(Simulator, SameSeedSameRun) {
  World w = MakeWorld(5);
  Cluster empty(w.nodes);
  TargetWorkloads target = TargetWorkloads::FromPods(empty, w.pods);
  for (const char* policy : {"random", "fgd", "gpumux"}) {
    Simulation a = Simulate(empty, w.pods, target, policy, 7, 1.3);
    Simulation b = Simulate(empty, w.pods, target, policy, 7, 1.3);
    ASSERT_EQ(a.rows.size(), b.rows.size());
    EXPECT_EQ(a.rows.back().used_milli, b.rows.back().used_milli) << policy;
  }
}

TEST(Curve, ValueAtXIsTheMeanOverRowsThatRoundToXHalfToEven) {
  Simulation sim;
  sim.capacity_milli = 100 * kMilli;  // 100 GPUs: arrived % = arrived milli / 1000
  // Rows at 1.5% (rounds to 2), 2.4% (2), 2.5% (2, half to even), 3.5% (4).
  sim.rows = {{1500, 1000, 0, 0}, {2400, 2000, 0, 0}, {2500, 3000, 0, 0}, {3500, 3500, 0, 0}};
  std::vector<CurvePoint> c = Curve(sim, 5);
  ASSERT_TRUE(c[2].present);
  EXPECT_NEAR(c[2].allocation_pct, (1.0 + 2.0 + 3.0) / 3, 1e-9);
  EXPECT_NEAR(c[2].unallocated_pct, 100 - 2.0, 1e-9);
  EXPECT_NEAR(c[4].allocation_pct, 3.5, 1e-9);
  // No row rounds to 3 or 5: the window widens to X±1.
  EXPECT_NEAR(c[3].allocation_pct, (1.0 + 2.0 + 3.0 + 3.5) / 4, 1e-9);
  EXPECT_NEAR(c[5].allocation_pct, 3.5, 1e-9);
  // Nothing within ±1 of 0: it widens to ±2.
  EXPECT_NEAR(c[0].allocation_pct, (1.0 + 2.0 + 3.0) / 3, 1e-9);
}

// The candidate index (candidate_index.h) places as the policies' definition reads, a scan of every
// node for every pod: the same placements, failures and fragmentation, bit for bit, for every
// policy; on small random worlds (every kind of pod, model constraints, so gpumux's model prices
// apply and it scans), the default trace, and a variant with gpu_spec pods. Then with departures.
TEST(Simulator, EveryPolicyPlacesAsAScanOfEveryNodeDoes) {
  auto check = [](const std::vector<NodeSpec>& nodes, const std::vector<PodSpec>& pods,
                  const std::string& what) {
    Cluster empty(nodes);
    TargetWorkloads targets = TargetWorkloads::FromPods(empty, pods);
    for (const std::string& policy : PolicyNames()) {
      std::vector<Placement> indexed, scanned;
      Simulation a = Simulate(empty, pods, targets, policy, 7, 1.3, &indexed);
      Simulation b = Simulate(empty, pods, targets, policy, 7, 1.3, &scanned, true);
      ASSERT_EQ(indexed.size(), scanned.size()) << what << ", " << policy;
      auto differs = std::mismatch(indexed.begin(), indexed.end(), scanned.begin(),
                                   [](const Placement& x, const Placement& y) {
                                     return x.pod == y.pod && x.node == y.node && x.gpu == y.gpu;
                                   });
      EXPECT_EQ(differs.first, indexed.end()) << what << ", " << policy << ": placement "
                                              << (differs.first - indexed.begin()) << " differs";
      EXPECT_EQ(a.failed_pods, b.failed_pods) << what << ", " << policy;
      ASSERT_FALSE(a.rows.empty());
      EXPECT_EQ(a.rows.back().frag_milli, b.rows.back().frag_milli) << what << ", " << policy;
    }
  };
  for (uint64_t seed : {1, 2, 3}) {
    World w = MakeWorld(seed);
    check(w.nodes, w.pods, "world " + std::to_string(seed));
  }
  std::string dir = TraceDir();
  auto nodes = LoadNodes(dir + "/openb_node_list_gpu_node.csv");
  check(nodes, LoadPods(dir + "/openb_pod_list_default.csv"), "default trace");
  check(nodes, LoadPods(dir + "/openb_pod_list_gpuspec20.csv"), "gpuspec20");
}

// The paper's numbers, reproduced on the real trace (bundled in traces/).
TEST(Reproduction, ArtifactNumbersOnTheDefaultTrace) {
  std::string dir = TraceDir();
  ExperimentOptions o;
  o.policies = {"random", "dotprod", "bestfit", "fgd", "gpumux"};
  o.jobs = 2;
  auto curves = RunExperiment(LoadNodes(dir + "/openb_node_list_gpu_node.csv"),
                              LoadPods(dir + "/openb_pod_list_default.csv"), o);
  // Artifact (10 seeds, mean): Random 13.70, DotProd 9.38, BestFit 7.14, FGD 4.77.
  struct Expect {
    double mean, tolerance;
  } expected[] = {{13.70, 0.5}, {9.38, 0.5}, {7.14, 0.3}, {4.77, 0.3}};
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(At(curves[i], 100, &CurvePoint::unallocated_pct).mean, expected[i].mean,
                expected[i].tolerance)
        << o.policies[i];
  }
  double fgd = At(curves[3], 100, &CurvePoint::unallocated_pct).mean;
  double ours = At(curves[4], 100, &CurvePoint::unallocated_pct).mean;
  EXPECT_LT(ours, fgd - 0.2) << "gpumux must beat FGD on the default trace";
  // Issue 44's target (issue 12 asked 4.2): within ~0.45 points of the ~3.44% packing bound.
  EXPECT_LE(ours, 3.9) << "gpumux on the default trace, seeds 42-51";
}

// gpumux's policy against FGD on every trace variant, same seeds, same run.
TEST(Reproduction, GpumuxBeatsFgdOnEveryTraceVariant) {
  std::string dir = TraceDir();
  auto nodes = LoadNodes(dir + "/openb_node_list_gpu_node.csv");
  for (const char* variant : {"default", "gpushare40", "multigpu30", "gpuspec20", "cpu100"}) {
    ExperimentOptions o;
    o.policies = {"fgd", "gpumux"};
    o.jobs = 2;
    auto curves =
        RunExperiment(nodes, LoadPods(dir + "/openb_pod_list_" + std::string(variant) + ".csv"), o);
    double fgd = At(curves[0], 100, &CurvePoint::unallocated_pct).mean;
    double ours = At(curves[1], 100, &CurvePoint::unallocated_pct).mean;
    EXPECT_LT(ours, fgd) << variant << ": gpumux " << ours << "% vs FGD " << fgd << "%";
  }
}

}  // namespace
}  // namespace gpumux::fleet

namespace gpumux::fleet {
namespace {

// Gives each pod of `w` a lifetime and an arrival inside a window short enough that they crowd
// the small cluster, so that pods fail, leave and make room while others arrive.
void AddTimes(World& w, uint64_t seed) {
  Rng rng(seed);
  for (PodSpec& p : w.pods) {
    p.creation_time = int64_t(rng.Below(200));
    p.deletion_time = p.creation_time + int64_t(rng.Below(800));
  }
}

TEST(Departures, ConserveCapacityAtEveryStepAndEndEmpty) {
  for (uint64_t seed : {1, 2, 3}) {
    World w = MakeWorld(seed);
    AddTimes(w, seed);
    Cluster empty(w.nodes);
    auto targets = TargetWorkloads::FromPods(empty, w.pods);
    for (const char* policy : {"fgd", "gpumux", "bestfit"}) {
      std::vector<ChurnStep> steps;
      ChurnResult r = SimulateDepartures(empty, w.pods, targets, policy, seed, 1, &steps);
      ASSERT_EQ(steps.size(), 2 * w.pods.size());
      double previous = -1;
      for (const ChurnStep& s : steps) {
        EXPECT_EQ(s.placed_milli - s.departed_milli, s.used_milli) << policy << " at " << s.time;
        EXPECT_GE(s.placed, s.departed);
        EXPECT_GE(s.time, previous) << "in time order";
        previous = s.time;
      }
      EXPECT_EQ(steps.back().used_milli, 0) << "every placed pod left";
      EXPECT_EQ(steps.back().placed + r.failed_pods, int(w.pods.size()));
      EXPECT_EQ(steps.back().departed, steps.back().placed);
      EXPECT_GT(r.failed_pods, 0) << "the window is crowded enough to refuse some";
      EXPECT_LT(r.failed_pods, int(w.pods.size()));
      EXPECT_GT(r.unallocated_pct, 0);
      EXPECT_LT(r.unallocated_pct, 100);
    }
  }
}

// Nodes that empty again come back to the candidate index: the same run as a scan of every node.
TEST(Departures, EveryPolicyPlacesAsAScanOfEveryNodeDoes) {
  for (uint64_t seed : {1, 2}) {
    World w = MakeWorld(seed);
    AddTimes(w, seed);
    Cluster empty(w.nodes);
    auto targets = TargetWorkloads::FromPods(empty, w.pods);
    for (const std::string& policy : PolicyNames()) {
      std::vector<ChurnStep> indexed, scanned;
      ChurnResult a = SimulateDepartures(empty, w.pods, targets, policy, seed, 1, &indexed);
      ChurnResult b = SimulateDepartures(empty, w.pods, targets, policy, seed, 1, &scanned, true);
      EXPECT_EQ(a.failed_pods, b.failed_pods) << policy;
      EXPECT_EQ(a.unallocated_pct, b.unallocated_pct) << policy;
      ASSERT_EQ(indexed.size(), scanned.size());
      for (size_t i = 0; i < indexed.size(); ++i)
        ASSERT_EQ(indexed[i].used_milli, scanned[i].used_milli) << policy << " at step " << i;
    }
  }
}

TEST(Departures, APodThatLeavesMakesRoomForTheNextAtTheSameTime) {
  std::vector<NodeSpec> nodes = {Node("n", 8, 1, "A", 64)};
  std::vector<PodSpec> pods = {Pod("a", 1, 1, 1000, {}, 1), Pod("b", 1, 1, 1000, {}, 1),
                               Pod("c", 1, 1, 1000, {}, 1)};
  pods[0].creation_time = 0, pods[0].deletion_time = 10;   // holds the GPU until 10
  pods[1].creation_time = 5, pods[1].deletion_time = 20;   // finds it taken: fails
  pods[2].creation_time = 10, pods[2].deletion_time = 30;  // a leaves first at 10: fits
  Cluster empty(nodes);
  auto targets = TargetWorkloads::FromPods(empty, pods);
  ChurnResult r = SimulateDepartures(empty, pods, targets, "gpumux", 42, 1);
  EXPECT_EQ(r.failed_pods, 1);
  EXPECT_DOUBLE_EQ(r.failed_request_pct, 100.0 / 3);
  EXPECT_DOUBLE_EQ(r.peak_allocation_pct, 100);
  EXPECT_DOUBLE_EQ(r.unallocated_pct, 0) << "the GPU is held from the first arrival to the last";
  // A time scale of 0.5 spreads the arrivals twice as far (lifetimes unchanged): a holds the GPU
  // from 0 to 10, b arrives at 10 as a leaves and holds it until 25, c arrives at 20.
  ChurnResult stretched = SimulateDepartures(empty, pods, targets, "gpumux", 42, 0.5);
  EXPECT_EQ(stretched.failed_pods, 1) << "c arrives at 20 while b holds the GPU until 25";
}

TEST(Departures, RefusesPodsWithoutTimes) {
  World w = MakeWorld(1);
  Cluster empty(w.nodes);
  auto targets = TargetWorkloads::FromPods(empty, w.pods);
  EXPECT_THROW(SimulateDepartures(empty, w.pods, targets, "fgd", 1, 1), Error);
  AddTimes(w, 1);
  EXPECT_THROW(SimulateDepartures(empty, w.pods, targets, "fgd", 1, 0), Error);
}

TEST(ClusterRemove, UndoesPlaceExactly) {
  Cluster c({Node("n", 32, 4, "A", 128)});
  NodeState before = c.node(0);
  Shape share = c.ShapeOf(Pod("s", 2, 1, 300, {}, 4));
  Shape two = c.ShapeOf(Pod("w", 4, 2, 1000, {}, 8));
  uint32_t s_gpus = c.Place(0, share, 2);
  uint32_t w_gpus = c.Place(0, two, -1);
  EXPECT_EQ(s_gpus, 1u << 2);
  EXPECT_EQ(w_gpus, (1u << 0) | (1u << 1));
  c.Remove(0, two, w_gpus);
  c.Remove(0, share, s_gpus);
  const NodeState& after = c.node(0);
  EXPECT_EQ(after.cpu_left, before.cpu_left);
  EXPECT_EQ(after.memory_left, before.memory_left);
  EXPECT_EQ(after.gpu_left, before.gpu_left);
  EXPECT_EQ(after.gpu_left_total, before.gpu_left_total);
  EXPECT_EQ(after.free_gpus, before.free_gpus);
  EXPECT_TRUE(after.affinity.empty());
  EXPECT_EQ(c.used_gpu_milli(), 0);
  EXPECT_GT(after.version, before.version) << "score caches see the change";
}

}  // namespace
}  // namespace gpumux::fleet
