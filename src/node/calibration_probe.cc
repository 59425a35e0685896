#include "node/calibration_probe.h"

#include <dlfcn.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "abi/driver_api.h"
#include "base/error.h"
#include "node/calibration_kernels_ptx.h"

namespace gpumux::node {
namespace {

// On the simulated GPU, each kernel's work: 20 GB streamed, 10 TFLOP of math (milliseconds on any
// simulated kind). On a real GPU the kernels are calibration_kernels.cu's, sized below.
constexpr double kSimStreamBytes = 20e9;
constexpr double kSimMathFlops = 10e12;
const char* const kSimulatedModule =
    "gpumux-sim-module 1\n"
    "kernel stream bytes=20e9 flops=0\n"
    "kernel math bytes=0 flops=10e12\n"
    "kernel empty bytes=0 flops=0\n";

class DriverProbe : public CalibrationProbe {
 public:
  DriverProbe() {
    lib_ = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib_) throw Unavailable("calibrate: no CUDA driver (libcuda.so.1) to load");
    Bind(init_, "cuInit");
    Bind(version_, "cuDriverGetVersion");
    Bind(device_get_, "cuDeviceGet");
    Bind(name_, "cuDeviceGetName");
    Bind(retain_, "cuDevicePrimaryCtxRetain");
    Bind(set_current_, "cuCtxSetCurrent");
    Bind(synchronize_, "cuCtxSynchronize");
    Bind(load_, "cuModuleLoadData");
    Bind(function_, "cuModuleGetFunction");
    Bind(launch_, "cuLaunchKernel");
    Bind(event_create_, "cuEventCreate");
    Bind(event_record_, "cuEventRecord");
    Bind(event_synchronize_, "cuEventSynchronize");
    Bind(elapsed_, "cuEventElapsedTime");
    Bind(attribute_, "cuDeviceGetAttribute");
    Bind(alloc_, "cuMemAlloc_v2");
    Bind(free_, "cuMemFree_v2");
    Bind(unload_, "cuModuleUnload");
    Bind(event_destroy_, "cuEventDestroy_v2");
    Check(init_(0), "cuInit");
    CUdevice dev;
    Check(device_get_(&dev, 0), "cuDeviceGet");
    device_ = dev;
    CUcontext ctx;
    Check(retain_(&ctx, dev), "cuDevicePrimaryCtxRetain");
    Check(set_current_(ctx), "cuCtxSetCurrent");
    // The simulated driver says what it is in the environment that describes it; it runs kernels
    // described by their work. A real one JIT-compiles the PTX of calibration_kernels.cu.
    bool simulated = std::getenv("GPUMUX_SIM_STATE") != nullptr;
    Check(load_(&module_, simulated ? kSimulatedModule : kCalibrationPtx),
          simulated ? "cuModuleLoadData" : "cuModuleLoadData (JIT of the calibration PTX)");
    Check(function_(&stream_.f, module_, "stream"), "cuModuleGetFunction");
    Check(function_(&math_.f, module_, "math"), "cuModuleGetFunction");
    Check(function_(&empty_.f, module_, "empty"), "cuModuleGetFunction");
    if (simulated) {
      stream_.work = kSimStreamBytes;
      math_.work = kSimMathFlops;
    } else {
      SizeRealKernels();
    }
    Check(event_create_(&start_, 0), "cuEventCreate");
    Check(event_create_(&end_, 0), "cuEventCreate");
  }

  // Gives back what it made (events, the module, device memory); the context stays the process's.
  ~DriverProbe() override {
    if (start_) event_destroy_(start_);
    if (end_) event_destroy_(end_);
    if (buffer_) free_(buffer_);
    if (out_) free_(out_);
    if (module_) unload_(module_);
  }

  std::string DeviceName() override {
    char name[256] = {0};
    Check(name_(name, sizeof(name), device_), "cuDeviceGetName");
    return name;
  }
  std::string DriverVersion() override {
    int v = 0;
    Check(version_(&v), "cuDriverGetVersion");
    return std::to_string(v);
  }
  double Bandwidth(double seconds) override {
    return stream_.work / KernelSeconds(stream_, seconds);
  }
  double Flops(double seconds) override { return math_.work / KernelSeconds(math_, seconds); }
  double LaunchSeconds(int count) override {
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < count; ++i) Launch(empty_);
    double s = Since(start) / count;
    Check(synchronize_(), "cuCtxSynchronize");
    return s;
  }
  double SyncSeconds(int count) override {
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < count; ++i) {
      Launch(empty_);
      Check(synchronize_(), "cuCtxSynchronize");
    }
    return Since(start) / count;
  }

 private:
  // A kernel with its launch shape, arguments, and the work one launch does (bytes or FLOPs).
  struct Kernel {
    CUfunction f = nullptr;
    unsigned grid = 1, block = 1;
    void* params[3] = {nullptr, nullptr, nullptr};
    double work = 0;
  };

  // The real kernels' shapes: enough blocks to fill every SM several times over; a stream over as
  // large a buffer as the GPU gives, up to 2 GiB (its reads must not fit in L2); math loops long
  // enough that a launch takes about a millisecond or more on current GPUs.
  void SizeRealKernels() {
    int sms = 0;
    Check(attribute_(&sms, 16 /* CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT */, device_),
          "cuDeviceGetAttribute");
    for (bytes_ = 2ull << 30; bytes_ >= 256ull << 20; bytes_ /= 2)
      if (alloc_(&buffer_, bytes_) == 0) break;
    if (bytes_ < 256ull << 20) throw Unavailable("calibrate: cannot allocate 256 MiB on the GPU");
    Check(alloc_(&out_, 64), "cuMemAlloc");
    stream_.grid = unsigned(sms) * 8, stream_.block = 512;
    stream_.params[0] = &buffer_, stream_.params[1] = &bytes_, stream_.params[2] = &out_;
    stream_.work = double(bytes_);
    math_.grid = unsigned(sms) * 8, math_.block = 256;  // 8 warps a block
    math_.params[0] = &iterations_, math_.params[1] = &out_;
    // Each warp: 4 tile products of 16 x 16 x 16 (8,192 FLOP each) per iteration.
    math_.work = double(math_.grid) * (math_.block / 32) * iterations_ * 4 * 8192;
  }

  template <typename Fn>
  void Bind(Fn& fn, const char* symbol) {
    fn = reinterpret_cast<Fn>(dlsym(lib_, symbol));
    if (!fn) throw Unavailable(std::string("calibrate: the driver has no ") + symbol);
  }
  static void Check(CUresult r, const char* what) {
    if (r != 0)
      throw Unavailable(std::string("calibrate: ") + what + " failed (CUDA error " +
                        std::to_string(r) + ")");
  }
  static double Since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  void Launch(Kernel& k) {
    Check(launch_(k.f, k.grid, 1, 1, k.block, 1, 1, 0, nullptr, k.params[0] ? k.params : nullptr,
                  nullptr),
          "cuLaunchKernel");
  }
  // Seconds one launch of `f` takes, over batches of launches until `seconds` have passed, timed
  // by events around each batch.
  double KernelSeconds(Kernel& f, double seconds) {
    double gpu_seconds = 0;
    long launches = 0;
    auto start = std::chrono::steady_clock::now();
    for (int batch = 4; gpu_seconds < seconds && Since(start) < 10 * seconds + 1; batch *= 2) {
      Check(event_record_(start_, nullptr), "cuEventRecord");
      for (int i = 0; i < batch; ++i) Launch(f);
      Check(event_record_(end_, nullptr), "cuEventRecord");
      Check(event_synchronize_(end_), "cuEventSynchronize");
      float ms = 0;
      Check(elapsed_(&ms, start_, end_), "cuEventElapsedTime");
      gpu_seconds += ms / 1e3;
      launches += batch;
    }
    if (gpu_seconds <= 0) throw Internal("calibrate: the events measured no time");
    return gpu_seconds / double(launches);
  }

  void* lib_ = nullptr;
  CUdevice device_ = 0;
  CUmodule module_ = nullptr;
  Kernel stream_, math_, empty_;
  CUdeviceptr buffer_ = 0, out_ = 0;  // real GPU: what the stream reads, where results would go
  unsigned long long bytes_ = 0;
  unsigned int iterations_ = 4096;
  CUevent start_ = nullptr, end_ = nullptr;
  decltype(&cuInit) init_;
  decltype(&cuDriverGetVersion) version_;
  decltype(&cuDeviceGet) device_get_;
  decltype(&cuDeviceGetName) name_;
  decltype(&cuDevicePrimaryCtxRetain) retain_;
  decltype(&cuCtxSetCurrent) set_current_;
  decltype(&cuCtxSynchronize) synchronize_;
  decltype(&cuModuleLoadData) load_;
  decltype(&cuDeviceGetAttribute) attribute_;
  decltype(&cuMemAlloc_v2) alloc_;
  decltype(&cuMemFree_v2) free_;
  decltype(&cuModuleUnload) unload_;
  decltype(&cuEventDestroy_v2) event_destroy_;
  decltype(&cuModuleGetFunction) function_;
  decltype(&cuLaunchKernel) launch_;
  decltype(&cuEventCreate) event_create_;
  decltype(&cuEventRecord) event_record_;
  decltype(&cuEventSynchronize) event_synchronize_;
  decltype(&cuEventElapsedTime) elapsed_;
};

}  // namespace

std::unique_ptr<CalibrationProbe> CalibrationProbe::Open() {
  return std::make_unique<DriverProbe>();
}

}  // namespace gpumux::node
