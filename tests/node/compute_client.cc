// A tenant program for the runtime's compute tests: it loads a simulated module with one kernel of
// a given duration, launches it by one of the driver's launch paths, and prints one JSON line.
//   compute_client PATH busy START_NS SECONDS KERNEL_MS
//       keep two kernels queued from START_NS (CLOCK_MONOTONIC) for SECONDS, as a busy server does;
//       report the share of GPU time its kernels that completed in the window occupied
//   compute_client PATH latency START_NS SECONDS KERNEL_MS GAP_MS
//       launch, wait, pause GAP_MS, repeat; report the mean and p50 time from launch to completion,
//       and each one in order (`latencies_ms`)
//   compute_client PATH step START_NS SECONDS KERNEL_MS KERNELS PERIOD_MS
//       every PERIOD_MS a step of KERNELS kernels launched back to back (graph: one launch of a
//       graph holding them all, captured at start, long before the first step), then one
//       cuStreamSynchronize, as a compiled inference server sends its step; report the mean and
//       p50 time from the step's planned start to its synchronise's return, and every step's time
//       in the order planned (`latencies_ms`)
//   compute_client graphmem BYTES
//       instantiate a graph holding a BYTES memory node; report the driver's answer
// PATH: launch (cuLaunchKernel), ex (cuLaunchKernelEx), coop (cuLaunchCooperativeKernel), graph
// (a captured launch replayed by cuGraphLaunch), ptsz (cuLaunchKernel resolved by cuGetProcAddress
// with the per-thread-default-stream flag). It runs on device 0 of those it sees, or on the one
// COMPUTE_CLIENT_DEVICE names.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "abi/client_failure.h"
#include "abi/driver_api.h"
#include "abi/primary_context.h"
#include "base/clock.h"

using gpumux::NowNs;
using gpumux::SleepUntilNs;
using gpumux::cuda::ReportFailure;

namespace {

// Launches the kernel once by `path` on `stream` (graphs: replays `exec`).
CUresult LaunchOnce(const std::string& path, CUfunction f, CUstream stream, CUgraphExec exec) {
  static auto ptsz = [] {
    void* fn = nullptr;
    cuGetProcAddress("cuLaunchKernel", &fn, 12000,
                     /*CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM=*/2);
    return reinterpret_cast<decltype(&cuLaunchKernel)>(fn);
  }();
  if (path == "launch") return cuLaunchKernel(f, 132, 1, 1, 128, 1, 1, 0, stream, nullptr, nullptr);
  if (path == "ex") {
    CUlaunchConfig config{132, 1, 1, 128, 1, 1, 0, stream, nullptr, 0};
    return cuLaunchKernelEx(&config, f, nullptr, nullptr);
  }
  if (path == "coop") return cuLaunchCooperativeKernel(f, 132, 1, 1, 128, 1, 1, 0, stream, nullptr);
  if (path == "graph") return cuGraphLaunch(exec, stream);
  if (path == "ptsz")
    return ptsz ? ptsz(f, 132, 1, 1, 128, 1, 1, 0, stream, nullptr, nullptr) : 500;
  return 1;
}

int GraphMemory(size_t bytes) {
  CUgraph graph;
  CUgraphNode node;
  CUDA_MEM_ALLOC_NODE_PARAMS params{};
  params.bytesize = bytes;
  if (CUresult r = cuGraphCreate(&graph, 0)) return ReportFailure("cuGraphCreate", r);
  if (CUresult r = cuGraphAddMemAllocNode(&node, graph, nullptr, 0, &params))
    return ReportFailure("cuGraphAddMemAllocNode", r);
  CUgraphExec exec = nullptr;
  CUresult r = cuGraphInstantiateWithFlags(&exec, graph, 0);
  size_t free_bytes = 0, total = 0;
  cuMemGetInfo_v2(&free_bytes, &total);
  std::printf("{\"instantiate\": %d, \"free_while_instantiated\": %zu, \"total\": %zu}\n", r,
              free_bytes, total);
  if (r == 0) cuGraphExecDestroy(exec);
  cuGraphDestroy(graph);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  if (CUresult r = cuInit(0)) return ReportFailure("cuInit", r);
  const char* device = std::getenv("COMPUTE_CLIENT_DEVICE");
  if (CUresult r = gpumux::cuda::UsePrimaryContext(device ? std::atoi(device) : 0))
    return ReportFailure("the primary context", r);
  std::string path = argv[1];
  if (path == "graphmem") return GraphMemory(std::strtoull(argv[2], nullptr, 10));
  if (argc < 6) return 2;
  std::string mode = argv[2];
  uint64_t start = std::strtoull(argv[3], nullptr, 10);
  uint64_t window = uint64_t(std::atof(argv[4]) * 1e9);
  double kernel_ms = std::atof(argv[5]);
  double gap_ms = argc > 6 ? std::atof(argv[6]) : 0;
  const int step_kernels = mode == "step" && argc > 6 ? std::max(1, std::atoi(argv[6])) : 1;
  const uint64_t period_ns = mode == "step" && argc > 7 ? uint64_t(std::atof(argv[7]) * 1e6) : 0;
  if (mode == "step" && period_ns == 0) return 2;

  // A bandwidth-bound kernel that runs kernel_ms on this device.
  const char* bandwidth = std::getenv("GPUMUX_SIM_BANDWIDTH");
  if (!bandwidth)
    return ReportFailure("GPUMUX_SIM_BANDWIDTH is not set (run under gpumux run --sim)", 0);
  std::string image = "gpumux-sim-module 1\nkernel step bytes=" +
                      std::to_string(std::atof(bandwidth) * kernel_ms / 1e3) + " flops=0\n";
  CUmodule module;
  CUfunction f;
  CUstream stream;
  if (CUresult r = cuModuleLoadData(&module, image.c_str()))
    return ReportFailure("cuModuleLoadData", r);
  if (CUresult r = cuModuleGetFunction(&f, module, "step"))
    return ReportFailure("cuModuleGetFunction", r);
  if (CUresult r = cuStreamCreate(&stream, 0)) return ReportFailure("cuStreamCreate", r);
  CUgraphExec exec = nullptr;
  CUgraph graph = nullptr;
  if (path == "graph") {
    cuStreamBeginCapture_v2(stream, 0);
    for (int k = 0; k < step_kernels; ++k)
      cuLaunchKernel(f, 132, 1, 1, 128, 1, 1, 0, stream, nullptr, nullptr);
    if (CUresult r = cuStreamEndCapture(stream, &graph))
      return ReportFailure("cuStreamEndCapture", r);
    if (CUresult r = cuGraphInstantiateWithFlags(&exec, graph, 0))
      return ReportFailure("cuGraphInstantiate", r);
  }

  SleepUntilNs(start);
  uint64_t end = start + window, busy_ns = 0;
  std::vector<double> latencies_ms;
  long launches = 0;
  CUevent done[2];
  cuEventCreate(&done[0], 0);
  cuEventCreate(&done[1], 0);
  if (mode == "busy") {
    for (long i = 0;; ++i) {
      if (CUresult r = LaunchOnce(path, f, stream, exec)) return ReportFailure("launch", r);
      cuEventRecord(done[i % 2], stream);
      if (i == 0) continue;
      cuEventSynchronize(done[(i - 1) % 2]);  // the previous kernel; this one stays queued
      if (NowNs() > end) break;
      ++launches;
      busy_ns += uint64_t(kernel_ms * 1e6);
    }
  }
  while (mode == "latency" && NowNs() < end) {
    uint64_t t0 = NowNs();
    if (CUresult r = LaunchOnce(path, f, stream, exec)) return ReportFailure("launch", r);
    cuStreamSynchronize(stream);
    uint64_t t1 = NowNs();
    if (t1 > end) break;  // finished after the window: not counted
    ++launches;
    busy_ns += uint64_t(kernel_ms * 1e6);
    latencies_ms.push_back(double(t1 - t0) / 1e6);
    if (gap_ms > 0) SleepUntilNs(t1 + uint64_t(gap_ms * 1e6));
  }
  for (uint64_t planned = start; mode == "step" && planned + period_ns <= end;
       planned += period_ns) {
    SleepUntilNs(planned);
    for (int k = 0; k < (path == "graph" ? 1 : step_kernels); ++k)
      if (CUresult r = LaunchOnce(path, f, stream, exec)) return ReportFailure("launch", r);
    cuStreamSynchronize(stream);
    ++launches;
    busy_ns += uint64_t(kernel_ms * 1e6) * uint64_t(step_kernels);
    latencies_ms.push_back(double(NowNs() - planned) / 1e6);
  }
  std::string in_order;
  for (double l : latencies_ms) in_order += (in_order.empty() ? "" : ", ") + std::to_string(l);
  double mean = 0;
  for (double l : latencies_ms) mean += l / double(std::max<size_t>(1, latencies_ms.size()));
  std::sort(latencies_ms.begin(), latencies_ms.end());
  double p50 = latencies_ms.empty() ? 0 : latencies_ms[latencies_ms.size() / 2];
  std::printf(
      "{\"launches\": %ld, \"gpu_share\": %.4f, \"mean_latency_ms\": %.4f, \"p50_latency_ms\": "
      "%.4f%s}\n",
      launches, double(busy_ns) / double(window), mean, p50,
      mode != "busy" ? (", \"latencies_ms\": [" + in_order + "]").c_str() : "");
  std::fflush(stdout);
  cuStreamSynchronize(stream);
  for (CUevent e : done) cuEventDestroy_v2(e);
  if (exec) cuGraphExecDestroy(exec);
  if (graph) cuGraphDestroy(graph);
  cuStreamDestroy_v2(stream);
  cuModuleUnload(module);
  return 0;
}
