// The shim's allocation path under gpumuxd, where memory comes as grants
// (node/shim/memory_grant.h), beside the same calls with the ledger-reserving shim and without a
// shim (shim_perftest.cc), in one run:
//   BM_AllocFree_ShimGranted   cuMemAlloc_v2 + cuMemFree_v2 of 1 MiB within the process's credit:
//                              the path nearly every allocation takes (one compare-and-swap)
//   BM_GrantRoundTrip          one grant and its return over gpumuxd's socket: what a process
//                              pays once per 64 MiB batch of growth
// gpumuxd runs in this process (an Agent and its HttpServer on a thread, one simulated H100); the
// shim is a private copy of libgpumux.so, so that it starts in grant mode whatever the ledger-mode
// copy of shim_perftest.cc did.
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "abi/driver_api.h"
#include "abi/primary_context.h"
#include "alloc_free_loop.h"
#include "core/catalog.h"
#include "node/agent/agent.h"
#include "service/http_client.h"
#include "service/http_server.h"

namespace {

struct GrantSetup {
  std::unique_ptr<gpumux::agent::Agent> agent;
  gpumux::service::HttpServer server;
  std::thread serving;
  std::string socket;
  decltype(&cuMemAlloc_v2) alloc = nullptr;
  decltype(&cuMemFree_v2) free = nullptr;

  GrantSetup() {
    std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("gpumux_grant_bench_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    gpumux::Catalog catalog = gpumux::Catalog::LoadBundled();
    gpumux::agent::AgentConfig config;
    config.runtime_dir = (dir / "run").string();
    config.state_path = (dir / "state.db").string();
    config.bin_dir = dir.string();
    socket = (dir / "agent.sock").string();
    config.socket_path = socket;
    config.gpus.push_back(gpumux::node::SimulatedDevice(catalog.FindGpu("H100"), 0));
    agent = std::make_unique<gpumux::agent::Agent>(
        config, gpumux::agent::MakeSimulatedBackend(config.runtime_dir));
    server.ListenUnix(socket);
    serving =
        std::thread([this] { server.Serve([this](const auto& r) { return agent->Handle(r); }); });
    nlohmann::json admitted =
        nlohmann::json::parse(gpumux::service::CallUnix(socket, "POST", "/v1/tenants",
                                                      R"({"id":"bench","gpu":0,"memory":"40GiB"})")
                                  .second);
    // The private copy of the shim reads its environment when first called.
    for (auto& [k, v] : admitted["env"].items()) {
      if (k != "LD_PRELOAD" && k != "LD_LIBRARY_PATH")
        setenv(k.c_str(), v.get<std::string>().c_str(), 1);
    }
    std::string copy = (dir / "libgpumux-granted.so").string();
    std::filesystem::copy_file(GPUMUX_SHIM, copy,
                               std::filesystem::copy_options::overwrite_existing);
    cuInit(0);
    gpumux::cuda::UsePrimaryContext();  // as the runtime does before the first allocation
    dlopen(GPUMUX_SIM_NVML, RTLD_NOW | RTLD_GLOBAL);
    if (void* shim = dlopen(copy.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      alloc = reinterpret_cast<decltype(alloc)>(dlsym(shim, "cuMemAlloc_v2"));
      free = reinterpret_cast<decltype(free)>(dlsym(shim, "cuMemFree_v2"));
    }
  }
  ~GrantSetup() {
    server.Stop();
    serving.join();
  }
};

GrantSetup& G() {
  static GrantSetup g;
  return g;
}

void BM_AllocFree_ShimGranted(benchmark::State& state) {
  GrantSetup& g = G();
  gpumux::bench::AllocFreeLoop(state, g.alloc,
                               g.free);  // its first allocation takes the first grant
}
BENCHMARK(BM_AllocFree_ShimGranted);

void BM_GrantRoundTrip(benchmark::State& state) {
  GrantSetup& g = G();
  std::string take = R"({"tenant":"bench","bytes":67108864,"least":1})";
  std::string give = R"({"tenant":"bench","bytes":67108864})";
  for (auto _ : state) {
    gpumux::service::CallUnix(g.socket, "POST", "/v1/grants", take);
    gpumux::service::CallUnix(g.socket, "POST", "/v1/grants/return", give);
  }
}
BENCHMARK(BM_GrantRoundTrip)->Unit(benchmark::kMicrosecond);

}  // namespace
