#include "fleet/fragmentation.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace gpumux::fleet {

TargetWorkload TargetWorkload::FromPods(const Cluster& cluster, const std::vector<PodSpec>& pods,
                                        double coverage, ClassWeight weighting) {
  // Key: CPU, milli, GPU count, spec text (the artifact's PodResource, whose order breaks ties).
  using Key = std::tuple<int64_t, int, int, std::string>;
  std::map<Key, std::pair<int, Shape>> counts;
  for (const PodSpec& p : pods) {
    std::string spec;
    for (const std::string& m : p.gpu_spec) spec += (spec.empty() ? "" : "|") + m;
    Shape s = cluster.ShapeOf(p);
    s.memory_mib = 0;
    auto& entry = counts[{p.cpu_milli, p.gpu_milli, p.num_gpu, spec}];
    ++entry.first;
    entry.second = s;
  }
  std::vector<std::pair<Key, std::pair<int, Shape>>> sorted(counts.begin(), counts.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    if (a.second.first != b.second.first) return a.second.first > b.second.first;
    return a.first > b.first;  // reverse of the artifact's Less on equal counts
  });
  TargetWorkload w;
  double expected = coverage * double(pods.size());
  double covered = 0;
  for (const auto& [key, entry] : sorted) {
    if (covered >= expected) break;
    w.classes_.push_back({entry.second, entry.first, 0});
    covered += entry.first;
  }
  const size_t models = cluster.models().size();
  std::vector<int64_t> gpus_of_model(models);
  int64_t fleet_gpus = 0;
  for (int i = 0; i < cluster.size(); ++i) {
    const NodeState& n = cluster.node(i);
    if (n.gpus > 0) gpus_of_model[size_t(n.model)] += n.gpus;
    fleet_gpus += n.gpus;
  }
  for (TargetClass& c : w.classes_) {
    c.probability = c.count / covered;
    c.weight = c.probability;
    if (weighting == ClassWeight::kScarcity && !c.shape.cpu_only()) {
      int64_t usable = 0;
      for (size_t m = 0; m < models; ++m)
        usable += (c.shape.models >> m & 1) ? gpus_of_model[m] : 0;
      if (usable > 0) c.weight *= double(fleet_gpus) / double(usable);
    }
  }
  double cpu = 0, gpu = 0, gpu_pods = 0;
  for (const TargetClass& c : w.classes_) {
    if (c.shape.cpu_only()) continue;
    cpu += c.probability * double(c.shape.cpu_milli);
    gpu += c.probability * double(c.shape.total_gpu_milli());
    gpu_pods += c.probability;
  }
  w.cpu_per_gpu_milli_ = gpu > 0 ? cpu / gpu : 0;
  w.mean_gpu_request_milli_ = gpu_pods > 0 ? gpu / gpu_pods : 0;
  // Per model, the classes as the measures read them there (hot paths: fewer classes to walk).
  w.by_model_.resize(models);
  for (size_t m = 0; m < models; ++m) {
    ForModel& f = w.by_model_[m];
    for (const TargetClass& c : w.classes_) {
      if (c.shape.cpu_only() || !(c.shape.models >> m & 1)) {
        f.unusable_weight += c.weight;
        continue;
      }
      Shape shape = c.shape;
      shape.models = kAnyModel;
      auto same = std::find_if(f.usable.begin(), f.usable.end(),
                               [&](const TargetClass& u) { return u.shape == shape; });
      if (same == f.usable.end()) {
        f.usable.push_back({shape, c.count, c.probability, c.weight});
      } else {
        same->count += c.count;
        same->probability += c.probability;
        same->weight += c.weight;
      }
    }
  }
  return w;
}

namespace {

// The part of a node's state the measures read, cheap to copy and modify.
struct FreeView {
  int model;
  int gpus;
  int64_t cpu_left;
  int total;
  std::array<int16_t, kMaxGpusPerNode> left;
};

FreeView ViewOf(const NodeState& n) {
  return {n.model, n.gpus, n.cpu_left, n.gpu_left_total, n.gpu_left};
}

// The view after placing a pod of `shape` as Cluster::Place would.
FreeView After(const NodeState& n, const Shape& shape, int gpu) {
  FreeView v = ViewOf(n);
  v.cpu_left -= shape.cpu_milli;
  if (shape.shares_gpu()) {
    v.left[gpu] = int16_t(v.left[gpu] - shape.gpu_milli);
  } else {
    for (int g = 0, need = shape.num_gpu; g < v.gpus && need > 0; ++g) {
      if (v.left[g] == kMilli) {
        v.left[g] = 0;
        --need;
      }
    }
  }
  v.total -= int(shape.total_gpu_milli());
  return v;
}

double Fragmentation(const FreeView& v, const TargetWorkload& target) {
  // Hot path: called for every candidate GPU of every node FGD and gpumux score.
  if (v.total == 0) return 0;  // also every node without GPUs (model -1)
  const TargetWorkload::ForModel& classes = target.for_model(v.model);
  double frag = classes.unusable_weight * v.total;
  for (const TargetClass& c : classes.usable) {
    const Shape& s = c.shape;
    int frag_m = v.total;  // all free milli, unless the shape fits
    if (v.cpu_left >= s.cpu_milli) {
      int fitting = 0, too_small = 0;
      for (int g = 0; g < v.gpus; ++g) {
        if (v.left[g] >= s.gpu_milli) {
          ++fitting;
        } else {
          too_small += v.left[g];
        }
      }
      if (fitting >= s.num_gpu) frag_m = too_small;
    }
    frag += c.weight * frag_m;
  }
  return frag;
}

double Stranded(int64_t cpu_left, int64_t gpu_left, double cpu_per_gpu_milli) {
  if (cpu_per_gpu_milli <= 0) return 0;
  return std::max(0.0, double(gpu_left) - double(cpu_left) / cpu_per_gpu_milli);
}

double CapacityFragmentation(const FreeView& v, const TargetWorkload& target) {
  // Hot path, like Fragmentation.
  if (v.total == 0) return 0;
  const TargetWorkload::ForModel& classes = target.for_model(v.model);
  double frag = classes.unusable_weight * v.total;  // they can use none of it
  for (const TargetClass& c : classes.usable) {
    const Shape& s = c.shape;
    int64_t by_cpu = s.cpu_milli > 0 ? v.cpu_left / s.cpu_milli : int64_t(1) << 40;
    int64_t usable;
    if (s.shares_gpu()) {
      int64_t by_gpu = 0;
      for (int g = 0; g < v.gpus; ++g) by_gpu += v.left[g] / s.gpu_milli;
      usable = std::min(by_gpu, by_cpu) * s.gpu_milli;
    } else {
      int free = 0;
      for (int g = 0; g < v.gpus; ++g) free += v.left[g] == kMilli;
      usable = std::min<int64_t>(free / s.num_gpu, by_cpu) * s.total_gpu_milli();
    }
    frag += c.weight * double(v.total - usable);
  }
  return frag;
}

}  // namespace

double NodeFragmentation(const NodeState& n, const TargetWorkload& target) {
  return Fragmentation(ViewOf(n), target);
}

double NodeFragmentationAfter(const NodeState& n, const TargetWorkload& target, const Shape& shape,
                              int gpu) {
  return Fragmentation(After(n, shape, gpu), target);
}

double NodeStrandedGpu(const NodeState& n, const TargetWorkload& target) {
  return Stranded(n.cpu_left, n.gpu_left_total, target.cpu_per_gpu_milli());
}

double NodeStrandedGpuAfter(const NodeState& n, const TargetWorkload& target, const Shape& shape) {
  return Stranded(n.cpu_left - shape.cpu_milli, n.gpu_left_total - shape.total_gpu_milli(),
                  target.cpu_per_gpu_milli());
}

double NodeCapacityFragmentation(const NodeState& n, const TargetWorkload& target) {
  return CapacityFragmentation(ViewOf(n), target);
}

double NodeCapacityFragmentationAfter(const NodeState& n, const TargetWorkload& target,
                                      const Shape& shape, int gpu) {
  return CapacityFragmentation(After(n, shape, gpu), target);
}

namespace {

// What both per-GPU measures start from: the view after placing `shape` (its cpu_left and total
// are those after any GPU) and each GPU's sum begun with the classes that cannot use the node.
// Null when nothing is free after the placement (every sum 0).
const TargetWorkload::ForModel* BeginEachGpu(const NodeState& n, const TargetWorkload& target,
                                             const Shape& shape, FreeView* v, PerGpu* after) {
  *v = After(n, shape, 0);
  after->fill(0);
  if (v->total == 0) return nullptr;
  const TargetWorkload::ForModel& classes = target.for_model(v->model);
  for (int g = 0; g < v->gpus; ++g) (*after)[size_t(g)] = classes.unusable_weight * v->total;
  return &classes;
}

}  // namespace

void NodeFragmentationAfterEachGpu(const NodeState& n, const TargetWorkload& target,
                                   const Shape& shape, PerGpu* after) {
  // Hot path. Fragmentation() of the view after placing on g, with the classes in the same order
  // (so the sums are the same, bit for bit): only GPU g's term differs from the view before.
  FreeView v;
  const TargetWorkload::ForModel* classes = BeginEachGpu(n, target, shape, &v, after);
  if (!classes) return;
  for (const TargetClass& c : classes->usable) {
    const Shape& s = c.shape;
    if (v.cpu_left < s.cpu_milli) {  // the shape does not fit on any GPU: all free milli
      for (int g = 0; g < v.gpus; ++g) (*after)[size_t(g)] += c.weight * v.total;
      continue;
    }
    int fitting = 0, too_small = 0;  // over the GPUs before the placement
    for (int g = 0; g < n.gpus; ++g) {
      if (n.gpu_left[g] >= s.gpu_milli)
        ++fitting;
      else
        too_small += n.gpu_left[g];
    }
    for (int g = 0; g < n.gpus; ++g) {
      int before = n.gpu_left[g], now = before - shape.gpu_milli;
      if (now < 0) continue;  // the pod does not fit there
      int fit = fitting - (before >= s.gpu_milli) + (now >= s.gpu_milli);
      int small = too_small - (before < s.gpu_milli ? before : 0) + (now < s.gpu_milli ? now : 0);
      (*after)[size_t(g)] += c.weight * (fit >= s.num_gpu ? small : v.total);
    }
  }
}

void NodeCapacityFragmentationAfterEachGpu(const NodeState& n, const TargetWorkload& target,
                                           const Shape& shape, PerGpu* after) {
  // Hot path; as above, for CapacityFragmentation().
  FreeView v;
  const TargetWorkload::ForModel* classes = BeginEachGpu(n, target, shape, &v, after);
  if (!classes) return;
  for (const TargetClass& c : classes->usable) {
    const Shape& s = c.shape;
    int64_t by_cpu = s.cpu_milli > 0 ? v.cpu_left / s.cpu_milli : int64_t(1) << 40;
    // Before the placement, per GPU: pods of the class its room holds, or whether it is free.
    std::array<int, kMaxGpusPerNode> held;
    int64_t count = 0;
    for (int g = 0; g < n.gpus; ++g) {
      held[size_t(g)] = s.shares_gpu() ? n.gpu_left[g] / s.gpu_milli : n.gpu_left[g] == kMilli;
      count += held[size_t(g)];
    }
    for (int g = 0; g < n.gpus; ++g) {
      int before = n.gpu_left[g], now = before - shape.gpu_milli;
      if (now < 0) continue;  // the pod does not fit there
      int64_t usable;
      if (s.shares_gpu()) {
        int64_t by_gpu = count - held[size_t(g)] + now / s.gpu_milli;
        usable = std::min(by_gpu, by_cpu) * s.gpu_milli;
      } else {
        int64_t free = count - (before == kMilli) + (now == kMilli);
        usable = std::min<int64_t>(free / s.num_gpu, by_cpu) * s.total_gpu_milli();
      }
      (*after)[size_t(g)] += c.weight * double(v.total - usable);
    }
  }
}

}  // namespace gpumux::fleet
