// Cost of one tick of a tenant process's compute governor (Ledger::ComputeTick: who wants the GPU,
// the water-filled division, the token bucket), which every tenant process runs once a millisecond.
// 8 tenants on the GPU, all wanting it.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "node/ledger/ledger.h"

namespace {

void BM_ComputeTick(benchmark::State& state) {
  using namespace gpumux::node;
  std::string path =
      std::filesystem::temp_directory_path() / ("gpumux_tick_bench_" + std::to_string(getpid()));
  Ledger ledger = Ledger::CreateOrOpen(path, 80ull << 30, "bench");
  int first = -1;
  for (int t = 0; t < 8; ++t) {
    int process = ledger.RegisterProcess(
        ledger.AddTenant("t" + std::to_string(t), {1ull << 30, 100u * (t + 1), 1}));
    if (first < 0) first = process;
  }
  uint64_t now = 1'000'000'000;
  for (auto _ : state) {
    now += 1'000'000;
    benchmark::DoNotOptimize(ledger.ComputeTick(first, now, 500'000, true));
  }
  std::filesystem::remove(path);
}
BENCHMARK(BM_ComputeTick);

}  // namespace
