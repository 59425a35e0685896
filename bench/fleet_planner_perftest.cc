// Planner speed on large fleets: 10,000 tenants (target: under 1 s on one core), ours against a
// plain per-tenant first-fit-decreasing over open GPUs (the textbook bin-packing baseline) on the
// same input. Counters report GPUs used, so speed is never bought with worse plans.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>

#include "core/catalog.h"
#include "share/fleet_planner.h"

namespace gpumux {
namespace {

const Catalog& TheCatalog() {
  static const Catalog c = Catalog::LoadBundled();
  return c;
}

// `tenants` tenants in realistic service classes: catalog models x batch x context x SLO, with
// counts drawn at random (`distinct` = every tenant its own class, the planner's worst case).
PlanInput MakeInput(int tenants, bool distinct) {
  const Catalog& c = TheCatalog();
  std::mt19937 rng(42);
  std::uniform_real_distribution<double> u(0, 1);
  PlanInput in;
  in.fleet = {{&c.FindGpu("H100-SXM5-80GB"), 1 << 20, 3.0},
              {&c.FindGpu("A100-80GB"), 1 << 20, 1.8},
              {&c.FindGpu("L40S"), 1 << 20, 1.4}};
  const char* models[] = {"Llama-3-8B",  "Llama-2-13B",  "Mistral-7B",   "Qwen2.5-7B",
                          "Qwen2.5-14B", "Qwen2.5-1.5B", "Qwen2.5-0.5B", "Llama-2-7B"};
  int left = tenants;
  while (left > 0) {
    LlmSpec spec;
    spec.shape = &c.FindModel(models[rng() % 8]);
    spec.batch = 1 << (rng() % 4);
    spec.context = 512 << (rng() % 4);
    spec.bandwidth_efficiency = distinct ? 0.4 + 0.5 * u(rng) : 0.5 + 0.1 * (rng() % 3);
    Tenant t{"svc" + std::to_string(in.classes.size()), LlmDecode(spec), {}};
    if (rng() % 2) {
      t.slo.min_rate = distinct ? 5 + 30 * u(rng) : 10.0 * (1 + rng() % 3);
    } else {
      t.slo.max_slowdown = distinct ? 1.5 + 3 * u(rng) : 2 + rng() % 3;
    }
    int count = distinct ? 1 : std::min(left, 1 + int(rng() % 400));
    in.classes.push_back({t, count});
    left -= count;
  }
  return in;
}

// Baseline: each tenant, largest first, goes to the first open GPU where it still fits, else opens
// a GPU of the first kind that holds it.
int PerTenantFirstFit(const PlanInput& in) {
  struct Bin {
    size_t kind;
    std::vector<const TenantLoad*> loads;
  };
  std::vector<std::vector<TenantLoad>> loads(in.classes.size());
  std::vector<std::pair<double, size_t>> order;
  for (size_t c = 0; c < in.classes.size(); ++c) {
    for (const FleetEntry& f : in.fleet) loads[c].push_back(MakeLoad(in.classes[c].tenant, *f.gpu));
    for (int i = 0; i < in.classes[c].count; ++i) order.push_back({loads[c][0].memory, c});
  }
  std::sort(order.rbegin(), order.rend());
  std::vector<Bin> bins;
  for (auto [memory, c] : order) {
    bool placed = false;
    for (Bin& b : bins) {
      b.loads.push_back(&loads[c][b.kind]);
      if (FitsAny(*in.fleet[b.kind].gpu, b.loads)) {
        placed = true;
        break;
      }
      b.loads.pop_back();
    }
    for (size_t k = 0; !placed && k < in.fleet.size(); ++k) {
      const TenantLoad* l = &loads[c][k];
      if (FitsAny(*in.fleet[k].gpu, std::span(&l, 1))) {
        bins.push_back({k, {l}});
        placed = true;
      }
    }
  }
  return int(bins.size());
}

void BM_PlanFleet(benchmark::State& state) {
  PlanInput in = MakeInput(int(state.range(0)), state.range(1) != 0);
  Plan plan;
  for (auto _ : state) {
    plan = PlanFleet(in);
    benchmark::DoNotOptimize(plan);
  }
  state.counters["gpus"] = plan.shared.gpus;
  state.counters["baseline_gpus"] = plan.baseline.gpus;
  state.counters["classes"] = double(in.classes.size());
}
BENCHMARK(BM_PlanFleet)
    ->Args({10000, 0})
    ->Args({10000, 1})
    ->Args({2000, 0})
    ->Unit(benchmark::kMillisecond);

void BM_PerTenantFirstFit(benchmark::State& state) {
  PlanInput in = MakeInput(int(state.range(0)), state.range(1) != 0);
  int gpus = 0;
  for (auto _ : state) {
    gpus = PerTenantFirstFit(in);
    benchmark::DoNotOptimize(gpus);
  }
  state.counters["gpus"] = gpus;
}
BENCHMARK(BM_PerTenantFirstFit)->Args({2000, 0})->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace gpumux
