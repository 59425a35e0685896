#include "integrations/kubernetes/policy_scores.h"

#include <algorithm>
#include <array>
#include <cmath>

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

int PodMilli(const PodRequest& pod, int slot_memory_gib) {
  if (pod.whole_gpu()) return fleet::kMilli;
  double memory = slot_memory_gib > 0 ? double(pod.memory_gib()) / slot_memory_gib : 1.0;
  double share = std::max(memory, pod.compute_percent() / 100.0);
  return std::clamp(int(std::ceil(share * fleet::kMilli)), 1, fleet::kMilli);
}

std::vector<NodeChoice> ChooseSlots(const std::vector<const NodeGpus*>& nodes,
                                    const PodRequest& pod, std::string_view policy_name,
                                    const std::vector<int>& recent_milli) {
  std::vector<NodeChoice> choices(nodes.size());
  // The fleet model of the nodes where a whole GPU (not an instance) fits the pod.
  std::vector<fleet::NodeSpec> specs;
  std::vector<int> fleet_node(nodes.size(), -1);
  std::vector<FleetGpus> gpu_slots;  // per fleet node
  std::vector<int> slot_memory;      // per fleet node
  specs.reserve(nodes.size());
  gpu_slots.reserve(nodes.size());
  slot_memory.reserve(nodes.size());
  for (size_t n = 0; n < nodes.size(); ++n) {
    NodeChoice& c = choices[n];
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
        double full = double(s.used_memory_gib + pod.memory_gib()) / s.memory_gib;
        if (c.slot < 0 || 10 * full > c.score) c = {true, "", int(i), 10 * full};
      }
      continue;
    }
    fleet_node[n] = int(specs.size());
    gpu_slots.push_back(FleetGpusOf(*nodes[n]));
    slot_memory.push_back(slots[size_t(gpu_slots.back().slot[0])].memory_gib);
    // CPU and memory are kube-scheduler's to check: the fleet model gets room enough for them.
    specs.push_back({"", int64_t(1) << 40, int64_t(1) << 40, gpu_slots.back().count, "gpumux"});
  }
  if (specs.empty()) return choices;

  fleet::Cluster cluster(specs);
  for (size_t n = 0; n < nodes.size(); ++n) {
    if (fleet_node[n] < 0) continue;
    const FleetGpus& gpus = gpu_slots[size_t(fleet_node[n])];
    for (int g = 0; g < gpus.count; ++g) {
      const Slot& s = nodes[n]->slots()[size_t(gpus.slot[size_t(g)])];
      if (s.pods == 0) continue;
      int milli = UsedMilli(s);
      if (milli == fleet::kMilli && !s.held_whole) {
        // Shares that fill the GPU: as 999 + 1, sharing shapes, so they stay on GPU g.
        cluster.Place(fleet_node[n], {0, 0, 1, milli - 1}, g);
        milli = 1;
      }
      cluster.Place(fleet_node[n], {0, 0, 1, milli}, g);
    }
  }
  // The target workload: the shares of recently placed pods and this one, at the first node's size.
  std::vector<fleet::PodSpec> recent;
  recent.reserve(recent_milli.size() + 1);
  for (int m : recent_milli) recent.push_back({"", 0, 0, 1, m, {}});
  recent.push_back({"", 0, 0, 1, PodMilli(pod, slot_memory[0]), {}});
  auto targets = fleet::TargetWorkloads::FromPods(cluster, recent);
  auto policy = fleet::MakePolicy(policy_name, targets);

  double best = -1e300, worst = 1e300;
  for (size_t n = 0; n < nodes.size(); ++n) {
    int f = fleet_node[n];
    if (f < 0) continue;
    fleet::Shape shape{0, 0, 1, PodMilli(pod, slot_memory[f])};
    NodeChoice& c = choices[n];
    // Where rounding to milli makes the model refuse what fits exactly: scored last (0).
    bool modelled = cluster.Fits(f, shape);
    fleet::NodeScore s = modelled ? policy->Score(cluster, f, shape) : fleet::NodeScore{};
    // The policy's GPU; where its milli rounding disagrees with the exact check (or it picks
    // none, as for whole GPUs), the fitting GPU with the least memory left.
    const FleetGpus& gpus = gpu_slots[size_t(f)];
    int slot = s.gpu >= 0 && s.gpu < gpus.count ? gpus.slot[size_t(s.gpu)] : -1;
    if (slot < 0 || !nodes[n]->slots()[slot].Fits(pod)) {
      slot = -1;
      for (int i : gpus) {
        const Slot& candidate = nodes[n]->slots()[i];
        if (candidate.Fits(pod) && (slot < 0 || candidate.memory_gib - candidate.used_memory_gib <
                                                    nodes[n]->slots()[slot].memory_gib -
                                                        nodes[n]->slots()[slot].used_memory_gib))
          slot = i;
      }
    }
    c.slot = slot;
    c.score = modelled ? policy->Final(cluster, f, shape, s) : s.score;
    if (!modelled) {
      fleet_node[n] = -1;  // keeps its score of 0 below
      continue;
    }
    best = std::max(best, s.score);
    worst = std::min(worst, s.score);
  }
  // Onto kube-scheduler's 0..10: the best node 10, the worst 0.
  for (size_t n = 0; n < nodes.size(); ++n) {
    if (fleet_node[n] < 0) continue;
    double& score = choices[n].score;
    score = best > worst ? 10 * (score - worst) / (best - worst) : 10;
  }
  return choices;
}

}  // namespace gpumux::k8s
