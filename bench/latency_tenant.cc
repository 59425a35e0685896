// A tenant program for bench/tail_latency.sh and bench/priority_mixes.py, written against the
// driver API only. Runs from START_NS (CLOCK_MONOTONIC) for SECONDS and prints one JSON line.
//   latency_tenant hp START_NS SECONDS PERIOD_MS KERNELS KERNEL_US [PATTERN [JITTER_MS [SEED]]]
//       an inference-like server: every PERIOD_MS (each step's start moved by up to ±JITTER_MS,
//       uniform, seeded; "A/B": every A ms for the first half of the run, then every B ms, a new
//       request rate) a step of KERNELS kernels of KERNEL_US each, sent as PATTERN:
//         each     each kernel synchronised (as an eager decode step's layers are; the default)
//         step     all launched back to back on one stream, then one cuStreamSynchronize (a
//                  compiled server: the whole step reaches the device at once)
//         graph    one launch of a graph captured from the step's kernels, then one synchronise
//         streamsN the kernels dealt round robin over N streams, then cuCtxSynchronize
//       Reports step latency p50/p99 over the steps after the first second but for the second
//       after a change (a server's steady state: gpumux learns a tenant's rhythm from its first
//       bursts and follows a new rate within a few; both seconds are reported apart) from the
//       step's planned start to
//       its synchronise's return ("latency_ms"), its on-device latency from events recorded around
//       the step ("device_ms"), the steps of the first second ("first_ms") and of the second
//       after a change of rate ("after_change_ms") apart, and the GPU time its kernels took
//   latency_tenant be START_NS SECONDS MIN_MS MAX_MS SEED [SYNC_EVERY]
//       a training-like job: kernels of MIN_MS..MAX_MS (uniform, seeded) back to back; SYNC_EVERY 0
//       (the default) keeps two queued (waiting on the older's event), n launches n then
//       synchronises the stream; reports the GPU time of the kernels that completed in the window
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

namespace {

constexpr uint64_t kFirstNs = 1'000'000'000;  // the first second, and the second after a change

void PrintList(const char* name, const std::vector<double>& v) {
  std::printf(", \"%s\": [", name);
  for (size_t i = 0; i < v.size(); ++i) std::printf("%s%.3f", i ? ", " : "", v[i]);
  std::printf("]");
}

}  // namespace

int main(int argc, char** argv) {
  const std::string role = argc > 1 ? argv[1] : "";
  if (!((role == "hp" && argc >= 7 && argc <= 10) || (role == "be" && argc >= 7 && argc <= 8))) {
    std::fprintf(stderr,
                 "usage: latency_tenant hp START_NS SECONDS PERIOD_MS KERNELS KERNEL_US "
                 "[each|step|graph|streamsN [JITTER_MS [SEED]]]\n"
                 "       latency_tenant be START_NS SECONDS MIN_MS MAX_MS SEED [SYNC_EVERY]\n");
    return 2;
  }
  const bool hp = role == "hp";
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
  auto launch = [&](CUfunction f, CUstream s) {
    return cuLaunchKernel(f, 132, 1, 1, 128, 1, 1, 0, s, nullptr, nullptr);
  };

  if (hp) {
    const std::string periods = argv[4];
    const uint64_t period = uint64_t(std::atof(periods.c_str()) * 1e6);
    const size_t slash = periods.find('/');
    const uint64_t new_period = slash == std::string::npos
                                    ? period
                                    : uint64_t(std::atof(periods.c_str() + slash + 1) * 1e6);
    const uint64_t change = new_period == period ? end : start + (end - start) / 2;
    if (period == 0 || new_period == 0) return ReportFailure("PERIOD_MS: expected A or A/B", 0);
    const int kernels = std::atoi(argv[5]);
    const double kernel_us = std::atof(argv[6]);
    const std::string pattern = argc > 7 ? argv[7] : "each";
    const double jitter_ms = argc > 8 ? std::atof(argv[8]) : 0;
    std::mt19937 rng(uint32_t(argc > 9 ? std::atoi(argv[9]) : 1));
    std::uniform_real_distribution<double> jitter(-jitter_ms, jitter_ms);
    int streams = 1;
    if (pattern.rfind("streams", 0) == 0)
      streams = std::max(1, std::atoi(pattern.c_str() + 7));
    else if (pattern != "each" && pattern != "step" && pattern != "graph")
      return ReportFailure(("unknown launch pattern '" + pattern + "'").c_str(), 0);
    CUfunction f = function("k0");
    std::vector<CUstream> lanes{stream};
    while (int(lanes.size()) < streams) {
      CUstream s;
      if (CUresult r = cuStreamCreate(&s, 0)) return ReportFailure("cuStreamCreate", r);
      lanes.push_back(s);
    }
    CUgraphExec step_graph = nullptr;
    if (pattern == "graph") {
      CUgraph graph;
      if (CUresult r = cuStreamBeginCapture_v2(stream, 0)) return ReportFailure("capture", r);
      for (int k = 0; k < kernels; ++k) launch(f, stream);
      if (CUresult r = cuStreamEndCapture(stream, &graph)) return ReportFailure("capture", r);
      if (CUresult r = cuGraphInstantiateWithFlags(&step_graph, graph, 0))
        return ReportFailure("cuGraphInstantiateWithFlags", r);
    }
    CUevent before, after;
    cuEventCreate(&before, 0);
    cuEventCreate(&after, 0);
    SleepUntilNs(start);
    std::vector<double> latency_ms, device_ms, first_ms, after_change_ms, start_ms;
    size_t steps = 0;
    for (uint64_t planned = start; planned + period <= end;
         planned += planned < change ? period : new_period) {
      const uint64_t step = uint64_t(std::max(double(start), double(planned) + jitter(rng) * 1e6));
      SleepUntilNs(step);
      cuEventRecord(before, stream);
      for (int k = 0; k < kernels && !step_graph; ++k) {
        CUstream s = lanes[size_t(k % streams)];
        if (CUresult r = launch(f, s)) return ReportFailure("cuLaunchKernel", r);
        if (pattern == "each") cuStreamSynchronize(s);
      }
      if (step_graph) {
        if (CUresult r = cuGraphLaunch(step_graph, stream))
          return ReportFailure("cuGraphLaunch", r);
      }
      if (streams > 1) {
        // The step is over when every lane is: the event after it waits for them all.
        cuCtxSynchronize();
      }
      cuEventRecord(after, stream);
      cuStreamSynchronize(stream);
      const double ms = double(NowNs() - std::min(step, NowNs())) / 1e6;
      float on_device = 0;
      cuEventElapsedTime(&on_device, before, after);
      ++steps;
      if (step < start + kFirstNs) first_ms.push_back(ms);
      const bool settling = step >= change && step < change + kFirstNs;
      if (settling) after_change_ms.push_back(ms);
      start_ms.push_back(double(step - start) / 1e6);
      if (step >= start + kFirstNs && !settling) {
        latency_ms.push_back(ms);
        device_ms.push_back(on_device);
      }
    }
    const double gpu_s = double(steps) * kernels * kernel_us / 1e6;
    std::printf(
        "{\"steps\": %zu, \"p50_ms\": %.3f, \"p99_ms\": %.3f, \"device_p99_ms\": %.3f, "
        "\"gpu_share\": %.4f",
        steps, Percentile(latency_ms, 0.5), Percentile(latency_ms, 0.99),
        Percentile(device_ms, 0.99), gpu_s / (double(end - start) / 1e9));
    PrintList("latency_ms", latency_ms);  // every step's, for pooling runs
    PrintList("device_ms", device_ms);
    PrintList("first_ms", first_ms);
    PrintList("after_change_ms", after_change_ms);
    PrintList("start_ms", start_ms);  // each step's start, from START_NS (jitter included)
    std::printf("}\n");
    return 0;
  }

  const int sync_every = argc > 7 ? std::atoi(argv[7]) : 0;
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
    CUresult r = launch(kernel[size_t(k.ms)], stream);
    cuEventRecord(k.done, stream);
    queue.push_back(k);
    return r;
  };
  SleepUntilNs(start);
  double gpu_ms = 0;
  auto retire = [&] {  // the oldest kernel, once done
    cuEventSynchronize(queue.front().done);
    if (NowNs() <= end) gpu_ms += queue.front().ms;
    cuEventDestroy_v2(queue.front().done);
    queue.erase(queue.begin());
  };
  if (sync_every <= 0) {
    push();
    push();
    while (NowNs() < end) {
      retire();
      if (CUresult r = push()) return ReportFailure("cuLaunchKernel", r);
    }
  } else {
    while (NowNs() < end) {
      for (int k = 0; k < sync_every; ++k)
        if (CUresult r = push()) return ReportFailure("cuLaunchKernel", r);
      cuStreamSynchronize(stream);
      while (!queue.empty()) retire();
    }
  }
  std::printf("{\"gpu_share\": %.4f}\n", gpu_ms / 1e3 / (double(end - start) / 1e9));
  return 0;
}
