// The simulated driver's execution side: modules and kernels, streams, events, launches (plain, Ex,
// cooperative, per-thread-stream variants), copies and memsets, and graphs (stream capture, kernel
// and memory nodes, instantiation, launch). Work runs on the shared device timeline
// of its stream's device (sim_state.h: Execute) for its roofline duration (sim_kernel.h);
// synchronising calls sleep until the simulated work is done, so wall-clock time behaves as on a
// real GPU. Buffer contents are not simulated: copies take time and device-to-host copies write
// zeros.
#include <atomic>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "abi/driver_api.h"
#include "base/clock.h"
#include "simgpu/sim_context.h"
#include "simgpu/sim_kernel.h"
#include "simgpu/sim_state.h"

using namespace gpumux::cuda;
using gpumux::NowNs;
using gpumux::sim::Completion;
using gpumux::sim::Device;
using gpumux::sim::SimDevice;

namespace {

// A launch waits while its stream already holds this much queued work, as a real launch blocks when
// the driver's command queue is full (~1k launches); bounding it in time keeps one process from
// booking the device far ahead of the others.
constexpr uint64_t kMaxQueuedNs = 16'000'000;
// Host <-> device copies: PCIe 4.0 x16 effective rate, an assumption (not per GPU kind).
constexpr double kHostLinkBytesPerSecond = 25e9;

struct SimFunction {
  gpumux::sim::KernelSpec spec;
  uint64_t duration_ns;
};

struct SimModule {
  std::vector<SimFunction> functions;
};

struct SimGraph {
  std::mutex mu;
  std::vector<uint64_t> work_ns;  // kernel nodes, run one after another
  uint64_t memory_bytes = 0;      // memory allocation nodes
};

struct SimGraphExec {
  uint64_t duration_ns;
  uint64_t memory_bytes;
  int device;  // whose memory its memory nodes took
};

// A stream is of the device whose context was current when it was made; its work runs there.
struct SimStream {
  explicit SimStream(int ordinal) : device(ordinal) {}
  const int device;
  std::mutex mu;
  Completion tail;  // of the work queued on it
  std::atomic<SimGraph*> capture{nullptr};
  Completion Tail() {
    std::lock_guard<std::mutex> lock(mu);
    return tail;
  }
  void After(const Completion& c) {
    std::lock_guard<std::mutex> lock(mu);
    tail = gpumux::sim::Later(tail, c);
  }
};

struct SimEvent {
  std::mutex mu;
  bool recorded = false;
  Completion at;  // of the work queued before it
};

bool Ready() { return gpumux::sim::HasDevices(); }

// The device of the calling thread's current context (device 0 without one).
const SimDevice& CurrentDevice() {
  int ordinal = gpumux::sim::CurrentDeviceOrdinal();
  return Device(ordinal < 0 ? 0 : ordinal);
}

// The legacy (0x1) and per-thread (0x2) default-stream handles and null are the default stream of
// the current context's device.
SimStream* StreamOf(CUstream s) {
  static SimStream** default_streams = [] {
    auto** streams = new SimStream*[gpumux::sim::kMaxSimDevices];  // never destroyed
    for (int d = 0; d < gpumux::sim::kMaxSimDevices; ++d) streams[d] = new SimStream(d);
    return streams;
  }();
  auto raw = reinterpret_cast<uintptr_t>(s);
  return raw <= 2 ? default_streams[CurrentDevice().ordinal] : reinterpret_cast<SimStream*>(s);
}

// Queues `duration_ns` of work on `stream` (or records it in the graph the stream is capturing).
CUresult Submit(CUstream stream, uint64_t duration_ns) {
  if (!Ready()) return kErrorNotInitialized;
  if (!gpumux::sim::HasCurrentContext()) return kErrorInvalidContext;
  SimStream* s = StreamOf(stream);
  if (SimGraph* g = s->capture.load()) {
    std::lock_guard<std::mutex> lock(g->mu);
    g->work_ns.push_back(duration_ns);
    return kSuccess;
  }
  uint64_t now = NowNs();
  uint64_t tail = s->Tail().end_ns;
  if (tail > now + kMaxQueuedNs) gpumux::SleepUntilNsPrecisely(tail - kMaxQueuedNs), now = NowNs();
  s->After(gpumux::sim::Execute(Device(s->device), std::max(now, tail), duration_ns, kMaxQueuedNs));
  return kSuccess;
}

// Runs `duration_ns` of work on the default stream and waits for it (the synchronous copies).
CUresult SubmitAndWait(uint64_t duration_ns) {
  CUresult r = Submit(nullptr, duration_ns);
  if (r == kSuccess) gpumux::sim::WaitDone(StreamOf(nullptr)->Tail());
  return r;
}

uint64_t TransferNs(double bytes, double bytes_per_second) {
  return uint64_t(bytes / bytes_per_second * 1e9);
}
uint64_t DeviceNs(double bytes) { return TransferNs(bytes, CurrentDevice().state->bandwidth); }

Completion EventAt(CUevent event) {
  auto* e = reinterpret_cast<SimEvent*>(event);
  std::lock_guard<std::mutex> lock(e->mu);
  return e->at;
}

CUresult Launch(CUfunction f, CUstream stream) {
  if (!f) return kErrorInvalidHandle;
  return Submit(stream, reinterpret_cast<SimFunction*>(f)->duration_ns);
}

CUresult LoadModule(CUmodule* module, const std::string& image) {
  if (!Ready()) return kErrorNotInitialized;
  if (!gpumux::sim::HasCurrentContext()) return kErrorInvalidContext;
  if (!module) return kErrorInvalidValue;
  std::string error;
  auto kernels = gpumux::sim::ParseModuleImage(image, &error);
  if (!kernels) return kErrorInvalidImage;
  auto* m = new SimModule();
  const auto* s = CurrentDevice().state;
  for (const auto& k : *kernels)
    m->functions.push_back({k, gpumux::sim::KernelDurationNs(k, s->bandwidth, s->flops)});
  *module = reinterpret_cast<CUmodule>(m);
  return kSuccess;
}

}  // namespace

extern "C" {

CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  if (!image) return kErrorInvalidValue;
  return LoadModule(module, static_cast<const char*>(image));
}
CUresult cuModuleLoad(CUmodule* module, const char* path) {
  if (!path) return kErrorInvalidValue;
  std::ifstream in(path);
  if (!in) return kErrorFileNotFound;
  std::stringstream text;
  text << in.rdbuf();
  return LoadModule(module, text.str());
}
CUresult cuModuleUnload(CUmodule module) {
  if (!module) return kErrorInvalidHandle;
  delete reinterpret_cast<SimModule*>(module);
  return kSuccess;
}
CUresult cuModuleGetFunction(CUfunction* function, CUmodule module, const char* name) {
  if (!function || !name) return kErrorInvalidValue;
  if (!module) return kErrorInvalidHandle;
  for (SimFunction& f : reinterpret_cast<SimModule*>(module)->functions) {
    if (f.spec.name == name) {
      *function = reinterpret_cast<CUfunction>(&f);
      return kSuccess;
    }
  }
  return kErrorNotFound;
}

CUresult cuStreamCreate(CUstream* stream, unsigned int) {
  if (!Ready()) return kErrorNotInitialized;
  if (!gpumux::sim::HasCurrentContext()) return kErrorInvalidContext;
  if (!stream) return kErrorInvalidValue;
  *stream = reinterpret_cast<CUstream>(new SimStream(CurrentDevice().ordinal));
  return kSuccess;
}
CUresult cuStreamCreateWithPriority(CUstream* stream, unsigned int flags, int) {
  return cuStreamCreate(stream, flags);
}
CUresult cuStreamDestroy_v2(CUstream stream) {
  if (reinterpret_cast<uintptr_t>(stream) <= 2) return kErrorInvalidHandle;
  delete reinterpret_cast<SimStream*>(stream);
  return kSuccess;
}
CUresult cuStreamSynchronize(CUstream stream) {
  if (!Ready()) return kErrorNotInitialized;
  gpumux::sim::WaitDone(StreamOf(stream)->Tail());
  return kSuccess;
}
CUresult cuStreamQuery(CUstream stream) {
  if (!Ready()) return kErrorNotInitialized;
  return gpumux::sim::IsDone(StreamOf(stream)->Tail()) ? kSuccess : kErrorNotReady;
}
CUresult cuStreamWaitEvent(CUstream stream, CUevent event, unsigned int) {
  if (!event) return kErrorInvalidHandle;
  StreamOf(stream)->After(EventAt(event));
  return kSuccess;
}
CUresult cuCtxSynchronize() {
  if (!Ready()) return kErrorNotInitialized;
  gpumux::sim::WaitDone(gpumux::sim::ProcessTail(CurrentDevice()));
  return kSuccess;
}

CUresult cuEventCreate(CUevent* event, unsigned int) {
  if (!gpumux::sim::HasCurrentContext()) return kErrorInvalidContext;
  if (!event) return kErrorInvalidValue;
  *event = reinterpret_cast<CUevent>(new SimEvent());
  return kSuccess;
}
CUresult cuEventDestroy_v2(CUevent event) {
  if (!event) return kErrorInvalidHandle;
  delete reinterpret_cast<SimEvent*>(event);
  return kSuccess;
}
// An event completes when the work queued on its stream before it is done (at once if none).
CUresult cuEventRecord(CUevent event, CUstream stream) {
  if (!event) return kErrorInvalidHandle;
  auto* e = reinterpret_cast<SimEvent*>(event);
  Completion tail = StreamOf(stream)->Tail();
  uint64_t now = NowNs();
  // Work done before it was recorded: it completes when recorded (the schedule may no longer keep
  // when that work ended, only that it did).
  if (gpumux::sim::IsDone(tail)) tail = Completion{};
  tail.end_ns = std::max(tail.end_ns, now);  // no earlier than its recording
  std::lock_guard<std::mutex> lock(e->mu);
  e->at = tail;
  e->recorded = true;
  return kSuccess;
}
CUresult cuEventSynchronize(CUevent event) {
  if (!event) return kErrorInvalidHandle;
  gpumux::sim::WaitDone(EventAt(event));
  return kSuccess;
}
CUresult cuEventQuery(CUevent event) {
  if (!event) return kErrorInvalidHandle;
  return gpumux::sim::IsDone(EventAt(event)) ? kSuccess : kErrorNotReady;
}
CUresult cuEventElapsedTime(float* ms, CUevent start, CUevent end) {
  if (!ms) return kErrorInvalidValue;
  if (!start || !end) return kErrorInvalidHandle;
  for (CUevent e : {start, end}) {
    auto* event = reinterpret_cast<SimEvent*>(e);
    std::lock_guard<std::mutex> lock(event->mu);
    if (!event->recorded) return kErrorInvalidHandle;
  }
  Completion a = EventAt(start), b = EventAt(end);
  if (!gpumux::sim::IsDone(a) || !gpumux::sim::IsDone(b)) return kErrorNotReady;
  *ms = float((double(gpumux::sim::DoneAtNs(b)) - double(gpumux::sim::DoneAtNs(a))) / 1e6);
  return kSuccess;
}

CUresult cuLaunchKernel(CUfunction f, unsigned int, unsigned int, unsigned int, unsigned int,
                        unsigned int, unsigned int, unsigned int, CUstream stream, void**, void**) {
  return Launch(f, stream);
}
CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int, unsigned int, unsigned int, unsigned int,
                             unsigned int, unsigned int, unsigned int, CUstream stream, void**,
                             void**) {
  return Launch(f, stream);
}
CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void**, void**) {
  if (!config) return kErrorInvalidValue;
  return Launch(f, config->hStream);
}
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** params,
                               void** extra) {
  return cuLaunchKernelEx(config, f, params, extra);
}
CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int, unsigned int, unsigned int,
                                   unsigned int, unsigned int, unsigned int, unsigned int,
                                   CUstream stream, void**) {
  return Launch(f, stream);
}
CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int, unsigned int, unsigned int,
                                        unsigned int, unsigned int, unsigned int, unsigned int,
                                        CUstream stream, void**) {
  return Launch(f, stream);
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr, const void* src, size_t bytes) {
  if (!src) return kErrorInvalidValue;
  return SubmitAndWait(TransferNs(double(bytes), kHostLinkBytesPerSecond));
}
CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr, size_t bytes) {
  if (!dst) return kErrorInvalidValue;
  std::memset(dst, 0, bytes);
  return SubmitAndWait(TransferNs(double(bytes), kHostLinkBytesPerSecond));
}
CUresult cuMemcpyDtoD_v2(CUdeviceptr, CUdeviceptr, size_t bytes) {
  if (!Ready()) return kErrorNotInitialized;
  return SubmitAndWait(DeviceNs(2.0 * double(bytes)));  // read and write
}
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr, const void* src, size_t bytes, CUstream stream) {
  if (!src) return kErrorInvalidValue;
  return Submit(stream, TransferNs(double(bytes), kHostLinkBytesPerSecond));
}
CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr, size_t bytes, CUstream stream) {
  if (!dst) return kErrorInvalidValue;
  std::memset(dst, 0, bytes);
  return Submit(stream, TransferNs(double(bytes), kHostLinkBytesPerSecond));
}
CUresult cuMemsetD8_v2(CUdeviceptr, unsigned char, size_t count) {
  if (!Ready()) return kErrorNotInitialized;
  return SubmitAndWait(DeviceNs(double(count)));
}
CUresult cuMemsetD32_v2(CUdeviceptr, unsigned int, size_t count) {
  if (!Ready()) return kErrorNotInitialized;
  return SubmitAndWait(DeviceNs(4.0 * double(count)));
}
CUresult cuMemsetD8Async(CUdeviceptr, unsigned char, size_t count, CUstream stream) {
  if (!Ready()) return kErrorNotInitialized;
  return Submit(stream, DeviceNs(double(count)));
}

// Stream capture: work submitted to a capturing stream is recorded in its graph instead of running.
CUresult cuStreamBeginCapture_v2(CUstream stream, int) {
  if (!Ready()) return kErrorNotInitialized;
  if (reinterpret_cast<uintptr_t>(stream) <= 2)
    return kErrorStreamCaptureUnsupported;  // not the default stream
  SimGraph* none = nullptr;
  auto* g = new SimGraph();
  if (!StreamOf(stream)->capture.compare_exchange_strong(none, g)) {
    delete g;
    return kErrorInvalidValue;  // already capturing
  }
  return kSuccess;
}
CUresult cuStreamEndCapture(CUstream stream, CUgraph* graph) {
  if (!graph) return kErrorInvalidValue;
  SimGraph* g = StreamOf(stream)->capture.exchange(nullptr);
  if (!g) return kErrorInvalidValue;  // not capturing
  *graph = reinterpret_cast<CUgraph>(g);
  return kSuccess;
}
CUresult cuStreamIsCapturing(CUstream stream, int* status) {
  if (!status) return kErrorInvalidValue;
  *status = StreamOf(stream)->capture.load() ? 1 : 0;
  return kSuccess;
}

CUresult cuGraphCreate(CUgraph* graph, unsigned int) {
  if (!graph) return kErrorInvalidValue;
  *graph = reinterpret_cast<CUgraph>(new SimGraph());
  return kSuccess;
}
CUresult cuGraphDestroy(CUgraph graph) {
  if (!graph) return kErrorInvalidHandle;
  delete reinterpret_cast<SimGraph*>(graph);
  return kSuccess;
}
// CUDA_KERNEL_NODE_PARAMS(_v2) begins with the function; nothing else in it changes the work.
CUresult cuGraphAddKernelNode_v2(CUgraphNode* node, CUgraph graph, const CUgraphNode*, size_t,
                                 const void* params) {
  if (!node || !params) return kErrorInvalidValue;
  if (!graph) return kErrorInvalidHandle;
  auto* f = *static_cast<SimFunction* const*>(params);
  if (!f) return kErrorInvalidValue;
  auto* g = reinterpret_cast<SimGraph*>(graph);
  std::lock_guard<std::mutex> lock(g->mu);
  g->work_ns.push_back(f->duration_ns);
  *node = reinterpret_cast<CUgraphNode>(g->work_ns.size());
  return kSuccess;
}
// A memory node's memory is the graph's: it is taken from the device when the graph is
// instantiated and returned when the executable graph is destroyed.
CUresult cuGraphAddMemAllocNode(CUgraphNode* node, CUgraph graph, const CUgraphNode*, size_t,
                                CUDA_MEM_ALLOC_NODE_PARAMS* params) {
  if (!Ready()) return kErrorNotInitialized;
  if (!node || !params || params->bytesize == 0) return kErrorInvalidValue;
  if (!graph) return kErrorInvalidHandle;
  auto* g = reinterpret_cast<SimGraph*>(graph);
  std::lock_guard<std::mutex> lock(g->mu);
  g->memory_bytes += params->bytesize;
  params->dptr = gpumux::sim::NewAddress(CurrentDevice(), params->bytesize);
  *node = reinterpret_cast<CUgraphNode>(params->dptr);
  return kSuccess;
}
CUresult cuGraphAddMemFreeNode(CUgraphNode* node, CUgraph graph, const CUgraphNode*, size_t,
                               CUdeviceptr dptr) {
  if (!node) return kErrorInvalidValue;
  if (!graph) return kErrorInvalidHandle;
  *node = reinterpret_cast<CUgraphNode>(dptr);
  return kSuccess;
}
CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph, unsigned long long) {
  if (!Ready()) return kErrorNotInitialized;
  if (!exec) return kErrorInvalidValue;
  if (!graph) return kErrorInvalidHandle;
  auto* g = reinterpret_cast<SimGraph*>(graph);
  std::lock_guard<std::mutex> lock(g->mu);
  uint64_t duration = 0;
  for (uint64_t w : g->work_ns) duration += w;
  const SimDevice& device = CurrentDevice();
  if (g->memory_bytes && !gpumux::sim::Take(device, g->memory_bytes)) return kErrorOutOfMemory;
  *exec =
      reinterpret_cast<CUgraphExec>(new SimGraphExec{duration, g->memory_bytes, device.ordinal});
  return kSuccess;
}
CUresult cuGraphExecDestroy(CUgraphExec exec) {
  if (!exec) return kErrorInvalidHandle;
  auto* x = reinterpret_cast<SimGraphExec*>(exec);
  if (x->memory_bytes) gpumux::sim::Give(Device(x->device), x->memory_bytes);
  delete x;
  return kSuccess;
}
CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream) {
  if (!exec) return kErrorInvalidHandle;
  return Submit(stream, reinterpret_cast<SimGraphExec*>(exec)->duration_ns);
}
CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream stream) {
  return cuGraphLaunch(exec, stream);
}

}  // extern "C"
