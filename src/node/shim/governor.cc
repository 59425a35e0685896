#include "node/shim/governor.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <thread>
#include <vector>

#include "abi/nvml_api.h"
#include "base/clock.h"
#include "node/gpu_time_samples.h"

namespace gpumux::shim {
namespace {

constexpr uint64_t kTickNs = 1'000'000;
constexpr uint64_t kRecheckNs = 100'000;  // a held launch looks at the gate this often
// GPU time is read from NVML every tick on the simulated GPU (a memory read), every 20th on a real
// one: there each read is a driver call and NVML samples utilisation only once a period anyway
// (about 200 ms on an H200, driver 580).
// Launch activity, priorities and credit are ticked every millisecond either way (shared memory).
constexpr int kRealGpuMeterEvery = 20;
// Under gpumuxd, whether the view is still the one gpumuxd writes is checked every this many ticks
// (one stat, not on the launch path).
constexpr int kViewCheckEvery = 100;

// How far a measurement may lag at most: beyond this a process is taken as idle, not unreported.
constexpr uint64_t kMaxUnmeasuredNs = 1'000'000'000;

uint64_t WallClockUs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000 + uint64_t(ts.tv_nsec) / 1000;
}

// GPU time used by this process, from NVML's per-process utilisation samples.
class GpuTimeMeter {
 public:
  // A real GPU's samples carry wall-clock timestamps, the simulated GPU's monotonic ones.
  GpuTimeMeter(int gpu_index, bool real_gpu)
      : samples_(unsigned(getpid()), real_gpu, real_gpu ? WallClockUs() : 0) {
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
    buffer_.resize(1024);
  }
  bool usable() const { return utilisation_ != nullptr; }
  bool seen_self() const { return samples_.seen(); }
  bool unsupported() const {
    return unsupported_;
  }  // the GPU has no per-process utilisation (MIG mode)

  // Nanoseconds of GPU time this process used since the previous call (as far as NVML has
  // sampled it).
  uint64_t Used() {
    unsigned int n = unsigned(buffer_.size());
    nvmlReturn_t r = utilisation_(device_, buffer_.data(), &n, samples_.newest_us());
    if (r == nvml::kErrorNotSupported) unsupported_ = true;
    if (r != nvml::kSuccess) return 0;
    return samples_.Add(std::span(buffer_.data(), n));
  }
  // How far behind now a real GPU's measurement is: the time since the newest sample (or since the
  // start), at most kMaxUnmeasuredNs.
  uint64_t UnmeasuredNs() const {
    uint64_t since = samples_.newest_us(), now = WallClockUs();
    return now > since ? std::min<uint64_t>((now - since) * 1000, kMaxUnmeasuredNs) : 0;
  }

 private:
  decltype(&nvmlDeviceGetProcessUtilization) utilisation_ = nullptr;
  nvmlDevice_t device_ = nullptr;
  std::vector<nvmlProcessUtilizationSample_t> buffer_;
  node::GpuTimeSamples samples_;
  bool unsupported_ = false;
};

}  // namespace

void Governor::Start(node::Ledger* ledger, int process, int gpu_index) {
  ledger_ = ledger;
  process_ = process;
  Launch([this, gpu_index] { Run(gpu_index); });
}

void Governor::Follow(const node::Ledger* view, std::string view_path, int tenant,
                      node::ActivityWriter* activity, int gpu) {
  activity_ = activity;
  activity_gpu_ = gpu;
  Launch([this, view, view_path = std::move(view_path), tenant] {
    RunFollowing(view, view_path, tenant);
  });
}

void Governor::Launch(std::function<void()> loop) {
  running_.store(true);
  std::thread([this, loop = std::move(loop)] {
    loop();
    running_.store(false);
  }).detach();
}

bool Governor::TakeActivity() {
  bool launched = launched_.exchange(false, std::memory_order_relaxed);
  if (launched) LaunchesNeedTheGate();  // the next tick's first launch is to be noted
  return launched || waiting_.load(std::memory_order_relaxed);
}

void Governor::SetGate(bool closed) {
  gate_closed_.store(closed, std::memory_order_relaxed);
  if (closed) LaunchesNeedTheGate();
}

void Governor::Stop() {
  stopped_.store(true);
  uint64_t give_up = NowNs() + 50'000'000;
  while (running_.load() && NowNs() < give_up) SleepUntilNs(NowNs() + 100'000);
}

void Governor::WaitForTurn() {
  waiting_.store(true, std::memory_order_relaxed);
  if (activity_) {
    activity_->CountHeld();
  } else if (ledger_) {
    ledger_->CountHeld(process_);
  }
  while (gate_closed_.load(std::memory_order_relaxed)) SleepUntilNsPrecisely(NowNs() + kRecheckNs);
  waiting_.store(false, std::memory_order_relaxed);
}

void Governor::Run(int gpu_index) {
  const bool real_gpu = std::getenv("GPUMUX_SIM_NAME") == nullptr;
  GpuTimeMeter meter(gpu_index, real_gpu);
  if (!meter.usable()) {
    std::fprintf(
        stderr,
        "gpumux: compute share not enforced: NVML per-process utilisation is unavailable\n");
    return;
  }
  uint64_t started = NowNs();
  bool warned = false;
  for (int tick = 0; !stopped_.load(); ++tick) {
    uint64_t now = NowNs();
    uint64_t used = 0, unmeasured = 0;
    if (real_gpu) {
      if (tick % kRealGpuMeterEvery == 0) used = meter.Used();
      unmeasured = meter.UnmeasuredNs();
    } else {
      used = meter.Used();  // the simulated GPU's samples are current: nothing is unmeasured
    }
    bool wants = TakeActivity();
    node::ComputeVerdict v = ledger_->ComputeTick(process_, now, used, wants, unmeasured);
    SetGate(v.hold);
    if (forecast_) forecast_->Refresh(now);
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

void Governor::RunFollowing(const node::Ledger* view, const std::string& view_path, int tenant) {
  bool governed = true;  // gpumuxd still writes `view`
  for (int tick = 0; !stopped_.load(); ++tick) {
    uint64_t now = NowNs();
    if (TakeActivity() && activity_) activity_->Tick(activity_gpu_);
    if (governed && tick % kViewCheckEvery == 0 && (!view->Intact() || !view->StillAt(view_path))) {
      governed = false;
      std::fprintf(stderr,
                   "gpumux: gpumuxd no longer writes its view %s (made anew: an upgrade?): the "
                   "launches of pid %d are no longer held for its compute share\n",
                   view_path.c_str(), int(getpid()));
    }
    SetGate(governed && view->Gate(tenant));
    if (forecast_) forecast_->Refresh(now);
    SleepUntilNs(now + kTickNs);
  }
  gate_closed_.store(false);
}

}  // namespace gpumux::shim
