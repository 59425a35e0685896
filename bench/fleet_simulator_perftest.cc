// Placement speed of the trace simulator: one full experiment (one policy, one seed, the openb
// default trace: ~10.8k pods on 1213 nodes) per iteration, reported as placements per second, with
// BestFit (the cheapest scoring policy) as the baseline to take ratios against in one run.
// Target: FGD under 2 s per experiment on one core (the artifact's Go simulator takes ~10 minutes).
#include <benchmark/benchmark.h>

#include <filesystem>

#include "fleet/experiment.h"
#include "fleet/simulator.h"

namespace gpumux::fleet {
namespace {

struct Trace {
  std::vector<NodeSpec> nodes;
  std::vector<PodSpec> pods;
};

const Trace* DefaultTrace() {
  static const Trace* trace = []() -> const Trace* {
    std::string dir = std::string(GPUMUX_SOURCE_DIR) + "/traces/openb-v2023";
    if (!std::filesystem::exists(dir + "/openb_pod_list_default.csv")) return nullptr;
    return new Trace{LoadNodes(dir + "/openb_node_list_gpu_node.csv"),
                     LoadPods(dir + "/openb_pod_list_default.csv")};
  }();
  return trace;
}

void BM_Experiment(benchmark::State& state, const char* policy) {
  const Trace* trace = DefaultTrace();
  if (!trace) {
    state.SkipWithError("traces/openb-v2023 not found in the source tree");
    return;
  }
  Cluster empty(trace->nodes);
  TargetWorkloads target = TargetWorkloads::FromPods(empty, trace->pods);
  size_t pods = 0;
  uint64_t seed = 42;
  for (auto _ : state) {
    Simulation sim = Simulate(empty, trace->pods, target, policy, seed++, 1.3);
    pods += sim.rows.size();
    benchmark::DoNotOptimize(sim);
  }
  state.counters["placements_per_s"] =
      benchmark::Counter(double(pods), benchmark::Counter::kIsRate);
}
BENCHMARK_CAPTURE(BM_Experiment, bestfit, "bestfit")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Experiment, fgd, "fgd")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Experiment, gpumux, "gpumux")->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace gpumux::fleet

BENCHMARK_MAIN();
