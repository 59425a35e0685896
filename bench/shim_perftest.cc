// Added cost of the shim per allocation: cuMemAlloc_v2 + cuMemFree_v2 through libgpumux.so (quota
// reserved and released in the shared ledger) against the same pair on the simulated driver
// directly, in one run. Target from the issue: <= 100 ns added per allocation.
// The shim is dlopen'ed locally, so this process's own calls still reach the driver directly.
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "node/ledger/ledger.h"
#include "simgpu/cuda_types.h"

extern "C" {
CUresult cuInit(unsigned int);
CUresult cuMemAlloc_v2(CUdeviceptr*, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
}

namespace {

using AllocFn = CUresult (*)(CUdeviceptr*, size_t);
using FreeFn = CUresult (*)(CUdeviceptr);

struct Setup {
  AllocFn shim_alloc = nullptr;
  FreeFn shim_free = nullptr;
  Setup() {
    std::string dir = std::filesystem::temp_directory_path() / ("gpumux_bench_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    setenv("GPUMUX_SIM_MEMORY", std::to_string(80ull << 30).c_str(), 1);
    setenv("GPUMUX_SIM_STATE", (dir + "/sim.state").c_str(), 1);
    std::string ledger = dir + "/gpu0.ledger";
    gpumux::node::Ledger::CreateOrOpen(ledger, 80ull << 30, "bench").AddTenant("bench", {40ull << 30});
    setenv("GPUMUX_LEDGER", ledger.c_str(), 1);
    setenv("GPUMUX_TENANT", "bench", 1);
    cuInit(0);
    void* shim = dlopen(GPUMUX_SHIM, RTLD_NOW | RTLD_LOCAL);
    if (shim) {
      shim_alloc = reinterpret_cast<AllocFn>(dlsym(shim, "cuMemAlloc_v2"));
      shim_free = reinterpret_cast<FreeFn>(dlsym(shim, "cuMemFree_v2"));
    }
  }
};

Setup& S() {
  static Setup s;
  return s;
}

void BM_AllocFree_Driver(benchmark::State& state) {
  S();
  for (auto _ : state) {
    CUdeviceptr p;
    cuMemAlloc_v2(&p, 1 << 20);
    cuMemFree_v2(p);
  }
}
BENCHMARK(BM_AllocFree_Driver);

void BM_AllocFree_Shim(benchmark::State& state) {
  Setup& s = S();
  if (!s.shim_alloc) {
    state.SkipWithError("libgpumux.so not found");
    return;
  }
  for (auto _ : state) {
    CUdeviceptr p;
    s.shim_alloc(&p, 1 << 20);
    s.shim_free(p);
  }
}
BENCHMARK(BM_AllocFree_Shim);

}  // namespace

BENCHMARK_MAIN();
