#include "node/calibration_probe.h"

#include <dlfcn.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "abi/driver_api.h"
#include "base/error.h"

namespace gpumux::node {
namespace {

// Each kernel's work: 20 GB streamed, 10 TFLOP of math (milliseconds on any current GPU).
constexpr double kStreamBytes = 20e9;
constexpr double kMathFlops = 10e12;
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
    // The simulated driver says what it is in the environment that describes it.
    if (!std::getenv("GPUMUX_SIM_STATE"))
      throw Unavailable(
          "calibrate: on a real GPU gpumux needs PTX kernels, which are not written yet; "
          "calibrate the simulated GPU with --sim KIND");
    Check(init_(0), "cuInit");
    CUdevice dev;
    Check(device_get_(&dev, 0), "cuDeviceGet");
    device_ = dev;
    CUcontext ctx;
    Check(retain_(&ctx, dev), "cuDevicePrimaryCtxRetain");
    Check(set_current_(ctx), "cuCtxSetCurrent");
    CUmodule module;
    Check(load_(&module, kSimulatedModule), "cuModuleLoadData");
    Check(function_(&stream_, module, "stream"), "cuModuleGetFunction");
    Check(function_(&math_, module, "math"), "cuModuleGetFunction");
    Check(function_(&empty_, module, "empty"), "cuModuleGetFunction");
    Check(event_create_(&start_, 0), "cuEventCreate");
    Check(event_create_(&end_, 0), "cuEventCreate");
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
    return kStreamBytes / KernelSeconds(stream_, seconds);
  }
  double Flops(double seconds) override { return kMathFlops / KernelSeconds(math_, seconds); }
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
  void Launch(CUfunction f) {
    Check(launch_(f, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr), "cuLaunchKernel");
  }
  // Seconds one launch of `f` takes, over batches of launches until `seconds` have passed, timed
  // by events around each batch.
  double KernelSeconds(CUfunction f, double seconds) {
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
  CUfunction stream_ = nullptr, math_ = nullptr, empty_ = nullptr;
  CUevent start_ = nullptr, end_ = nullptr;
  decltype(&cuInit) init_;
  decltype(&cuDriverGetVersion) version_;
  decltype(&cuDeviceGet) device_get_;
  decltype(&cuDeviceGetName) name_;
  decltype(&cuDevicePrimaryCtxRetain) retain_;
  decltype(&cuCtxSetCurrent) set_current_;
  decltype(&cuCtxSynchronize) synchronize_;
  decltype(&cuModuleLoadData) load_;
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
