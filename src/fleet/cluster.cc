#include "fleet/cluster.h"

#include <algorithm>
#include <cassert>

#include "base/error.h"

namespace gpumux::fleet {

Cluster::Cluster(const std::vector<NodeSpec>& nodes) : specs_(nodes) {
  nodes_.reserve(nodes.size());
  for (const NodeSpec& spec : nodes) {
    NodeState n;
    n.cpu_left = n.cpu_capacity = spec.cpu_milli;
    n.memory_left = spec.memory_mib;
    n.gpus = spec.gpus;
    if (spec.gpus > 0) {
      auto it = std::find(models_.begin(), models_.end(), spec.model);
      if (it == models_.end()) {
        if (models_.size() == 64) throw BadInput("more than 64 GPU models in one cluster");
        models_.push_back(spec.model);
        it = models_.end() - 1;
      }
      n.model = int(it - models_.begin());
    }
    for (int g = 0; g < n.gpus; ++g) n.gpu_left[g] = kMilli;
    n.gpu_left_total = n.gpus * kMilli;
    n.free_gpus = n.gpus;
    capacity_milli_ += n.gpu_left_total;
    nodes_.push_back(std::move(n));
  }
}

ModelMask Cluster::MaskOf(const std::vector<std::string>& gpu_spec) const {
  if (gpu_spec.empty()) return kAnyModel;
  ModelMask mask = 0;
  for (const std::string& m : gpu_spec) {
    auto it = std::find(models_.begin(), models_.end(), m);
    if (it != models_.end()) mask |= ModelMask{1} << (it - models_.begin());
  }
  return mask;
}

Shape Cluster::ShapeOf(const PodSpec& pod) const {
  return {pod.cpu_milli, pod.memory_mib, pod.num_gpu, pod.gpu_milli, MaskOf(pod.gpu_spec)};
}

bool Cluster::Fits(int i, const Shape& s) const {
  const NodeState& n = nodes_[i];
  if (n.cpu_left < s.cpu_milli || n.memory_left < s.memory_mib) return false;
  if (s.cpu_only()) return true;
  if (n.gpus == 0 || !(s.models >> n.model & 1)) return false;
  if (s.shares_gpu()) {
    for (int g = 0; g < n.gpus; ++g) {
      if (n.gpu_left[g] >= s.gpu_milli) return true;
    }
    return false;
  }
  return n.free_gpus >= s.num_gpu;
}

uint32_t Cluster::Place(int i, const Shape& s, int gpu) {
  NodeState& n = nodes_[i];
  n.cpu_left -= s.cpu_milli;
  n.memory_left -= s.memory_mib;
  ++n.version;
  if (s.cpu_only()) return 0;
  uint32_t taken = 0;
  int kind = s.shares_gpu() ? -1 : s.num_gpu;
  auto it =
      std::find_if(n.affinity.begin(), n.affinity.end(), [&](auto& a) { return a.first == kind; });
  if (it == n.affinity.end()) {
    n.affinity.push_back({kind, 1});
  } else {
    ++it->second;
  }
  if (s.shares_gpu()) {
    assert(gpu >= 0 && gpu < n.gpus && n.gpu_left[gpu] >= s.gpu_milli);
    if (n.gpu_left[gpu] == kMilli) --n.free_gpus;
    n.gpu_left[gpu] = int16_t(n.gpu_left[gpu] - s.gpu_milli);
    taken = 1u << gpu;
  } else {
    int need = s.num_gpu;
    for (int g = 0; g < n.gpus && need > 0; ++g) {
      if (n.gpu_left[g] == kMilli) {
        n.gpu_left[g] = 0;
        --n.free_gpus;
        --need;
        taken |= 1u << g;
      }
    }
    assert(need == 0);
  }
  n.gpu_left_total -= int(s.total_gpu_milli());
  used_milli_ += s.total_gpu_milli();
  return taken;
}

void Cluster::Remove(int i, const Shape& s, uint32_t gpus) {
  NodeState& n = nodes_[i];
  n.cpu_left += s.cpu_milli;
  n.memory_left += s.memory_mib;
  ++n.version;
  if (s.cpu_only()) return;
  int kind = s.shares_gpu() ? -1 : s.num_gpu;
  auto it =
      std::find_if(n.affinity.begin(), n.affinity.end(), [&](auto& a) { return a.first == kind; });
  assert(it != n.affinity.end());
  if (--it->second == 0) n.affinity.erase(it);
  int per_gpu = s.shares_gpu() ? s.gpu_milli : kMilli;
  for (int g = 0; g < n.gpus; ++g) {
    if (!(gpus >> g & 1)) continue;
    n.gpu_left[g] = int16_t(n.gpu_left[g] + per_gpu);
    assert(n.gpu_left[g] <= kMilli);
    if (n.gpu_left[g] == kMilli) ++n.free_gpus;
  }
  n.gpu_left_total += int(s.total_gpu_milli());
  used_milli_ -= s.total_gpu_milli();
}

}  // namespace gpumux::fleet
