#include "fleet/experiment.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <future>
#include <mutex>
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

Stat MeanAndSd(const std::vector<double>& values) {
  if (values.empty()) return {NAN, NAN};
  Stat s;
  for (double v : values) s.mean += v;
  s.mean /= double(values.size());
  for (double v : values) s.sd += std::pow(v - s.mean, 2);
  s.sd = std::sqrt(s.sd / double(values.size()));
  return s;
}

Stat At(const PolicyCurves& curves, int pct, double CurvePoint::*field) {
  std::vector<double> values;
  for (const auto& seed : curves.per_seed)
    if (pct < int(seed.size()) && seed[pct].present) values.push_back(seed[pct].*field);
  return MeanAndSd(values);
}

namespace {

// Calls run(policy, seed) for every policy and seed of `o` on o.jobs threads, reporting progress
// from the calling thread. A run that throws does not stop the others; the first error is
// rethrown when all are done.
void RunEach(const ExperimentOptions& o, const std::function<void(size_t, int)>& run) {
  struct Task {
    size_t policy;
    int seed;
  };
  std::vector<Task> tasks;
  for (size_t p = 0; p < o.policies.size(); ++p)
    for (int s = 0; s < o.seeds; ++s) tasks.push_back({p, s});
  std::atomic<size_t> next{0};
  std::atomic<int> done{0};
  std::mutex failure_mu;
  std::exception_ptr failure;
  auto worker = [&] {
    for (size_t t; (t = next++) < tasks.size();) {
      try {
        run(tasks[t].policy, tasks[t].seed);
      } catch (...) {
        std::lock_guard lock(failure_mu);
        if (!failure) failure = std::current_exception();
      }
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
  if (failure) std::rethrow_exception(failure);
}

// One result per policy of `o`, named and with a slot per seed, after refusing unknown policy names
// (MakePolicy throws) before anything runs.
template <typename Results>
std::vector<Results> ResultsPerPolicy(const ExperimentOptions& o, const TargetWorkloads& targets) {
  for (const std::string& p : o.policies) MakePolicy(p, targets);
  std::vector<Results> out(o.policies.size());
  for (size_t p = 0; p < o.policies.size(); ++p) {
    out[p].policy = o.policies[p];
    out[p].per_seed.resize(o.seeds);
  }
  return out;
}

}  // namespace

std::vector<PolicyCurves> RunExperiment(const std::vector<NodeSpec>& nodes,
                                        const std::vector<PodSpec>& pods,
                                        const ExperimentOptions& o) {
  const Cluster empty(nodes);
  const TargetWorkloads targets = TargetWorkloads::FromPods(empty, pods);
  auto out = ResultsPerPolicy<PolicyCurves>(o, targets);
  for (PolicyCurves& c : out) c.seconds_per_run.resize(o.seeds);
  RunEach(o, [&](size_t policy, int seed) {
    auto start = std::chrono::steady_clock::now();
    Simulation sim = Simulate(empty, pods, targets, o.policies[policy], o.first_seed + seed,
                              o.inflation, nullptr, o.scan_every_node);
    out[policy].seconds_per_run[seed] =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    out[policy].per_seed[seed] = Curve(sim, o.max_pct);
  });
  return out;
}

std::vector<PolicyChurn> RunDeparturesExperiment(const std::vector<NodeSpec>& nodes,
                                                 const std::vector<PodSpec>& pods,
                                                 const ExperimentOptions& o, double time_scale) {
  const Cluster empty(nodes);
  const TargetWorkloads targets = TargetWorkloads::FromPods(empty, pods);
  auto out = ResultsPerPolicy<PolicyChurn>(o, targets);
  RunEach(o, [&](size_t policy, int seed) {
    out[policy].per_seed[seed] =
        SimulateDepartures(empty, pods, targets, o.policies[policy], o.first_seed + seed,
                           time_scale, nullptr, o.scan_every_node);
  });
  return out;
}

}  // namespace gpumux::fleet
