#include "node/shim/governor.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "abi/nvml_api.h"
#include "base/clock.h"

namespace gpumux::shim {
namespace {

constexpr uint64_t kTickNs = 1'000'000;
constexpr uint64_t kRecheckNs = 100'000;  // a held launch looks at the gate this often
// GPU time is read from NVML every tick on the simulated GPU (a memory read), every 20th on a real
// one: there each read is a driver call and NVML samples utilisation only every ~1/6 s anyway.
// Launch activity, priorities and credit are ticked every millisecond either way (shared memory).
constexpr int kRealGpuMeterEvery = 20;

// GPU time used by this process, from NVML's per-process utilisation samples.
class GpuTimeMeter {
 public:
  explicit GpuTimeMeter(int gpu_index) {
    void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!nvml) nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (!nvml) return;
    auto init = reinterpret_cast<decltype(&nvmlInit_v2)>(dlsym(nvml, "nvmlInit_v2"));
    auto handle = reinterpret_cast<decltype(&nvmlDeviceGetHandleByIndex_v2)>(
        dlsym(nvml, "nvmlDeviceGetHandleByIndex_v2"));
    utilisation_ =
        reinterpret_cast<decltype(utilisation_)>(dlsym(nvml, "nvmlDeviceGetProcessUtilization"));
    if (!init || !handle || !utilisation_ || init() != nvml::kSuccess ||
        handle(unsigned(gpu_index), &device_) != nvml::kSuccess) {
      utilisation_ = nullptr;
    }
    samples_.resize(1024);
  }
  bool usable() const { return utilisation_ != nullptr; }
  bool seen_self() const { return seen_self_; }
  bool unsupported() const {
    return unsupported_;
  }  // the GPU has no per-process utilisation (MIG mode)

  // Nanoseconds of GPU time this process used since the previous call.
  uint64_t Used() {
    unsigned int n = unsigned(samples_.size());
    nvmlReturn_t r = utilisation_(device_, samples_.data(), &n, last_us_);
    if (r == nvml::kErrorNotSupported) unsupported_ = true;
    if (r != nvml::kSuccess) return 0;
    uint64_t used = 0, newest = last_us_;
    for (unsigned int i = 0; i < n; ++i) {
      const nvmlProcessUtilizationSample_t& s = samples_[i];
      if (s.pid != unsigned(getpid()) || s.timeStamp <= last_us_) continue;
      seen_self_ = true;
      if (last_us_) used += uint64_t(s.smUtil) * (s.timeStamp - last_us_) * 10;  // % of µs -> ns
      newest = std::max<uint64_t>(newest, s.timeStamp);
    }
    if (newest > last_us_) last_us_ = newest;
    return used;
  }

 private:
  decltype(&nvmlDeviceGetProcessUtilization) utilisation_ = nullptr;
  nvmlDevice_t device_ = nullptr;
  std::vector<nvmlProcessUtilizationSample_t> samples_;
  unsigned long long last_us_ = 0;
  bool seen_self_ = false, unsupported_ = false;
};

}  // namespace

void Governor::Start(node::Ledger* ledger, int process, int gpu_index) {
  ledger_ = ledger;
  process_ = process;
  running_.store(true);
  std::thread([this, gpu_index] {
    Run(gpu_index);
    running_.store(false);
  }).detach();
}

void Governor::Stop() {
  stopped_.store(true);
  uint64_t give_up = NowNs() + 50'000'000;
  while (running_.load() && NowNs() < give_up) SleepUntilNs(NowNs() + 100'000);
}

void Governor::WaitForTurn() {
  waiting_.store(true, std::memory_order_relaxed);
  if (ledger_) ledger_->CountHeld(process_);
  while (gate_closed_.load(std::memory_order_relaxed)) SleepUntilNs(NowNs() + kRecheckNs);
  waiting_.store(false, std::memory_order_relaxed);
}

void Governor::Run(int gpu_index) {
  GpuTimeMeter meter(gpu_index);
  if (!meter.usable()) {
    std::fprintf(
        stderr,
        "gpumux: compute share not enforced: NVML per-process utilisation is unavailable\n");
    return;
  }
  uint64_t started = NowNs();
  bool warned = false;
  const int meter_every = std::getenv("GPUMUX_SIM_NAME") ? 1 : kRealGpuMeterEvery;
  for (int tick = 0; !stopped_.load(); ++tick) {
    uint64_t now = NowNs();
    uint64_t used = tick % meter_every == 0 ? meter.Used() : 0;
    bool wants = launched_.exchange(false, std::memory_order_relaxed) ||
                 waiting_.load(std::memory_order_relaxed);
    node::ComputeVerdict v = ledger_->ComputeTick(process_, now, used, wants);
    gate_closed_.store(v.hold, std::memory_order_relaxed);
    if (!warned && !meter.seen_self() && wants && now - started > 2'000'000'000ull) {
      if (meter.unsupported()) {
        std::fprintf(
            stderr,
            "gpumux: NVML has no per-process utilisation on this GPU (MIG mode): the compute share "
            "of pid %d is not measured\n",
            int(getpid()));
      } else {
        std::fprintf(
            stderr,
            "gpumux: NVML reports no GPU time for pid %d (a PID namespace?): its compute share is "
            "not measured\n",
            int(getpid()));
      }
      warned = true;
    }
    SleepUntilNs(now + kTickNs);
  }
  gate_closed_.store(false);
}

}  // namespace gpumux::shim
