#include "fleet/experiment.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <future>
#include <thread>

#include "fleet/policy.h"

namespace gpumux::fleet {

std::vector<CurvePoint> Curve(const Simulation& sim, int max_pct) {
  const double gpus = double(sim.capacity_milli) / kMilli;
  struct Sum {
    double alloc = 0, frag_cap = 0, frag_idle = 0, failed = 0;
    int rows = 0;
  };
  std::vector<Sum> sums(max_pct + 1);
  for (const StreamRow& r : sim.rows) {
    // Python's round() on the artifact's percentages: half to even (nearbyint's default mode).
    long x = std::lrint(double(r.arrived_milli) / gpus / 10);
    if (x < 0 || x > max_pct) continue;
    Sum& s = sums[x];
    s.alloc += std::round(double(r.used_milli) / gpus / 10 * 100) / 100;
    s.frag_cap += 100 * r.frag_milli / double(sim.capacity_milli);
    double idle = double(sim.capacity_milli - r.used_milli);
    s.frag_idle += idle > 0 ? 100 * r.frag_milli / idle : 0;
    s.failed += r.failed_pods;
    ++s.rows;
  }
  std::vector<CurvePoint> curve(max_pct + 1);
  for (int x = 0; x <= max_pct; ++x) {
    Sum total = sums[x];
    // Widen to X±1, X±2, ... until some row falls in (the artifact stops at ±1, which always
    // suffices on its traces; small clusters arrive in bigger steps).
    for (int d = 1; total.rows == 0 && d <= max_pct; ++d) {
      for (int y : {x - d, x + d}) {
        if (y < 0 || y > max_pct) continue;
        const Sum& s = sums[y];
        total.alloc += s.alloc, total.frag_cap += s.frag_cap, total.frag_idle += s.frag_idle;
        total.failed += s.failed, total.rows += s.rows;
      }
    }
    if (total.rows == 0) continue;
    CurvePoint& p = curve[x];
    p.present = true;
    p.allocation_pct = total.alloc / total.rows;
    p.unallocated_pct = 100 - p.allocation_pct;
    p.frag_capacity_pct = total.frag_cap / total.rows;
    p.frag_idle_pct = total.frag_idle / total.rows;
    p.failed_pods = total.failed / total.rows;
  }
  return curve;
}

Stat At(const PolicyCurves& curves, int pct, double CurvePoint::*field) {
  Stat s;
  int n = 0;
  for (const auto& seed : curves.per_seed) {
    if (pct < int(seed.size()) && seed[pct].present) {
      s.mean += seed[pct].*field;
      ++n;
    }
  }
  if (n == 0) return {NAN, NAN};
  s.mean /= n;
  for (const auto& seed : curves.per_seed) {
    if (pct < int(seed.size()) && seed[pct].present) s.sd += std::pow(seed[pct].*field - s.mean, 2);
  }
  s.sd = std::sqrt(s.sd / n);
  return s;
}

std::vector<PolicyCurves> RunExperiment(const std::vector<NodeSpec>& nodes,
                                        const std::vector<PodSpec>& pods,
                                        const ExperimentOptions& o) {
  const Cluster empty(nodes);
  const TargetWorkloads targets = TargetWorkloads::FromPods(empty, pods);
  for (const std::string& p : o.policies) MakePolicy(p, targets);  // refuse unknown names up front

  std::vector<PolicyCurves> out(o.policies.size());
  struct Task {
    size_t policy;
    int seed;
  };
  std::vector<Task> tasks;
  for (size_t p = 0; p < o.policies.size(); ++p) {
    out[p].policy = o.policies[p];
    out[p].per_seed.resize(o.seeds);
    out[p].seconds_per_run.resize(o.seeds);
    for (int s = 0; s < o.seeds; ++s) tasks.push_back({p, s});
  }
  std::atomic<size_t> next{0};
  std::atomic<int> done{0};
  auto worker = [&] {
    for (size_t t; (t = next++) < tasks.size();) {
      const Task& task = tasks[t];
      auto start = std::chrono::steady_clock::now();
      Simulation sim = Simulate(empty, pods, targets, o.policies[task.policy],
                                o.first_seed + task.seed, o.inflation);
      out[task.policy].seconds_per_run[task.seed] =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      out[task.policy].per_seed[task.seed] = Curve(sim, o.max_pct);
      ++done;
    }
  };
  int jobs = std::max(1, std::min<int>(o.jobs, int(tasks.size())));
  std::vector<std::future<void>> workers;
  for (int j = 0; j < jobs; ++j) workers.push_back(std::async(std::launch::async, worker));
  while (done < int(tasks.size())) {
    if (o.progress) o.progress(done, int(tasks.size()));
    for (auto& w : workers) w.wait_for(std::chrono::milliseconds(200));
  }
  for (auto& w : workers) w.get();
  if (o.progress) o.progress(done, int(tasks.size()));
  return out;
}

}  // namespace gpumux::fleet
