// A tenant program for bench/tail_latency.sh, written against the driver API only. Runs from
// START_NS (CLOCK_MONOTONIC) for SECONDS and prints one JSON line.
//   latency_tenant hp START_NS SECONDS PERIOD_MS KERNELS KERNEL_US
//       an inference-like server: every PERIOD_MS a step of KERNELS kernels of KERNEL_US each, each
//       one synchronised (as a decode step's layers are); reports step latency p50/p99 (from the
//       step's start to its last kernel's completion) over the steps after the first 0.5 s (a
//       server's steady state: gpumux learns a tenant's rhythm from its first bursts), and the
//       GPU time its kernels took
//   latency_tenant be START_NS SECONDS MIN_MS MAX_MS SEED
//       a training-like job: kernels of MIN_MS..MAX_MS (uniform, seeded) back to back, two queued;
//       reports the GPU time of the kernels that completed in the window
// Kernels are bandwidth-bound simulated kernels of the given durations (GPUMUX_SIM_BANDWIDTH).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "abi/client_failure.h"
#include "abi/driver_api.h"
#include "abi/primary_context.h"
#include "base/clock.h"
#include "percentile.h"

using gpumux::NowNs;
using gpumux::SleepUntilNs;
using gpumux::bench::Percentile;
using gpumux::cuda::ReportFailure;


int main(int argc, char** argv) {
  if (argc != 7 || (std::string(argv[1]) != "hp" && std::string(argv[1]) != "be")) {
    std::fprintf(stderr,
                 "usage: latency_tenant hp START_NS SECONDS PERIOD_MS KERNELS KERNEL_US\n"
                 "       latency_tenant be START_NS SECONDS MIN_MS MAX_MS SEED\n");
    return 2;
  }
  const bool hp = std::string(argv[1]) == "hp";
  const uint64_t start = std::strtoull(argv[2], nullptr, 10);
  const uint64_t end = start + uint64_t(std::atof(argv[3]) * 1e9);
  const char* bandwidth = std::getenv("GPUMUX_SIM_BANDWIDTH");
  if (!bandwidth)
    return ReportFailure("GPUMUX_SIM_BANDWIDTH is not set (run under gpumux run --sim)", 0);
  auto bytes_for_us = [&](double us) { return std::to_string(std::atof(bandwidth) * us / 1e6); };
  // hp: one kernel "k0"; be: "k1".."kMAX" of 1..MAX ms.
  std::string image = "gpumux-sim-module 1\n";
  int min_ms = std::atoi(argv[4]), max_ms = std::atoi(argv[5]);
  if (hp) {
    image += "kernel k0 bytes=" + bytes_for_us(std::atof(argv[6])) + " flops=0\n";
  } else {
    for (int ms = min_ms; ms <= max_ms; ++ms)
      image +=
          "kernel k" + std::to_string(ms) + " bytes=" + bytes_for_us(ms * 1000.0) + " flops=0\n";
  }
  if (CUresult r = gpumux::cuda::UsePrimaryContext()) return ReportFailure("context", r);
  CUmodule module;
  if (CUresult r = cuModuleLoadData(&module, image.c_str()))
    return ReportFailure("cuModuleLoadData", r);
  CUstream stream;
  if (CUresult r = cuStreamCreate(&stream, 0)) return ReportFailure("cuStreamCreate", r);
  auto function = [&](const std::string& name) {
    CUfunction f = nullptr;
    cuModuleGetFunction(&f, module, name.c_str());
    return f;
  };
  auto launch = [&](CUfunction f) {
    return cuLaunchKernel(f, 132, 1, 1, 128, 1, 1, 0, stream, nullptr, nullptr);
  };
  SleepUntilNs(start);

  if (hp) {
    const uint64_t period = uint64_t(std::atof(argv[4]) * 1e6);
    const int kernels = std::atoi(argv[5]);
    const double kernel_us = std::atof(argv[6]);
    CUfunction f = function("k0");
    constexpr uint64_t kWarmUpNs = 500'000'000;
    std::vector<double> latency_ms;
    size_t steps = 0;
    for (uint64_t step = start; step + period <= end; step += period) {
      SleepUntilNs(step);
      uint64_t began = NowNs();
      for (int k = 0; k < kernels; ++k) {
        if (CUresult r = launch(f)) return ReportFailure("cuLaunchKernel", r);
        cuStreamSynchronize(stream);
      }
      ++steps;
      if (step >= start + kWarmUpNs) latency_ms.push_back(double(NowNs() - began) / 1e6);
    }
    double gpu_s = double(steps) * kernels * kernel_us / 1e6;
    std::printf("{\"steps\": %zu, \"p50_ms\": %.3f, \"p99_ms\": %.3f, \"gpu_share\": %.4f, ",
                steps, Percentile(latency_ms, 0.5), Percentile(latency_ms, 0.99),
                gpu_s / (double(end - start) / 1e9));
    std::printf("\"latency_ms\": [");  // every step's, for pooling runs
    for (size_t i = 0; i < latency_ms.size(); ++i) std::printf("%s%.3f", i ? ", " : "", latency_ms[i]);
    std::printf("]}\n");
    return 0;
  }

  std::mt19937 rng(uint32_t(std::atoi(argv[6])));
  std::uniform_int_distribution<int> pick(min_ms, max_ms);
  std::vector<CUfunction> kernel(size_t(max_ms + 1));
  for (int ms = min_ms; ms <= max_ms; ++ms) kernel[size_t(ms)] = function("k" + std::to_string(ms));
  struct InFlight {
    CUevent done;
    int ms;
  };
  std::vector<InFlight> queue;
  auto push = [&] {
    InFlight k{nullptr, pick(rng)};
    cuEventCreate(&k.done, 0);
    CUresult r = launch(kernel[size_t(k.ms)]);
    cuEventRecord(k.done, stream);
    queue.push_back(k);
    return r;
  };
  double gpu_ms = 0;
  push();
  push();
  while (NowNs() < end) {
    cuEventSynchronize(queue.front().done);
    if (NowNs() <= end) gpu_ms += queue.front().ms;
    cuEventDestroy_v2(queue.front().done);
    queue.erase(queue.begin());
    if (CUresult r = push()) return ReportFailure("cuLaunchKernel", r);
  }
  std::printf("{\"gpu_share\": %.4f}\n", gpu_ms / 1e3 / (double(end - start) / 1e9));
  return 0;
}
