#include "fleet/simulator.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <optional>
#include <tuple>

#include "base/error.h"

#include "fleet/candidate_index.h"
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

namespace {

// Where each pod goes, as the artifact's scheduler decides it: the feasible node the policy scores
// highest, ties to the node ranked first in a per-seed random ranking (C1); or, for a policy that
// picks at random, its pick among the feasible nodes in node order. Where the policy's Final is
// its cached score (every policy but gpumux's with model prices), the candidate index answers
// from the nodes that changed (candidate_index.h); otherwise every node is checked and scored,
// scores cached per (node, pod shape) until the node changes. `scan_every_node` checks every node
// always: the definition, for checks and for the bench's baseline.
class Placer {
 public:
  Placer(const Cluster& cluster, const std::vector<PodSpec>& pods, const Policy& policy, Rng& rng,
         bool scan_every_node)
      : policy_(policy), scan_every_node_(scan_every_node), shape_of_(pods.size()) {
    rank_.resize(cluster.size());
    std::iota(rank_.begin(), rank_.end(), 0);
    rng.Shuffle(rank_);
    for (size_t i = 0; i < pods.size(); ++i) {
      Shape s = cluster.ShapeOf(pods[i]);
      auto it = std::find(shapes_.begin(), shapes_.end(), s);
      shape_of_[i] = int(it - shapes_.begin());
      if (it == shapes_.end()) shapes_.push_back(s);
    }
    index_.emplace(cluster, shapes_, policy, rank_, policy.PicksAtRandom());
  }

  const Shape& shape(int pod) const { return shapes_[shape_of_[pod]]; }

  // `node` was placed on or emptied.
  void Changed(int node) { index_->Changed(node); }

  // The node and GPU (-1 unless the pod shares one) for `pod`; node -1 when no node can host it.
  std::pair<int, int> Choose(const Cluster& cluster, int pod, Rng& rng) {
    const int sid = shape_of_[pod];
    const Shape& s = shapes_[sid];
    int chosen = -1, scored_gpu = -1;
    if (scan_every_node_) {
      std::tie(chosen, scored_gpu) = Scan(cluster, sid, rng);
    } else if (policy_.PicksAtRandom()) {
      int feasible = index_->Count(sid);
      if (feasible > 0) chosen = index_->Nth(sid, policy_.PickNth(feasible, rng));
    } else if (policy_.FinalIsCached(cluster, s)) {
      std::tie(chosen, scored_gpu) = index_->Best(sid);
    } else {
      std::tie(chosen, scored_gpu) = Scan(cluster, sid, rng);
    }
    if (chosen < 0) return {-1, -1};
    return {chosen, s.shares_gpu() ? policy_.PickGpu(cluster, chosen, s, scored_gpu, rng) : -1};
  }

 private:
  // Every node checked, every feasible one scored (Final): the node and the GPU its score picked.
  // Hot loop: every node, every pod.
  std::pair<int, int> Scan(const Cluster& cluster, int sid, Rng& rng) {
    const Shape& s = shapes_[sid];
    feasible_.clear();
    for (int i = 0; i < cluster.size(); ++i) {
      if (cluster.Fits(i, s)) feasible_.push_back(i);
    }
    if (feasible_.empty()) return {-1, -1};
    if (policy_.PicksAtRandom())
      return {feasible_[policy_.PickNth(int(feasible_.size()), rng)], -1};
    if (cache_.empty()) cache_.resize(size_t(cluster.size()) * shapes_.size());
    int chosen = -1, scored_gpu = -1;
    double best = -std::numeric_limits<double>::infinity();
    for (int i : feasible_) {
      Cached& c = cache_[size_t(i) * shapes_.size() + sid];
      if (c.version != cluster.node(i).version)
        c = {cluster.node(i).version, policy_.Score(cluster, i, s)};
      double score = policy_.Final(cluster, i, s, c.score);
      if (score > best || (score == best && rank_[i] < rank_[chosen])) {
        best = score;
        chosen = i;
        scored_gpu = c.score.gpu;
      }
    }
    return {chosen, scored_gpu};
  }

  struct Cached {
    uint32_t version = std::numeric_limits<uint32_t>::max();
    NodeScore score;
  };
  const Policy& policy_;
  const bool scan_every_node_;
  std::vector<int> rank_;
  std::vector<Shape> shapes_;
  std::vector<int> shape_of_;
  std::optional<CandidateIndex> index_;
  std::vector<Cached> cache_;  // for Scan, made on its first use
  std::vector<int> feasible_;
};

}  // namespace

Simulation Simulate(const Cluster& empty, const std::vector<PodSpec>& pods,
                    const TargetWorkloads& targets, std::string_view policy_name, uint64_t seed,
                    double inflation, std::vector<Placement>* placements, bool scan_every_node) {
  std::unique_ptr<Policy> policy = MakePolicy(policy_name, targets);
  const TargetWorkload& target = targets.fgd;
  Cluster cluster = empty;
  Rng rng(seed);
  std::vector<int> stream = BuildStream(pods, cluster.gpu_capacity_milli(), inflation, rng);
  Placer placer(cluster, pods, *policy, rng, scan_every_node);
  const int n = cluster.size();
  std::vector<double> node_frag(n);
  double frag = 0;
  for (int i = 0; i < n; ++i) frag += node_frag[i] = NodeFragmentation(cluster.node(i), target);

  Simulation sim;
  sim.capacity_milli = cluster.gpu_capacity_milli();
  sim.rows.reserve(stream.size());
  int64_t arrived = 0;
  for (int pod : stream) {
    const Shape& s = placer.shape(pod);
    arrived += s.total_gpu_milli();
    auto [chosen, gpu] = placer.Choose(cluster, pod, rng);
    if (chosen < 0) {
      ++sim.failed_pods;
    } else {
      cluster.Place(chosen, s, gpu);
      placer.Changed(chosen);
      if (placements) placements->push_back({pod, chosen, gpu});
      double f = NodeFragmentation(cluster.node(chosen), target);
      frag += f - node_frag[chosen];
      node_frag[chosen] = f;
    }
    sim.rows.push_back({arrived, cluster.used_gpu_milli(), frag, sim.failed_pods});
  }
  return sim;
}

ChurnResult SimulateDepartures(const Cluster& empty, const std::vector<PodSpec>& pods,
                               const TargetWorkloads& targets, std::string_view policy_name,
                               uint64_t seed, double time_scale, std::vector<ChurnStep>* steps,
                               bool scan_every_node) {
  if (!(time_scale > 0)) throw BadInput("time scale: expected a number above 0");
  for (const PodSpec& p : pods) {
    if (p.creation_time < 0 || p.deletion_time < 0)
      throw BadInput("pod " + p.name +
                     ": the departures experiment needs creation_time and deletion_time");
  }
  std::unique_ptr<Policy> policy = MakePolicy(policy_name, targets);
  Cluster cluster = empty;
  Rng rng(seed);
  Placer placer(cluster, pods, *policy, rng, scan_every_node);
  // Arrivals at creation_time / time_scale; each pod stays as long as in the trace. At equal
  // times departures go first, then arrivals in a per-seed random order.
  struct Event {
    double time;
    int kind;  // 0 departure, 1 arrival, 2 departure of a pod that arrived at the same time
    uint64_t tie;
    int pod;
  };
  std::vector<Event> events;
  events.reserve(pods.size() * 2);
  double first_arrival = std::numeric_limits<double>::infinity(), last_arrival = 0;
  for (size_t i = 0; i < pods.size(); ++i) {
    double arrive = double(pods[i].creation_time) / time_scale;
    first_arrival = std::min(first_arrival, arrive);
    last_arrival = std::max(last_arrival, arrive);
    events.push_back({arrive, 1, rng.Next(), int(i)});
    // A pod that lives no time at all leaves after it arrives, not before (kind 2: after the
    // arrivals of its time).
    int64_t lifetime = pods[i].deletion_time - pods[i].creation_time;
    events.push_back({arrive + double(lifetime), lifetime == 0 ? 2 : 0, 0, int(i)});
  }
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    return std::tie(a.time, a.kind, a.tie, a.pod) < std::tie(b.time, b.kind, b.tie, b.pod);
  });
  struct Where {
    int node = -1;
    uint32_t gpus = 0;
  };
  std::vector<Where> where(pods.size());
  ChurnResult r;
  r.pods = int(pods.size());
  const double capacity = double(cluster.gpu_capacity_milli());
  double unallocated_area = 0, last = 0;
  int64_t requested = 0, failed_request = 0, placed_milli = 0, departed_milli = 0;
  int placed = 0, departed = 0;
  // Averaged over the arrival window (first to last arrival), while demand comes in: after it,
  // the long-lived pods only drain away.
  last = first_arrival;
  for (const Event& e : events) {
    if (e.time > last && last < last_arrival) {
      double until = std::min(e.time, last_arrival);
      unallocated_area += (capacity - double(cluster.used_gpu_milli())) * (until - last);
      last = until;
    }
    const Shape& s = placer.shape(e.pod);
    if (e.kind == 1) {
      requested += s.total_gpu_milli();
      auto [node, gpu] = placer.Choose(cluster, e.pod, rng);
      if (node < 0) {
        ++r.failed_pods;
        failed_request += s.total_gpu_milli();
      } else {
        where[e.pod] = {node, cluster.Place(node, s, gpu)};
        placer.Changed(node);
        ++placed;
        placed_milli += s.total_gpu_milli();
      }
    } else if (where[e.pod].node >= 0) {
      cluster.Remove(where[e.pod].node, s, where[e.pod].gpus);
      placer.Changed(where[e.pod].node);
      where[e.pod].node = -1;
      ++departed;
      departed_milli += s.total_gpu_milli();
    }
    r.peak_used_milli = std::max(r.peak_used_milli, cluster.used_gpu_milli());
    if (steps)
      steps->push_back(
          {e.time, placed, departed, placed_milli, departed_milli, cluster.used_gpu_milli()});
  }
  double span = last_arrival - first_arrival;
  r.unallocated_pct = span > 0 ? 100 * unallocated_area / (capacity * span) : 100;
  r.failed_request_pct = requested > 0 ? 100.0 * double(failed_request) / double(requested) : 0;
  r.peak_allocation_pct = 100.0 * double(r.peak_used_milli) / capacity;
  return r;
}

}  // namespace gpumux::fleet
