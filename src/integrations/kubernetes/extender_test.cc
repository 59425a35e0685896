#include "integrations/kubernetes/extender.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>

#include "base/error.h"
#include "fleet/cluster.h"
#include "fleet/fragmentation.h"
#include "fleet/policy.h"
#include "integrations/kubernetes/mig_room_fixture.h"
#include "integrations/kubernetes/policy_scores.h"

namespace gpumux::k8s {
namespace {

using nlohmann::json;

// kube-scheduler's ExtenderArgs as it sends them (Go field names, full v1.Pod and v1.NodeList).
json Fixture(const std::string& name) {
  std::ifstream in(std::string(GPUMUX_SOURCE_DIR) + "/tests/kubernetes/" + name);
  std::stringstream text;
  text << in.rdbuf();
  return json::parse(text.str());
}

json Pod(const std::string& uid, int memory_gib, int compute = 0) {
  json limits = {{kMemoryResource, std::to_string(memory_gib)}};
  if (compute) limits[kComputeResource] = std::to_string(compute);
  return {{"metadata", {{"name", "p-" + uid}, {"namespace", "default"}, {"uid", uid}}},
          {"spec", {{"containers", {{{"name", "c"}, {"resources", {{"limits", limits}}}}}}}}};
}

NodeGpus Gpus(std::vector<int> memory_gib) {
  std::vector<Slot> slots;
  for (size_t i = 0; i < memory_gib.size(); ++i) slots.push_back({{int(i), -1}, memory_gib[i]});
  return NodeGpus(slots);
}

// The filter's answer as kube-scheduler reads it.
json FilterJson(Extender& extender, const json& args) {
  return json::parse(extender.Filter(ExtenderArgs::Parse(args.dump())).Json());
}

TEST(Extender, FiltersFullNodesByTheRoomOfOneGpuAndSaysWhyNot) {
  Extender extender({}, nullptr);
  json result = FilterJson(extender, Fixture("extender_args_nodes.json"));
  ASSERT_EQ(result["Nodes"]["items"].size(), 1u) << result;
  EXPECT_EQ(result["Nodes"]["items"][0]["metadata"]["name"], "gpu-node-1");
  EXPECT_TRUE(result["NodeNames"].is_null());
  EXPECT_EQ(result["Error"], "");
  std::string why = result["FailedNodes"]["gpu-node-2"];
  EXPECT_NE(why.find("GPU 0.0: 20 GiB of memory free, the pod asks 28"), std::string::npos) << why;
  EXPECT_NE(why.find("GPU 1: unhealthy"), std::string::npos) << why;
  EXPECT_NE(result["FailedNodes"]["cpu-node-1"].get<std::string>().find("no gpumux GPU"),
            std::string::npos);
}

TEST(Extender, FiltersNodeNamesFromWhatItKnowsOfTheNodes) {
  Extender extender({}, nullptr);
  extender.Filter(
      ExtenderArgs::Parse(Fixture("extender_args_nodes.json").dump()));  // learns the nodes' GPUs
  json result = FilterJson(extender, Fixture("extender_args_node_names.json"));
  EXPECT_EQ(result["NodeNames"], json{"gpu-node-1"}) << result;
  EXPECT_NE(result["FailedNodes"]["gpu-node-2"].get<std::string>().find(
                "a MIG instance takes no compute share"),
            std::string::npos)
      << result;
}

TEST(Extender, MatchesKeysWithoutRegardToCaseAsGoDoes) {
  Extender extender({}, nullptr);
  extender.SetNode("n", Gpus({80}));
  json args = {{"pod", Pod("u1", 10)}, {"nodenames", {"n"}}};
  EXPECT_EQ(FilterJson(extender, args)["NodeNames"], json{"n"});
}

TEST(Extender, PassesPodsThatAskNoGpumuxResourceEverywhere) {
  Extender extender({}, nullptr);
  json pod = Pod("u1", 1);
  pod["spec"]["containers"][0]["resources"] = {{"limits", {{"cpu", "1"}}}};
  // Names are kube-scheduler's, so written back as JSON whatever they hold.
  json names = {"a", "b\"\n\\<\u00e9"};
  json result = FilterJson(extender, {{"Pod", pod}, {"NodeNames", names}});
  EXPECT_EQ(result["NodeNames"], names);
  service::HttpResponse scores =
      extender.Handle({"POST", "/prioritize", json{{"Pod", pod}, {"NodeNames", names}}.dump()});
  EXPECT_EQ(json::parse(scores.body)[1]["Host"], names[1]) << scores.body;
}

TEST(Extender, ScoresNodesAsTheFleetPolicyDoes) {
  // Two nodes of two 80 GiB GPUs; node "used" already holds a 40 GiB pod on GPU 0. Recent pods
  // took whole GPUs, so a 40 GiB pod is best put in the half of "used" that no whole-GPU pod can
  // use, not on "empty", where it would spoil a whole GPU.
  NodeGpus used = Gpus({80, 80}), empty = Gpus({80, 80});
  used.slots()[0].Count(ParsePod(Pod("r", 40)), +1);
  PodRequest pod = ParsePod(Pod("u2", 40));
  std::vector<int> recent = {1000, 1000, 1000};
  auto choices = ChooseSlots({&empty, &used}, pod, "gpumux", recent);
  // The same question put to the fleet policy directly, on the fleet model of the two nodes.
  fleet::Cluster cluster(
      {{"empty", 1ll << 40, 1ll << 40, 2, "gpumux"}, {"used", 1ll << 40, 1ll << 40, 2, "gpumux"}});
  cluster.Place(1, {0, 0, 1, 500}, 0);
  std::vector<fleet::PodSpec> pods = {{"", 0, 0, 1, 1000, {}},
                                      {"", 0, 0, 1, 1000, {}},
                                      {"", 0, 0, 1, 1000, {}},
                                      {"", 0, 0, 1, 500, {}}};
  auto targets = fleet::TargetWorkloads::FromPods(cluster, pods);
  auto policy = fleet::MakePolicy("gpumux", targets);
  fleet::Shape shape{0, 0, 1, 500};
  fleet::NodeScore on_empty = policy->Score(cluster, 0, shape);
  fleet::NodeScore on_used = policy->Score(cluster, 1, shape);
  ASSERT_GT(on_used.score, on_empty.score) << "the policy keeps whole GPUs whole";
  EXPECT_EQ(choices[1].score, 10);  // the best node
  EXPECT_EQ(choices[0].score, 0);   // the worst
  EXPECT_EQ(choices[1].slot, on_used.gpu);
  EXPECT_EQ(choices[1].slot, 0);  // the half-used GPU
}

// `count` nodes of 1-8 GPUs of 40 or 80 GiB, every seventh with a 10 GiB MIG instance too, each
// slot holding up to three pods of 1-30 GiB where they fit.
std::vector<NodeGpus> RandomNodes(int count, std::mt19937& rng) {
  std::vector<NodeGpus> nodes;
  for (int n = 0; n < count; ++n) {
    std::vector<Slot> slots;
    int gpus = 1 + int(rng() % 8), memory = n % 3 ? 80 : 40;
    for (int g = 0; g < gpus; ++g) slots.push_back({{g, -1}, memory});
    if (n % 7 == 0) slots.push_back({{gpus, 0}, 10});
    for (Slot& s : slots) {
      for (int p = int(rng() % 4); p > 0; --p) {
        PodRequest r = ParsePod(Pod("u", 1 + int(rng() % 30)));
        if (s.Fits(r)) s.Count(r, +1);
      }
    }
    nodes.emplace_back(slots);
  }
  return nodes;
}

TEST(Extender, ScoringInRangesOnSeveralThreadsAnswersAsOneThreadDoes) {
  // 3,000 nodes of 40 and 80 GiB GPUs, some with MIG instances, used at random; each policy.
  std::mt19937 rng(3);
  std::vector<NodeGpus> nodes = RandomNodes(3000, rng);
  std::vector<const NodeGpus*> candidates;
  for (const NodeGpus& n : nodes) candidates.push_back(&n);
  std::vector<int> recent;
  for (int i = 0; i < 500; ++i) recent.push_back(12 + int(rng() % 400));
  PodRequest pod = ParsePod(Pod("new", 9));
  for (const std::string& policy : fleet::PolicyNames()) {
    auto one = ChooseSlots(candidates, pod, policy, recent, 1);
    auto three = ChooseSlots(candidates, pod, policy, recent, 3);
    int scored = 0;
    for (size_t i = 0; i < candidates.size(); ++i) {
      ASSERT_EQ(one[i].fits, three[i].fits) << policy << " node " << i;
      ASSERT_EQ(one[i].slot, three[i].slot) << policy << " node " << i;
      ASSERT_EQ(one[i].score, three[i].score) << policy << " node " << i;
      ASSERT_EQ(one[i].why_not, three[i].why_not) << policy << " node " << i;
      scored += one[i].fits && one[i].score > 0 && one[i].score < 10;
    }
    if (policy == "gpumux" || policy == "fgd") {  // (others score by few distinct values)
      EXPECT_GT(scored, 100) << policy << ": the scores spread between the ends";
    }
  }
}

TEST(Extender, KeptScoresAnswerAsScoringEveryNodeAnewDoes) {
  // 2,600 nodes of 40 and 80 GiB GPUs, some with MIG instances, used at random; pods of five
  // shapes asked in turn (more than a memo keeps), nodes changing between them; the target set
  // once, then staged (taken in over several calls, a slice of 1,024 nodes at each).
  std::mt19937 rng(5);
  std::vector<NodeGpus> nodes = RandomNodes(2600, rng);
  std::vector<const NodeGpus*> candidates;
  for (const NodeGpus& n : nodes) candidates.push_back(&n);
  std::vector<int> first;
  for (int i = 0; i < 300; ++i) first.push_back(12 + int(rng() % 400));
  const std::vector<int> second(first.begin() + 100, first.end());
  const std::vector<int> third(first.begin(), first.begin() + 150);
  auto same = [&](const std::vector<NodeChoice>& a, const std::vector<NodeChoice>& b) {
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i].fits != b[i].fits || a[i].slot != b[i].slot || a[i].score != b[i].score ||
          a[i].why_not != b[i].why_not)
        return false;
    return true;
  };
  for (const std::string policy : {"gpumux", "fgd"}) {
    NodeScorer scorer(policy);
    scorer.SetTarget(first);
    std::vector<NodeScoreMemo> memos(nodes.size());
    std::vector<NodeScoreMemo*> memo_of;
    for (NodeScoreMemo& m : memos) memo_of.push_back(&m);
    const std::vector<int>* target = &first;
    int staged_at = -1;
    for (int round = 0; round < 34; ++round) {
      if (round == 10) scorer.SetTarget(*(target = &second));  // at once
      if (round == 20) scorer.StageTarget(third), staged_at = round;
      PodRequest pod = ParsePod(Pod("u" + std::to_string(round), 2 + 3 * (round % 5)));
      auto kept = scorer.Choose(candidates, pod, &memo_of);
      // As bind asks about the one node it places on: that call takes no slice in.
      std::vector<NodeScoreMemo*> first_memo = {memo_of[0]};
      scorer.Choose({candidates[0]}, pod, &first_memo, /*take_in_staged=*/false);
      if (staged_at >= 0 && same(kept, ChooseSlots(candidates, pod, policy, third))) {
        target = &third;  // taken in: every later answer is against it
        staged_at = -1;
      }
      ASSERT_TRUE(same(kept, ChooseSlots(candidates, pod, policy, *target)))
          << policy << " round " << round;
      ASSERT_FALSE(staged_at >= 0 && round >= 20 + 9) << policy << ": staged for 9 calls";
      // More than kNodesPerSlice nodes: two slices at least, whatever one-node calls come between.
      if (round >= 20 && round <= 21)
        EXPECT_EQ(target, &second) << "round " << round << " answers as before";
      int scored = 0;
      for (const NodeChoice& c : kept) scored += c.fits && c.score > 0 && c.score < 10;
      EXPECT_GT(scored, 100) << policy << " round " << round << ": scores spread between the ends";
      // A few nodes take a pod where it fits; their memos are forgotten, as the extender does
      // whenever a node's use changes.
      for (int change = 0; change < 40; ++change) {
        size_t n = rng() % nodes.size();
        PodRequest placed = ParsePod(Pod("p", 1 + int(rng() % 12)));
        for (Slot& slot : nodes[n].slots()) {
          if (!slot.Fits(placed)) continue;
          slot.Count(placed, +1);
          memos[n].Forget();
          break;
        }
      }
    }
    EXPECT_EQ(target, &third) << policy << ": the staged target was taken in";
  }
}

// The extender keeps each node's scores between calls: a pod placed on a node (its watch event)
// changes that node's score at the next call, and a filter with full Nodes sending the node's slots
// again leaves it as it is.
TEST(Extender, APlacementSeenChangesTheNodesScoreAtTheNextCall) {
  Extender extender({}, nullptr);
  extender.SetNode("a", Gpus({80, 80}));
  extender.SetNode("b", Gpus({80, 80}));
  extender.SetNode("c", Gpus(std::vector<int>(8, 80)));
  auto place = [&](const std::string& uid, const std::string& node, int gpu, int memory_gib) {
    json pod = Pod(uid, memory_gib);
    pod["metadata"]["annotations"] = {{kAssignedAnnotation, std::to_string(gpu)}};
    pod["spec"]["nodeName"] = node;
    pod["status"] = {{"phase", "Running"}};
    extender.OnPod(pod);
  };
  // Eight pods that took whole GPUs make the target workload (a ninth change would not take it
  // again: a quarter of eight is two); a 40 GiB pod is then best put beside another, not on an
  // empty GPU that a whole-GPU pod could use.
  for (int i = 0; i < 8; ++i)
    place("c0c0c0c0-0000-4000-8000-00000000000" + std::to_string(i), "c", i, 80);
  json pod = Pod("d0d0d0d0-0000-4000-8000-000000000001", 40);
  json args = {{"Pod", pod}, {"NodeNames", {"a", "b"}}};
  auto scores = [&] {
    std::vector<int64_t> out;
    for (const HostPriority& p : extender.Prioritize(ExtenderArgs::Parse(args.dump())))
      out.push_back(p.score);
    return out;
  };
  EXPECT_EQ(scores(), (std::vector<int64_t>{10, 10})) << "two empty nodes score alike";
  place("d0d0d0d0-0000-4000-8000-000000000002", "a", 0, 40);  // half of a's GPU 0
  std::vector<int64_t> after = scores();
  EXPECT_EQ(after, (std::vector<int64_t>{10, 0}))
      << "a's use changed; its kept score must not answer";
  // The same node sent again in full (as kube-scheduler does without nodeCacheCapable) answers
  // the same.
  extender.SetNode("a", Gpus({80, 80}));
  EXPECT_EQ(scores(), after);
  EXPECT_EQ(extender.NodeState("a").slots()[0].used_memory_gib, 40);
}

// Filter and prioritize find the nodes the last call named without looking them up again; a node
// learnt or gone since is seen at the next call.
TEST(Extender, ANodeLearntOrGoneIsSeenAtTheNextCallNamingTheSameNodes) {
  Extender extender({}, nullptr);
  extender.SetNode("a", Gpus({80}));
  json args = {{"Pod", Pod("e0e0e0e0-0000-4000-8000-000000000001", 10)}, {"NodeNames", {"a", "z"}}};
  EXPECT_EQ(FilterJson(extender, args)["NodeNames"], json({"a"}));
  extender.SetNode("z", Gpus({80}));
  EXPECT_EQ(FilterJson(extender, args)["NodeNames"], json({"a", "z"}));
  extender.OnNodeGone({{"metadata", {{"name", "a"}}}});
  json filtered = FilterJson(extender, args);
  EXPECT_EQ(filtered["NodeNames"], json({"z"}));
  EXPECT_NE(filtered["FailedNodes"]["a"].get<std::string>().find("no gpumux GPU"),
            std::string::npos)
      << filtered;
  std::vector<HostPriority> scores = extender.Prioritize(ExtenderArgs::Parse(args.dump()));
  ASSERT_EQ(scores.size(), 2u);
  EXPECT_EQ(scores[0].score, 0) << "a is gone";
  EXPECT_EQ(scores[1].score, 10);
}

TEST(Extender, PrioritizeAnswersAHostPriorityListInKubeSchedulersRange) {
  Extender extender({}, nullptr);
  NodeGpus used = Gpus({80, 80});
  used.slots()[0].Count(ParsePod(Pod("r", 40)), +1);
  extender.SetNode("used", used);
  extender.SetNode("empty", Gpus({80, 80}));
  extender.SetNode("full", Gpus({10}));
  json args = {{"Pod", Pod("u", 60)}, {"NodeNames", {"empty", "used", "full"}}};
  service::HttpResponse answer = extender.Handle({"POST", "/scheduler/prioritize", args.dump()});
  ASSERT_EQ(answer.status, 200) << answer.body;
  json scores = json::parse(answer.body);
  ASSERT_EQ(scores.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(scores[i]["Host"], json({"empty", "used", "full"})[i]);
    EXPECT_TRUE(scores[i]["Score"].is_number_integer());
    EXPECT_GE(scores[i]["Score"].get<int>(), 0);
    EXPECT_LE(scores[i]["Score"].get<int>(), 10);
  }
  EXPECT_EQ(scores[2]["Score"], 0);  // it does not fit there
}

TEST(Extender, RefusesAnUnknownPolicyAtStart) {
  EXPECT_THROW(Extender({"nosuch"}, nullptr), Error);
}

// kube-scheduler reads the body of a 200 only: a refusal is a 200 whose fields say why.
TEST(Extender, AMalformedBodyIsRefusedInTheAnswersFieldsWithTheReason) {
  Extender extender({}, nullptr);
  service::HttpRequest r{"POST", "/scheduler/filter", "{\"Pod\": 3, \"NodeNames\": [\"a\"]}"};
  service::HttpResponse answer = extender.Handle(r);
  EXPECT_EQ(answer.status, 200);
  json filter = json::parse(answer.body);
  EXPECT_NE(filter["FailedAndUnresolvableNodes"]["a"].get<std::string>().find("expected a v1.Pod"),
            std::string::npos)
      << answer.body;
  EXPECT_TRUE(filter["NodeNames"].empty()) << "no node passes";
  answer = extender.Handle({"POST", "/scheduler/filter", "not json"});
  EXPECT_EQ(answer.status, 200);
  EXPECT_NE(json::parse(answer.body)["Error"].get<std::string>().find("not JSON"),
            std::string::npos)
      << answer.body;
  answer = extender.Handle({"POST", "/scheduler/bind", "{\"PodName\": 3}"});
  EXPECT_EQ(answer.status, 200);
  EXPECT_NE(json::parse(answer.body)["Error"].get<std::string>().find("PodName"), std::string::npos)
      << answer.body;
  answer = extender.Handle({"POST", "/scheduler/prioritize", "[]"});
  EXPECT_EQ(answer.status, 200);
  EXPECT_EQ(answer.body, "[]") << "no scores";
  EXPECT_EQ(extender.Handle({"POST", "/x/nosuch", "{}"}).status, 404);
  EXPECT_EQ(extender.Handle({"GET", "/healthz", ""}).status, 200);
}

TEST(PodRequest, ReadsEachContainersUnitsUserAndPriority) {
  PodRequest p = ParsePod(Fixture("extender_args_nodes.json")["Pod"]);
  EXPECT_EQ(p.ns, "inference");
  EXPECT_EQ(p.priority, "high");
  ASSERT_EQ(p.containers.size(), 1u);
  EXPECT_EQ(p.containers[0].memory_gib, 28);
  EXPECT_EQ(p.containers[0].run_as_user, 1000);  // from the pod's securityContext
  PodRequest q = ParsePod(Fixture("extender_args_node_names.json")["Pod"]);
  ASSERT_EQ(q.containers.size(), 1u);  // the init container and the sidecar ask nothing
  EXPECT_EQ(q.containers[0].index, 1);
  EXPECT_EQ(q.containers[0].compute_percent, 25);
  EXPECT_EQ(q.containers[0].run_as_user, -1);
  EXPECT_EQ(q.priority, "low");
  // The priority names are gpumuxd's (node::ParsePriority): "best-effort" is low there and here.
  json pod = Pod("b", 1);
  pod["metadata"]["annotations"] = {{kPriorityAnnotation, "best-effort"}};
  EXPECT_EQ(ParsePod(pod).priority, "low");
  pod["metadata"]["annotations"] = {{kPriorityAnnotation, "urgent"}};
  try {
    ParsePod(pod);
    ADD_FAILURE() << "an unknown priority was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gpumux.io/priority"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("urgent"), std::string::npos) << e.what();
  }
}

// A pod of several GPUs: its shares spread evenly over them (per GPU: what the extender fits on
// each), or whole GPUs; placed on that many time-sliced whole GPUs of one node, best fit.
TEST(PodRequest, APodOfSeveralGpusAsksItsShareOfEach) {
  json pod = Pod("u", 40, 60);
  pod["metadata"]["annotations"] = {{kGpuCountAnnotation, "2"}, {kAssignedAnnotation, "2,3"}};
  PodRequest p = ParsePod(pod);
  EXPECT_EQ(p.gpu_count, 2);
  EXPECT_EQ(p.memory_gib_per_gpu(), 20);
  EXPECT_EQ(p.compute_percent_per_gpu(), 30);
  ASSERT_EQ(p.assigned.size(), 2u);
  EXPECT_EQ(p.assigned[1], (SlotId{3, -1}));
  EXPECT_EQ(SlotId::ListToString(p.assigned), "2,3");
  json whole = Pod("w", 0);
  whole["spec"]["containers"][0]["resources"]["limits"] = {{kGpuResource, "4"}};
  EXPECT_EQ(ParsePod(whole).gpu_count, 4);
  EXPECT_TRUE(ParsePod(whole).whole_gpu());

  // Node: GPU 0 has 10 GiB free, GPU 1 30, GPU 2 70 (empty), GPU 3 an MPS GPU, GPU 4 MIG.
  std::vector<Slot> slots(5);
  for (int i = 0; i < 5; ++i) slots[size_t(i)].id = {i, -1}, slots[size_t(i)].memory_gib = 80;
  slots[0].used_memory_gib = 70;
  slots[1].used_memory_gib = 50;
  slots[2].used_memory_gib = 10;
  slots[3].mps = true;
  slots[4].id = {4, 0};
  slots[4].memory_gib = 40;
  NodeGpus node(slots);
  p.assigned.clear();
  EXPECT_TRUE(node.Fits(p));
  EXPECT_EQ(node.SlotsForPodOfSeveralGpus(p), (std::vector<int>{1, 2})) << "the fullest that fit";
  std::string why;
  EXPECT_EQ(node.FittingSlots(p, &why).size(), 2u);
  std::vector<NodeChoice> choice = ChooseSlots({&node}, p, "gpumux", {});
  ASSERT_TRUE(choice[0].fits);
  EXPECT_EQ(choice[0].slot, 1);
  EXPECT_EQ(choice[0].more_slots, std::vector<int>{2});
  // Three GPUs of 20 GiB each: only two hold it, and the node says why not.
  json three = Pod("t", 60);
  three["metadata"]["annotations"] = {{kGpuCountAnnotation, "3"}};
  PodRequest q = ParsePod(three);
  EXPECT_FALSE(node.Fits(q));
  EXPECT_TRUE(node.SlotsForPodOfSeveralGpus(q).empty());
  node.FittingSlots(q, &why);
  EXPECT_NE(why.find("the pod needs 3 GPUs, 2 fit"), std::string::npos) << why;
  EXPECT_NE(why.find("GPU 3: shared by MPS"), std::string::npos) << why;
  EXPECT_NE(why.find("GPU 4.0: a MIG instance"), std::string::npos) << why;
  choice = ChooseSlots({&node}, q, "gpumux", {});
  EXPECT_FALSE(choice[0].fits);
  EXPECT_EQ(choice[0].why_not, why);
  // Counted in, each of its GPUs holds its share.
  node.slots()[1].Count(p, +1);
  node.slots()[2].Count(p, +1);
  EXPECT_EQ(node.slots()[1].used_memory_gib, 70);
  EXPECT_EQ(node.slots()[2].used_memory_gib, 30);
  EXPECT_EQ(node.slots()[2].used_compute_percent, 30);
  // The MPS mode travels in the node's annotation.
  json annotated = {
      {"metadata", {{"name", "n"}, {"annotations", {{kNodeGpusAnnotation, node.Annotation()}}}}}};
  EXPECT_TRUE(NodeGpus::FromNode(annotated).slots()[3].mps);
  EXPECT_FALSE(NodeGpus::FromNode(annotated).slots()[2].mps);
}

TEST(PodRequest, RefusesWhatGpumuxCannotHonourNamingTheField) {
  auto refused = [](json pod, const std::string& expected) {
    try {
      ParsePod(pod);
      ADD_FAILURE() << "accepted " << pod;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  json pod = Pod("u", 2);
  json fractional = pod;
  fractional["spec"]["containers"][0]["resources"]["limits"][kMemoryResource] = "1.5";
  refused(fractional, "expected a whole number of units");
  json compute_only = pod;
  compute_only["spec"]["containers"][0]["resources"]["limits"] = {{kComputeResource, "10"}};
  refused(compute_only, "without gpumux.io/gpu-memory");
  json too_much = Pod("u", 2, 120);
  refused(too_much, "at most 100");
  json nine_gpus = pod;
  nine_gpus["spec"]["containers"][0]["resources"]["limits"] = {{kGpuResource, "9"}};
  refused(nine_gpus, "at most 8 GPUs per pod");
  json two_whole = pod;
  two_whole["spec"]["containers"][0]["resources"]["limits"] = {{kGpuResource, "1"}};
  two_whole["spec"]["containers"].push_back(two_whole["spec"]["containers"][0]);
  refused(two_whole, "one container takes the pod's whole GPUs");
  json uneven = Pod("u", 5);
  uneven["metadata"]["annotations"] = {{kGpuCountAnnotation, "2"}};
  refused(uneven, "do not divide evenly over the pod's 2 GPUs");
  json count_zero = pod;
  count_zero["metadata"]["annotations"] = {{kGpuCountAnnotation, "0"}};
  refused(count_zero, "expected 1 to 8 GPUs");
  json count_differs = pod;
  count_differs["spec"]["containers"][0]["resources"]["limits"] = {{kGpuResource, "2"}};
  count_differs["metadata"]["annotations"] = {{kGpuCountAnnotation, "4"}};
  refused(count_differs, "says 4 GPUs, its container asks 2");
  json assigned_one = Pod("u", 4);
  assigned_one["metadata"]["annotations"] = {{kGpuCountAnnotation, "2"},
                                             {kAssignedAnnotation, "1"}};
  refused(assigned_one, "names 1 GPU(s), the pod asks 2");
  json assigned_mig = assigned_one;
  assigned_mig["metadata"]["annotations"][kAssignedAnnotation] = "1.0,2.0";
  refused(assigned_mig, "a pod of several GPUs takes whole GPUs");
  json assigned_twice = assigned_one;
  assigned_twice["metadata"]["annotations"][kAssignedAnnotation] = "1,1";
  refused(assigned_twice, "named twice");
  json both = pod;
  both["spec"]["containers"][0]["resources"]["limits"][kGpuResource] = "1";
  refused(both, "ask one or the other");
  json priority = pod;
  priority["metadata"]["annotations"] = {{kPriorityAnnotation, "urgent"}};
  refused(priority, "expected high, normal or low");
  json assigned = pod;
  assigned["metadata"]["annotations"] = {{kAssignedAnnotation, "gpu0"}};
  refused(assigned, "gpumux.io/assigned");
  refused(json::array(), "expected a v1.Pod");
  // What gpumuxd would refuse at Allocate is refused here, so the extender never binds it.
  json high_capped = Pod("u", 2, 30);
  high_capped["metadata"]["annotations"] = {{kPriorityAnnotation, "high"}};
  refused(high_capped, "a high-priority tenant's launches never wait");
  // 2,201 containers of 999,999 GiB: more than an int holds in all, and more than any GPU.
  json huge = Pod("u", 999999);
  json container = huge["spec"]["containers"][0];
  for (int i = 1; i < 2201; ++i) huge["spec"]["containers"].push_back(container);
  refused(huge, "on a GPU, more than any GPU holds");
  json split = Pod("u", 2, 60);
  split["spec"]["containers"].push_back(split["spec"]["containers"][0]);
  refused(split, "120 gpumux.io/gpu-compute of a GPU in all");
}

TEST(Extender, APodTheNodeWouldRefuseIsRefusedAtFilterWithTheReason) {
  Extender extender({}, nullptr);
  json args = Fixture("extender_args_nodes.json");
  args["Pod"]["metadata"]["annotations"] = {{kPriorityAnnotation, "high"}};
  for (json& c : args["Pod"]["spec"]["containers"])
    c["resources"]["limits"][kComputeResource] = "20";
  service::HttpRequest request;
  request.method = "POST";
  request.path = "/gpumux/filter";
  request.body = args.dump();
  service::HttpResponse answer = extender.Handle(request);
  ASSERT_EQ(answer.status, 200) << "kube-scheduler reads no other answer's body";
  json result = json::parse(answer.body);
  ASSERT_FALSE(result["FailedAndUnresolvableNodes"].empty())
      << "no node can ever take it: " << answer.body;
  for (auto& [node, why] : result["FailedAndUnresolvableNodes"].items())
    EXPECT_NE(why.get<std::string>().find("high-priority"), std::string::npos)
        << node << ": " << why;
  EXPECT_TRUE(result["Nodes"]["items"].empty()) << answer.body;
  EXPECT_TRUE(result["FailedNodes"].empty()) << "not a lack of room that may pass";
}

// Issue 40: a node first seen without its gpumux.io/gpus annotation and annotated later counts the
// pods already bound to it (before, it showed 80 GiB free with 30 GiB placed); and a node whose
// GPUs change keeps counting what is placed on those that remain.
TEST(Extender, ANodeAnnotatedAfterPodsWereBoundToItCountsThem) {
  Extender extender({}, nullptr);
  json node = {{"metadata", {{"name", "late"}, {"annotations", json::object()}}}};
  extender.OnNode(node);
  json pod = Pod("b0b0b0b0-0000-4000-8000-000000000001", 30);
  pod["metadata"]["annotations"] = {{kAssignedAnnotation, "0"}};
  pod["spec"]["nodeName"] = "late";
  pod["status"] = {{"phase", "Running"}};
  extender.OnPod(pod);
  node["metadata"]["annotations"][kNodeGpusAnnotation] = Gpus({80}).Annotation();
  extender.OnNode(node);
  ASSERT_EQ(extender.NodeState("late").slots().size(), 1u);
  EXPECT_EQ(extender.NodeState("late").slots()[0].used_memory_gib, 30) << "the bound pod counts";
  extender.OnNode(node);  // the same annotation again (a status update): counted once
  EXPECT_EQ(extender.NodeState("late").slots()[0].used_memory_gib, 30);
  node["metadata"]["annotations"][kNodeGpusAnnotation] = Gpus({80, 80}).Annotation();
  extender.OnNode(node);  // a second GPU appears
  EXPECT_EQ(extender.NodeState("late").slots()[0].used_memory_gib, 30);
  EXPECT_EQ(extender.NodeState("late").slots()[1].used_memory_gib, 0);
}

// Nodes where only MIG instances (not made on demand) fit the pod are scored by best fit: the
// fuller the instance after it, the higher.
TEST(Extender, NodesWhereOnlyMigInstancesFitAreScoredByBestFit) {
  NodeGpus roomy({Slot{{0, 0}, 10}}), fuller({Slot{{0, 0}, 10}}), full_gpu({Slot{{0, -1}, 80}});
  fuller.slots()[0].used_memory_gib = 6;
  full_gpu.slots()[0].held_whole = true;
  PodRequest pod = ParsePod(Pod("u", 2));
  std::vector<NodeChoice> c = ChooseSlots({&roomy, &fuller, &full_gpu}, pod, "gpumux", {});
  ASSERT_TRUE(c[0].fits && c[1].fits);
  EXPECT_FALSE(c[2].fits);
  EXPECT_DOUBLE_EQ(c[0].score, 10 * 2.0 / 10);
  EXPECT_DOUBLE_EQ(c[1].score, 10 * 8.0 / 10);
  EXPECT_EQ(c[1].slot, 0);
}

// A pod asking a MIG profile as kube-scheduler sends it, placed (annotations) on `node` or not.
json MigPodJson(const std::string& uid, const std::string& profile, const std::string& node = "",
                const std::string& placement = "") {
  json pod = {{"metadata", {{"name", "p-" + uid}, {"namespace", "default"}, {"uid", uid}}},
              {"spec",
               {{"containers",
                 {{{"name", "c"}, {"resources", {{"limits", {{MigResource(profile), "1"}}}}}}}}}},
              {"status", {{"phase", "Running"}}}};
  if (!node.empty()) {
    pod["spec"]["nodeName"] = node;
    pod["metadata"]["annotations"] = {{kAssignedAnnotation, "0"},
                                      {kMigPlacementAnnotation, placement}};
  }
  return pod;
}

TEST(PodRequest, AMigProfileIsOneInstanceAskedAloneOnOneGpu) {
  EXPECT_EQ(MigProfileOf("gpumux.io/mig-1g.10gb"), "1g.10gb");
  EXPECT_EQ(MigProfileOf("gpumux.io/mig-1g.12gb+me"), "1g.12gb+me");
  for (const char* no :
       {"gpumux.io/mig-big", "gpumux.io/mig-1g.10", "gpumux.io/mig-g.10gb",
        "gpumux.io/mig-1g.10gb+x", "gpumux.io/gpu-memory", "nvidia.com/mig-1g.10gb"})
    EXPECT_EQ(MigProfileOf(no), "") << no;
  PodRequest p = ParsePod(MigPodJson("m", "1g.10gb", "node-a", "1g.10gb@6"));
  EXPECT_TRUE(p.asks_gpumux());
  EXPECT_EQ(p.mig_profile, "1g.10gb");
  EXPECT_EQ(p.mig_start, 6);
  EXPECT_EQ(p.assigned, (std::vector<SlotId>{SlotId{0, -1}}));
  ASSERT_EQ(p.containers.size(), 1u);
  EXPECT_EQ(p.containers[0].mig_profile, "1g.10gb");
  EXPECT_EQ(p.memory_gib_per_gpu(), 0);

  auto refused = [](json pod, const std::string& expected) {
    try {
      ParsePod(pod);
      ADD_FAILURE() << "accepted " << pod;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadInput);
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  json pod = MigPodJson("m", "1g.10gb");
  json two = pod;
  two["spec"]["containers"][0]["resources"]["limits"]["gpumux.io/mig-1g.10gb"] = "2";
  refused(two, "one MIG instance per container, asked 2");
  json bad_name = pod;
  bad_name["spec"]["containers"][0]["resources"]["limits"] = {{"gpumux.io/mig-large", "1"}};
  refused(bad_name, "not a MIG profile gpumux knows the form of");
  json two_profiles = pod;
  two_profiles["spec"]["containers"][0]["resources"]["limits"]["gpumux.io/mig-2g.20gb"] = "1";
  refused(two_profiles, "one MIG instance per container");
  json with_memory = pod;
  with_memory["spec"]["containers"][0]["resources"]["limits"][kMemoryResource] = "4";
  refused(with_memory, "a MIG instance made for it is all it takes");
  json beside_share = pod;
  beside_share["spec"]["containers"].push_back(Pod("x", 4)["spec"]["containers"][0]);
  refused(beside_share, "ask one or the other");
  json two_containers = pod;
  two_containers["spec"]["containers"].push_back(pod["spec"]["containers"][0]);
  refused(two_containers, "a second container asks a MIG instance");
  json spread = pod;
  spread["metadata"]["annotations"] = {{kGpuCountAnnotation, "2"}};
  refused(spread, "a MIG instance is on one GPU");
  json on_instance = MigPodJson("m", "1g.10gb", "node-a", "1g.10gb@6");
  on_instance["metadata"]["annotations"][kAssignedAnnotation] = "0.1";
  refused(on_instance, "is assigned the GPU its instance is made on");
  json other_profile = MigPodJson("m", "1g.10gb", "node-a", "2g.20gb@0");
  refused(other_profile, "expected 1g.10gb@START, got '2g.20gb@0'");
  json no_start = MigPodJson("m", "1g.10gb", "node-a", "1g.10gb@");
  refused(no_start, "expected 1g.10gb@START");
}

// Pods asking a MIG profile go to the node whose GPU the placement rules out least on, and, once
// placed, count there until gone: a node with no placement of the profile left is filtered out,
// saying why.
TEST(Extender, PlacesMigPodsWhereTheyRuleOutLeastAndCountsThemUntilGone) {
  Extender extender({}, nullptr);
  MigRoom partly = H100Room(0);
  partly.held = 0x0f;  // a busy 3g.40gb@0
  auto node = [](const std::string& name, const MigRoom& room) {
    return json{{"metadata",
                 {{"name", name},
                  {"annotations",
                   {{kMigRoomsAnnotation, NodeGpus({}, {room}).MigRoomsAnnotation()},
                    {kNodeGpusAnnotation, "[]"}}}}}};
  };
  extender.OnNode(node("empty", H100Room(0)));
  extender.OnNode(node("partly", partly));
  json args = {{"Pod", MigPodJson("a", "1g.10gb")}, {"NodeNames", {"empty", "partly"}}};
  std::vector<HostPriority> scores = extender.Prioritize(ExtenderArgs::Parse(args.dump()));
  ASSERT_EQ(scores.size(), 2u);
  EXPECT_GT(scores[1].score, scores[0].score) << "beside the busy instance, not on the empty GPU";
  // Three 1g.10gb pods placed on "partly" take its free slices 4 to 6.
  for (int start : {4, 5, 6})
    extender.OnPod(MigPodJson("p" + std::to_string(start), "1g.10gb", "partly",
                              "1g.10gb@" + std::to_string(start)));
  EXPECT_EQ(extender.NodeState("partly").mig_rooms()[0].Taken(), 0x7fu);
  json result = FilterJson(extender, args);
  EXPECT_EQ(result["NodeNames"], json({"empty"}));
  std::string why = result["FailedNodes"]["partly"];
  EXPECT_EQ(why, "gpumux: GPU 0: no 1g.10gb placement left beside the instances there");
  // A new annotation from the plugin (the made instances now held) keeps the count.
  partly.held = 0x7f;
  extender.OnNode(node("partly", partly));
  EXPECT_EQ(extender.NodeState("partly").mig_rooms()[0].Taken(), 0x7fu);
  extender.OnPodGone(MigPodJson("p6", "1g.10gb", "partly", "1g.10gb@6"));
  partly.held = 0x3f;
  extender.OnNode(node("partly", partly));
  EXPECT_EQ(extender.NodeState("partly").mig_rooms()[0].Taken(), 0x3fu);
  EXPECT_EQ(FilterJson(extender, args)["NodeNames"], json({"empty", "partly"}));
  // They are not shares of a whole GPU: the fleet model's target workload has none of them.
  args["Pod"] = Pod("s", 4);
  EXPECT_EQ(FilterJson(extender, args)["NodeNames"], json::array()) << "a share fits no MIG room";
}

TEST(Extender, WhatFiltersTeachItOfNodesIsBounded) {
  ExtenderConfig config;
  config.max_nodes = 100;
  Extender extender(config, nullptr);
  json args = Fixture("extender_args_nodes.json");
  json node = args["Nodes"]["items"][0];
  for (int batch = 0; batch < 10; ++batch) {
    args["Nodes"]["items"] = json::array();
    for (int i = 0; i < 100; ++i) {
      node["metadata"]["name"] = "n-" + std::to_string(batch) + "-" + std::to_string(i);
      args["Nodes"]["items"].push_back(node);
    }
    extender.Filter(ExtenderArgs::Parse(args.dump()));
  }
  EXPECT_EQ(extender.node_count(), 100u) << "1,000 distinct names, 100 kept";
  EXPECT_FALSE(extender.NodeState("n-0-5").slots().empty()) << "the first learnt are kept";
  EXPECT_TRUE(extender.NodeState("n-9-5").slots().empty()) << "past the bound none is learnt";
}

}  // namespace
}  // namespace gpumux::k8s
