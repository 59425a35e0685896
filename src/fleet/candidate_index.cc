#include "fleet/candidate_index.h"

#include <algorithm>
#include <bit>
#include <map>
#include <tuple>

namespace gpumux::fleet {

CandidateIndex::CandidateIndex(const Cluster& cluster, const std::vector<Shape>& shapes,
                               const Policy& policy, const std::vector<int>& rank,
                               bool in_node_order)
    : cluster_(cluster),
      shapes_(shapes),
      policy_(policy),
      rank_(rank),
      in_node_order_(in_node_order),
      per_shape_(shapes.size()) {}

CandidateIndex::Entry CandidateIndex::Scored(int shape, int node) const {
  NodeScore s = policy_.Score(cluster_, node, shapes_[shape]);
  return {s.score, rank_[node], node, cluster_.node(node).version, s.gpu};
}

void CandidateIndex::MarkFeasible(PerShape& p, int node, bool feasible) {
  p.feasible += feasible ? 1 : -1;
  if (!in_node_order_) return;
  for (int i = node + 1; i < int(p.fenwick.size()); i += i & -i) p.fenwick[i] += feasible ? 1 : -1;
}

void CandidateIndex::Build(int shape, PerShape& p) {
  const int n = cluster_.size();
  p.built = true;
  p.seen = log_.size();
  p.version.assign(n, 0);
  p.feasible_at.assign(n, 0);
  p.heap.clear();
  p.feasible = 0;
  if (in_node_order_) p.fenwick.assign(n + 1, 0);
  // Nodes no pod has touched are alike when their specs are: scored once per spec.
  std::map<std::tuple<int64_t, int64_t, int64_t, int, int>, Entry> fresh;
  for (int i = 0; i < n; ++i) {
    const NodeState& s = cluster_.node(i);
    p.version[i] = s.version;
    if (!cluster_.Fits(i, shapes_[shape])) continue;
    p.feasible_at[i] = 1;
    ++p.feasible;
    if (in_node_order_) {
      p.fenwick[i + 1] = 1;
      continue;
    }
    Entry e;
    if (s.version == 0) {
      auto key = std::make_tuple(s.cpu_capacity, s.cpu_left, s.memory_left, s.gpus, s.model);
      auto it = fresh.find(key);
      if (it == fresh.end()) it = fresh.emplace(key, Scored(shape, i)).first;
      e = it->second;
      e.rank = rank_[i];
      e.node = i;
    } else {
      e = Scored(shape, i);
    }
    p.heap.push_back(e);
  }
  if (in_node_order_) {  // the counts in place, O(n)
    for (int i = 1; i <= n; ++i) {
      int parent = i + (i & -i);
      if (parent <= n) p.fenwick[parent] += p.fenwick[i];
    }
  }
  std::make_heap(p.heap.begin(), p.heap.end(), Worse);
}

void CandidateIndex::TakeIn(int shape, PerShape& p, int node) {
  const uint32_t version = cluster_.node(node).version;
  if (p.version[node] == version) return;  // taken in already (a node logged twice)
  p.version[node] = version;
  const bool feasible = cluster_.Fits(node, shapes_[shape]);
  const bool was_feasible = p.feasible_at[node] != 0;
  if (feasible != was_feasible) {
    p.feasible_at[node] = feasible;
    MarkFeasible(p, node, feasible);
  }
  if (!feasible || in_node_order_) return;
  p.heap.push_back(Scored(shape, node));
  std::push_heap(p.heap.begin(), p.heap.end(), Worse);
}

CandidateIndex::PerShape& CandidateIndex::UpToDate(int shape) {
  PerShape& p = per_shape_[size_t(shape)];
  if (!p.built) {
    Build(shape, p);
    return p;
  }
  for (; p.seen < log_.size(); ++p.seen) TakeIn(shape, p, log_[p.seen]);
  // Entries left by nodes that changed since: dropped once they outnumber the live ones.
  if (p.heap.size() > 2 * size_t(p.feasible) + 1024) {
    std::erase_if(p.heap, [&](const Entry& e) { return e.version != p.version[e.node]; });
    std::make_heap(p.heap.begin(), p.heap.end(), Worse);
  }
  return p;
}

std::pair<int, int> CandidateIndex::Best(int shape) {
  PerShape& p = UpToDate(shape);
  while (!p.heap.empty() && p.heap.front().version != p.version[p.heap.front().node]) {
    std::pop_heap(p.heap.begin(), p.heap.end(), Worse);
    p.heap.pop_back();
  }
  if (p.heap.empty()) return {-1, -1};
  return {p.heap.front().node, p.heap.front().gpu};
}

int CandidateIndex::Count(int shape) { return UpToDate(shape).feasible; }

int CandidateIndex::Nth(int shape, int k) {
  const PerShape& p = UpToDate(shape);
  // The smallest i whose prefix count exceeds k (binary lifting on the Fenwick tree).
  const int n = int(p.fenwick.size()) - 1;
  int at = 0;
  for (int step = std::bit_floor(unsigned(std::max(n, 1))); step > 0; step >>= 1) {
    if (at + step <= n && p.fenwick[at + step] <= k) {
      at += step;
      k -= p.fenwick[at];
    }
  }
  return at;  // node index = 1-based position - 1
}

}  // namespace gpumux::fleet
