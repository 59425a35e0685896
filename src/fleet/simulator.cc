#include "fleet/simulator.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "fleet/policy.h"

namespace gpumux::fleet {

std::vector<int> BuildStream(const std::vector<PodSpec>& pods, int64_t capacity_milli,
                             double inflation, Rng& rng) {
  std::vector<int> by_name(pods.size());
  std::iota(by_name.begin(), by_name.end(), 0);
  std::stable_sort(by_name.begin(), by_name.end(),
                   [&](int a, int b) { return pods[a].name < pods[b].name; });
  std::vector<int> stream = by_name;
  rng.Shuffle(stream);
  int64_t total = 0;
  for (const PodSpec& p : pods) total += p.total_gpu_milli();
  double limit = inflation * double(capacity_milli);
  if (total == 0) return stream;  // a CPU-only trace would never stop cloning
  while (true) {
    int i = by_name[rng.Below(by_name.size())];
    if (double(total + pods[i].gpu_milli) > limit) break;
    stream.push_back(i);
    total += pods[i].total_gpu_milli();
  }
  return stream;
}

Simulation Simulate(const Cluster& empty, const std::vector<PodSpec>& pods,
                    const TargetWorkloads& targets, std::string_view policy_name, uint64_t seed,
                    double inflation, std::vector<Placement>* placements) {
  std::unique_ptr<Policy> policy = MakePolicy(policy_name, targets);
  const TargetWorkload& target = targets.fgd;
  Cluster cluster = empty;
  Rng rng(seed);
  std::vector<int> stream = BuildStream(pods, cluster.gpu_capacity_milli(), inflation, rng);

  // Per-seed node ranking for ties (C1).
  const int n = cluster.size();
  std::vector<int> rank(n);
  std::iota(rank.begin(), rank.end(), 0);
  rng.Shuffle(rank);

  // Distinct shapes, so scores can be cached per (node, shape) until the node changes.
  std::vector<Shape> shapes;
  std::vector<int> shape_of(pods.size());
  for (size_t i = 0; i < pods.size(); ++i) {
    Shape s = cluster.ShapeOf(pods[i]);
    auto it = std::find(shapes.begin(), shapes.end(), s);
    shape_of[i] = int(it - shapes.begin());
    if (it == shapes.end()) shapes.push_back(s);
  }
  struct Cached {
    uint32_t version = std::numeric_limits<uint32_t>::max();
    NodeScore score;
  };
  std::vector<Cached> cache(size_t(n) * shapes.size());

  std::vector<double> node_frag(n);
  double frag = 0;
  for (int i = 0; i < n; ++i) frag += node_frag[i] = NodeFragmentation(cluster.node(i), target);

  Simulation sim;
  sim.capacity_milli = cluster.gpu_capacity_milli();
  sim.rows.reserve(stream.size());
  int64_t arrived = 0;
  std::vector<int> feasible;
  for (int pod : stream) {
    const int sid = shape_of[pod];
    const Shape& s = shapes[sid];
    arrived += s.total_gpu_milli();
    // Hot loop: every node is checked for every pod.
    feasible.clear();
    for (int i = 0; i < n; ++i) {
      if (cluster.Fits(i, s)) feasible.push_back(i);
    }
    int chosen = -1;
    int scored_gpu = -1;
    if (!feasible.empty()) {
      chosen = policy->PickNode(feasible, rng);
      if (chosen < 0) {
        double best = -std::numeric_limits<double>::infinity();
        for (int i : feasible) {
          Cached& c = cache[size_t(i) * shapes.size() + sid];
          if (c.version != cluster.node(i).version)
            c = {cluster.node(i).version, policy->Score(cluster, i, s)};
          if (c.score.score > best || (c.score.score == best && rank[i] < rank[chosen])) {
            best = c.score.score;
            chosen = i;
            scored_gpu = c.score.gpu;
          }
        }
      }
    }
    if (chosen < 0) {
      ++sim.failed_pods;
    } else {
      int gpu = s.shares_gpu() ? policy->PickGpu(cluster, chosen, s, scored_gpu, rng) : -1;
      cluster.Place(chosen, s, gpu);
      if (placements) placements->push_back({pod, chosen, gpu});
      double f = NodeFragmentation(cluster.node(chosen), target);
      frag += f - node_frag[chosen];
      node_frag[chosen] = f;
    }
    sim.rows.push_back({arrived, cluster.used_gpu_milli(), frag, sim.failed_pods});
  }
  return sim;
}

}  // namespace gpumux::fleet
