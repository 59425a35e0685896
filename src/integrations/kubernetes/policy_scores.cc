#include "integrations/kubernetes/policy_scores.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <thread>

#include "base/error.h"
#include "fleet/cluster.h"
#include "fleet/fragmentation.h"
#include "fleet/policy.h"

namespace gpumux::k8s {

namespace {

// The milli-GPU a slot's present use takes.
int UsedMilli(const Slot& s) {
  if (s.held_whole) return fleet::kMilli;
  double memory = s.memory_gib > 0 ? double(s.used_memory_gib) / s.memory_gib : 1.0;
  double compute = s.used_compute_percent / 100.0;
  return std::min(fleet::kMilli, int(std::ceil(std::max(memory, compute) * fleet::kMilli)));
}

// A node's whole GPUs (not MIG instances) as the fleet model sees them: their slot indices in the
// order the Cluster numbers them, GPUs held whole first (Cluster::Place gives whole-GPU pods the
// lowest free ones).
struct FleetGpus {
  std::array<int, fleet::kMaxGpusPerNode> slot;
  int count = 0;
  const int* begin() const { return slot.data(); }
  const int* end() const { return slot.data() + count; }
};

FleetGpus FleetGpusOf(const NodeGpus& node) {
  FleetGpus gpus;
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < node.slots().size(); ++i) {
      const Slot& s = node.slots()[i];
      if (!s.is_mig() && s.held_whole == (pass == 0) && gpus.count < fleet::kMaxGpusPerNode)
        gpus.slot[size_t(gpus.count++)] = int(i);
    }
  }
  return gpus;
}

}  // namespace

size_t DefaultScoringThreads() {
  return std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 4);
}

int PodMilli(const PodRequest& pod, int slot_memory_gib) {
  if (pod.whole_gpu()) return fleet::kMilli;
  double memory = slot_memory_gib > 0 ? double(pod.memory_gib_per_gpu()) / slot_memory_gib : 1.0;
  double share = std::max(memory, pod.compute_percent_per_gpu() / 100.0);
  return std::clamp(int(std::ceil(share * fleet::kMilli)), 1, fleet::kMilli);
}

namespace {

// A pod of several GPUs on `node`: best fit (the fuller the node's whole GPUs after it, the
// higher).
NodeChoice ChooseGpusOfPodOfSeveral(const NodeGpus& node, const PodRequest& pod) {
  NodeChoice c;
  std::vector<int> slots = node.SlotsForPodOfSeveralGpus(pod);
  if (slots.empty()) {
    node.FittingSlots(pod, &c.why_not);
    return c;
  }
  double used = 0, total = 0;
  for (const Slot& s : node.slots()) {
    if (s.is_mig()) continue;
    total += s.memory_gib;
    used += s.held_whole ? s.memory_gib : s.used_memory_gib;
  }
  for (int i : slots) {
    const Slot& s = node.slots()[size_t(i)];
    used += pod.whole_gpu() ? s.memory_gib : pod.memory_gib_per_gpu();
  }
  c.fits = true;
  c.slot = slots[0];
  c.more_slots.assign(slots.begin() + 1, slots.end());
  c.score = total > 0 ? 10 * std::min(1.0, used / total) : 0;
  return c;
}

// What the first pass over the candidates finds: the nodes where a whole GPU (not an instance)
// fits the pod, which the fleet model scores.
struct FleetCandidates {
  std::vector<size_t> node;                       // index into the candidates
  std::vector<int> slot_memory;                   // their first GPU's memory (GiB)
  std::vector<const NodeScoreMemo::Entry*> kept;  // their memo's answer for the pod, or null
};

// Scores the fleet candidates `todo[begin, end)` (indices into `fleet_nodes`) with `policy_name`
// on a fleet model of those nodes alone: sets each one's slot and Final score in `choices`, and its
// Score in `raw` (NaN where rounding to milli makes the model refuse what fits exactly). Every node
// is one GPU model in the fleet model, so a range's prices are those of the whole and a node's
// score depends on it alone: ranges may be scored apart, on different threads, with the same
// results, and a node's score may be kept until it changes.
void ScoreRange(const std::vector<const NodeGpus*>& nodes, const FleetCandidates& fleet_nodes,
                const std::vector<size_t>& todo, size_t begin, size_t end, const PodRequest& pod,
                std::string_view policy_name, const fleet::TargetWorkloads& targets,
                std::vector<NodeChoice>* choices, std::vector<double>* raw) {
  std::vector<FleetGpus> fleet_gpus;
  std::vector<fleet::NodeSpec> specs;
  fleet_gpus.reserve(end - begin);
  specs.reserve(end - begin);
  // CPU and memory are kube-scheduler's to check: the fleet model gets room enough for them.
  for (size_t t = begin; t < end; ++t) {
    fleet_gpus.push_back(FleetGpusOf(*nodes[fleet_nodes.node[todo[t]]]));
    specs.push_back({"", int64_t(1) << 40, int64_t(1) << 40, fleet_gpus.back().count, "gpumux"});
  }
  fleet::Cluster cluster(specs);
  for (size_t t = begin; t < end; ++t) {
    const FleetGpus& gpus = fleet_gpus[t - begin];
    for (int g = 0; g < gpus.count; ++g) {
      const Slot& s = nodes[fleet_nodes.node[todo[t]]]->slots()[size_t(gpus.slot[size_t(g)])];
      if (s.pods == 0) continue;
      int milli = UsedMilli(s);
      if (milli == fleet::kMilli && !s.held_whole) {
        // Shares that fill the GPU: as 999 + 1, sharing shapes, so they stay on GPU g.
        cluster.Place(int(t - begin), {0, 0, 1, milli - 1}, g);
        milli = 1;
      }
      cluster.Place(int(t - begin), {0, 0, 1, milli}, g);
    }
  }
  auto policy = fleet::MakePolicy(policy_name, targets);
  for (size_t t = begin; t < end; ++t) {
    const size_t f = todo[t], n = fleet_nodes.node[f];
    const int local = int(t - begin);
    fleet::Shape shape{0, 0, 1, PodMilli(pod, fleet_nodes.slot_memory[f])};
    NodeChoice& c = (*choices)[n];
    // Where rounding to milli makes the model refuse what fits exactly: scored last (0).
    bool modelled = cluster.Fits(local, shape);
    fleet::NodeScore s = modelled ? policy->Score(cluster, local, shape) : fleet::NodeScore{};
    // The policy's GPU; where its milli rounding disagrees with the exact check (or it picks
    // none, as for whole GPUs), the fitting GPU with the least memory left.
    const FleetGpus& gpus = fleet_gpus[t - begin];
    const std::vector<Slot>& slots = nodes[n]->slots();
    int slot = s.gpu >= 0 && s.gpu < gpus.count ? gpus.slot[size_t(s.gpu)] : -1;
    if (slot < 0 || !slots[size_t(slot)].Fits(pod)) {
      slot = -1;
      for (int i : gpus) {
        const Slot& candidate = slots[size_t(i)];
        if (candidate.Fits(pod) &&
            (slot < 0 || candidate.memory_gib - candidate.used_memory_gib <
                             slots[size_t(slot)].memory_gib - slots[size_t(slot)].used_memory_gib))
          slot = i;
      }
    }
    c.slot = slot;
    c.score = modelled ? policy->Final(cluster, local, shape, s) : s.score;
    (*raw)[f] = modelled ? s.score : std::nan("");
  }
}

// Scores the fleet candidates `todo` as ScoreRange does, in ranges of at least kNodesPerThread on
// up to `max_threads` threads (as kube-scheduler scores its nodes in parallel); a few hundred on
// this one. Hot path.
void ScoreInRanges(const std::vector<const NodeGpus*>& nodes, const FleetCandidates& fleet_nodes,
                   const std::vector<size_t>& todo, const PodRequest& pod,
                   std::string_view policy_name, const fleet::TargetWorkloads& targets,
                   size_t max_threads, std::vector<NodeChoice>* choices, std::vector<double>* raw) {
  constexpr size_t kNodesPerThread = 1024;
  const size_t scored = todo.size();
  if (scored == 0) return;
  size_t threads =
      std::max<size_t>(1, std::min(max_threads, (scored + kNodesPerThread - 1) / kNodesPerThread));
  std::vector<std::thread> helpers;
  for (size_t t = 1; t < threads; ++t)
    helpers.emplace_back([&, t] {
      ScoreRange(nodes, fleet_nodes, todo, scored * t / threads, scored * (t + 1) / threads, pod,
                 policy_name, targets, choices, raw);
    });
  ScoreRange(nodes, fleet_nodes, todo, 0, scored / threads, pod, policy_name, targets, choices,
             raw);
  for (std::thread& helper : helpers) helper.join();
}

// Each NodeScorer's targets are told apart from every other's (a memo names the one it was
// computed against).
std::atomic<uint64_t> last_generation{0};

// A memo's entry for the pod `asked` describes (its generation included), or null.
NodeScoreMemo::Entry* Kept(NodeScoreMemo::Entry* entries, size_t count,
                           const NodeScoreMemo::Entry& asked) {
  for (size_t i = 0; i < count; ++i) {
    const NodeScoreMemo::Entry& e = entries[i];
    if (e.generation == asked.generation && e.memory_gib == asked.memory_gib &&
        e.compute_percent == asked.compute_percent && e.whole_gpu == asked.whole_gpu)
      return &entries[i];
  }
  return nullptr;
}

}  // namespace

const fleet::TargetWorkloads& NodeScorer::Target::With(int pod_milli) {
  std::unique_ptr<fleet::TargetWorkloads>& built = workloads[pod_milli];
  if (!built) {
    std::vector<fleet::PodSpec> pods;
    pods.reserve(recent_milli.size() + 1);
    for (int m : recent_milli) pods.push_back({"", 0, 0, 1, m, {}});
    pods.push_back({"", 0, 0, 1, pod_milli, {}});
    // Every node is one GPU model, "gpumux", in the fleet model: a cluster of one such GPU
    // weighs the shapes as one of any size does.
    fleet::Cluster model({{"", int64_t(1) << 40, int64_t(1) << 40, 1, "gpumux"}});
    built = std::make_unique<fleet::TargetWorkloads>(fleet::TargetWorkloads::FromPods(model, pods));
  }
  return *built;
}

NodeScorer::Target NodeScorer::MakeTarget(std::vector<int> recent_milli) {
  Target t;
  t.generation = ++last_generation;
  t.recent_milli = std::move(recent_milli);
  return t;
}

NodeScorer::NodeScorer(std::string_view policy) : policy_(policy), target_(MakeTarget({})) {
  const auto& names = fleet::PolicyNames();
  if (std::find(names.begin(), names.end(), policy_) == names.end())
    throw BadInput("policy: unknown fleet policy '" + policy_ + "'");
}

void NodeScorer::SetTarget(std::vector<int> recent_milli) {
  target_ = MakeTarget(std::move(recent_milli));
  has_staged_ = false;
}

void NodeScorer::StageTarget(std::vector<int> recent_milli) {
  staged_ = MakeTarget(std::move(recent_milli));
  has_staged_ = true;
  staged_until_ = 0;
  staged_done_ = false;
}

std::vector<NodeChoice> NodeScorer::Choose(const std::vector<const NodeGpus*>& nodes,
                                           const PodRequest& pod,
                                           const std::vector<NodeScoreMemo*>* memos,
                                           bool take_in_staged, size_t max_threads) {
  if (has_staged_ && (!memos || staged_done_)) {
    target_ = std::move(staged_);
    has_staged_ = false;
  }
  std::vector<NodeChoice> choices(nodes.size());
  if (pod.asks_mig()) {  // a placement on a MIG room: few per node, scored without memos
    for (size_t n = 0; n < nodes.size(); ++n) {
      NodeChoice& c = choices[n];
      c.mig = nodes[n]->ChooseMigPlacement(pod, &c.why_not);
      c.fits = c.mig.room >= 0;
      c.score = c.mig.score;
    }
    return choices;
  }
  if (pod.gpu_count > 1) {
    for (size_t n = 0; n < nodes.size(); ++n) choices[n] = ChooseGpusOfPodOfSeveral(*nodes[n], pod);
    return choices;
  }
  // What a memo entry answers for: this pod's request, against this target.
  NodeScoreMemo::Entry asked{};
  asked.generation = target_.generation;
  asked.memory_gib = pod.memory_gib_per_gpu();
  asked.compute_percent = pod.compute_percent_per_gpu();
  asked.whole_gpu = pod.whole_gpu();
  auto keep = [&](size_t n, const NodeScoreMemo::Entry& entry) {
    NodeScoreMemo* memo = memos ? (*memos)[n] : nullptr;
    if (!memo) return;
    NodeScoreMemo::Entry* slot = Kept(memo->entries_.data(), memo->count_, entry);
    if (!slot) {
      slot = &memo->entries_[memo->next_];
      memo->next_ = (memo->next_ + 1) % NodeScoreMemo::kEntries;
      memo->count_ = std::min(memo->count_ + 1, NodeScoreMemo::kEntries);
    }
    *slot = entry;
  };

  // Hot path: a node whose memo holds the pod's answer costs a lookup; the others are checked
  // slot by slot.
  FleetCandidates fleet_nodes;
  fleet_nodes.node.reserve(nodes.size());
  fleet_nodes.slot_memory.reserve(nodes.size());
  fleet_nodes.kept.reserve(nodes.size());
  for (size_t n = 0; n < nodes.size(); ++n) {
    NodeChoice& c = choices[n];
    if (NodeScoreMemo* memo = memos ? (*memos)[n] : nullptr) {
      if (const NodeScoreMemo::Entry* kept = Kept(memo->entries_.data(), memo->count_, asked)) {
        c.fits = true;
        c.slot = kept->slot;
        c.score = kept->score;
        if (kept->fleet) {
          fleet_nodes.node.push_back(n);
          fleet_nodes.slot_memory.push_back(kept->slot_memory);
          fleet_nodes.kept.push_back(kept);
        }
        continue;
      }
    }
    const std::vector<Slot>& slots = nodes[n]->slots();
    bool whole_gpu_fits = false;
    for (const Slot& s : slots) {
      if (s.Fits(pod)) {
        c.fits = true;
        whole_gpu_fits = whole_gpu_fits || !s.is_mig();
      }
    }
    if (!c.fits) {
      nodes[n]->FittingSlots(pod, &c.why_not);  // cold: only to say why
      continue;
    }
    if (!whole_gpu_fits) {  // MIG instances only: best fit
      for (size_t i = 0; i < slots.size(); ++i) {
        const Slot& s = slots[i];
        if (!s.Fits(pod)) continue;
        double full = double(s.used_memory_gib + pod.memory_gib_per_gpu()) / s.memory_gib;
        if (c.slot < 0 || 10 * full > c.score) c = {true, "", int(i), {}, 10 * full};
      }
      NodeScoreMemo::Entry entry = asked;
      entry.fleet = false;
      entry.slot = c.slot;
      entry.score = c.score;
      keep(n, entry);
      continue;
    }
    fleet_nodes.node.push_back(n);
    fleet_nodes.slot_memory.push_back(slots[size_t(FleetGpusOf(*nodes[n]).slot[0])].memory_gib);
    fleet_nodes.kept.push_back(nullptr);
  }
  const size_t count = fleet_nodes.node.size();
  if (count == 0) return choices;

  // The target workload: the shares of recently placed pods and this one, at the first node's size.
  const int target_milli = PodMilli(pod, fleet_nodes.slot_memory[0]);
  std::vector<double> raw(count);
  std::vector<size_t> todo;
  todo.reserve(count);
  for (size_t f = 0; f < count; ++f) {
    const NodeScoreMemo::Entry* kept = fleet_nodes.kept[f];
    if (kept && kept->target_milli == target_milli)
      raw[f] = kept->raw;
    else
      todo.push_back(f);
  }
  ScoreInRanges(nodes, fleet_nodes, todo, pod, policy_, target_.With(target_milli), max_threads,
                &choices, &raw);
  auto keep_scored = [&](const std::vector<size_t>& scored, uint64_t generation,
                         const std::vector<NodeChoice>& their_choices,
                         const std::vector<double>& their_raw) {
    for (size_t f : scored) {
      const size_t n = fleet_nodes.node[f];
      NodeScoreMemo::Entry entry = asked;
      entry.generation = generation;
      entry.fleet = true;
      entry.slot_memory = fleet_nodes.slot_memory[f];
      entry.target_milli = target_milli;
      entry.slot = their_choices[n].slot;
      entry.score = their_choices[n].score;
      entry.raw = their_raw[f];
      keep(n, entry);
    }
  };
  keep_scored(todo, target_.generation, choices, raw);

  // A staged target: the next slice of these nodes scored against it, kept for the calls after
  // the switch (its answers are not this call's).
  if (has_staged_ && memos && take_in_staged) {
    const size_t end = std::min(count, staged_until_ + std::max(kNodesPerSlice, count / 8));
    NodeScoreMemo::Entry staged_asked = asked;
    staged_asked.generation = staged_.generation;
    std::vector<size_t> slice;
    for (size_t f = staged_until_; f < end; ++f) {
      NodeScoreMemo* memo = (*memos)[fleet_nodes.node[f]];
      const NodeScoreMemo::Entry* kept =
          memo ? Kept(memo->entries_.data(), memo->count_, staged_asked) : nullptr;
      if (memo && !(kept && kept->target_milli == target_milli)) slice.push_back(f);
    }
    std::vector<NodeChoice> staged_choices(nodes.size());
    std::vector<double> staged_raw(count);
    // On this thread (policy_scores.h says why).
    ScoreInRanges(nodes, fleet_nodes, slice, pod, policy_, staged_.With(target_milli),
                  /*max_threads=*/1, &staged_choices, &staged_raw);
    keep_scored(slice, staged_.generation, staged_choices, staged_raw);
    staged_until_ = end;
    staged_done_ = end == count;
  }

  // Onto kube-scheduler's 0..10: the best node 10, the worst 0; those the model refused 0.
  double best = -1e300, worst = 1e300;
  for (double r : raw) {
    if (std::isnan(r)) continue;
    best = std::max(best, r);
    worst = std::min(worst, r);
  }
  for (size_t f = 0; f < count; ++f) {
    if (std::isnan(raw[f])) continue;
    double& score = choices[fleet_nodes.node[f]].score;
    score = best > worst ? 10 * (score - worst) / (best - worst) : 10;
  }
  return choices;
}

std::vector<NodeChoice> ChooseSlots(const std::vector<const NodeGpus*>& nodes,
                                    const PodRequest& pod, std::string_view policy,
                                    const std::vector<int>& recent_milli, size_t max_threads) {
  NodeScorer scorer(policy);
  scorer.SetTarget(recent_milli);
  return scorer.Choose(nodes, pod, nullptr, true, max_threads);
}

}  // namespace gpumux::k8s
