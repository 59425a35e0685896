#include "node/agent/device_meter.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <ctime>
#include <map>
#include <set>
#include <span>
#include <utility>

#include "base/error.h"
#include "base/process.h"
#include "node/gpu_time_samples.h"
#include "node/nvml_library.h"
#include "simgpu/sim_state.h"

namespace gpumux::agent {
namespace {

// A simulated process slot as its bytes lie in the state file (sim::SimProcess without atomics).
struct SimProcessBytes {
  int32_t pid, below_normal;
  uint64_t start_time, used, gpu_ns;
};
static_assert(sizeof(SimProcessBytes) == sizeof(sim::SimProcess));
static_assert(offsetof(SimProcessBytes, gpu_ns) == offsetof(sim::SimProcess, gpu_ns));
static_assert(offsetof(SimProcessBytes, start_time) == offsetof(sim::SimProcess, start_time));
static_assert(offsetof(SimProcessBytes, used) == offsetof(sim::SimProcess, used));

class SimulatedMeter : public DeviceMeter {
 public:
  explicit SimulatedMeter(std::string path) : path_(std::move(path)) {
    slots_.resize(sim::kMaxSimProcesses);
  }
  ~SimulatedMeter() override {
    if (fd_ >= 0) close(fd_);
  }
  void Read(std::vector<Use>* out) override {
    out->clear();
    if (!ReadSlots()) return;  // a file cut short: nothing measured this time
    std::map<std::pair<pid_t, uint64_t>, uint64_t> now;
    for (const SimProcessBytes& p : slots_) {
      if (p.pid <= 0) continue;
      auto key = std::make_pair(pid_t(p.pid), p.start_time);
      now[key] = p.gpu_ns;
      auto before = last_.find(key);
      // A process first seen counts from now on; a counter that went back is a reused slot.
      if (before != last_.end() && p.gpu_ns > before->second)
        out->push_back({p.pid, p.gpu_ns - before->second});
    }
    last_ = std::move(now);
  }
  bool ReadMemory(std::vector<Held>* out) override {
    out->clear();
    if (!ReadSlots()) return false;
    for (const SimProcessBytes& p : slots_) {
      // A process that exited holds nothing: the simulated device keeps its slot until the next
      // process's allocation finds the device full, where a real driver frees it at exit.
      if (p.pid > 0 && p.used > 0 && ProcessStartTime(p.pid) == p.start_time)
        out->push_back({p.pid, p.used});
    }
    return true;
  }
  uint64_t UnmeasuredNs() const override { return 0; }  // charged when the work is submitted
  uint64_t period_ns() const override { return 1'000'000; }

 private:
  // Reads the state file's process slots into slots_; false when it cannot (absent, cut short).
  bool ReadSlots() {
    if (fd_ < 0) fd_ = open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd_ < 0) return false;
    size_t bytes = slots_.size() * sizeof(SimProcessBytes);
    return pread(fd_, slots_.data(), bytes, offsetof(sim::SimState, processes)) == ssize_t(bytes);
  }

  std::string path_;
  int fd_ = -1;
  std::vector<SimProcessBytes> slots_;
  std::map<std::pair<pid_t, uint64_t>, uint64_t> last_;  // (pid, start time) -> GPU ns seen
};

uint64_t WallClockUs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000 + uint64_t(ts.tv_nsec) / 1000;
}

// A process with a sample this recent still counts when choosing how far back to ask.
constexpr uint64_t kRecentUs = 2'000'000;
// At most this much is taken as not yet measured (beyond it a process is idle, not unreported).
constexpr uint64_t kMaxUnmeasuredNs = 1'000'000'000;
constexpr size_t kMaxPids = 4096;

class NvmlMeter : public DeviceMeter {
 public:
  // `index` -1: a MIG instance, where NVML measures nothing.
  explicit NvmlMeter(int index) : started_us_(WallClockUs()), newest_us_(started_us_) {
    if (index < 0) return;
    try {
      const node::NvmlLibrary& nvml = node::Nvml();
      device_ = nvml.Gpu(index);
      utilisation_ = nvml.process_utilization;
      processes_ = nvml.compute_processes;
    } catch (const Error&) {
      utilisation_ = nullptr;
      processes_ = nullptr;
    }
    buffer_.resize(256);
  }
  void Read(std::vector<Use>* out) override {
    out->clear();
    if (!utilisation_) return;
    // Asked from the oldest "newest sample" among the processes seen lately, as a process's own
    // governor would ask for its own: each process's samples are then those NVML has not shown
    // it yet.
    uint64_t since = newest_us_;
    for (const auto& [pid, samples] : per_pid_) {
      if (samples.newest_us() + kRecentUs > newest_us_)
        since = std::min<uint64_t>(since, samples.newest_us());
    }
    unsigned int n = unsigned(buffer_.size());
    nvmlReturn_t r = utilisation_(device_, buffer_.data(), &n, since);
    if (r == nvml::kErrorInsufficientSize) {
      buffer_.resize(std::max<size_t>(n, 2 * buffer_.size()));
      n = unsigned(buffer_.size());
      r = utilisation_(device_, buffer_.data(), &n, since);
    }
    if (r != nvml::kSuccess) return;
    std::span<const nvmlProcessUtilizationSample_t> samples(buffer_.data(), n);
    // One record per PID ever seen (a reused PID continues its predecessor's, whose samples are
    // older); bounded by forgetting all of them now and then.
    if (per_pid_.size() > kMaxPids) per_pid_.clear();
    std::set<unsigned> read;
    for (const nvmlProcessUtilizationSample_t& s : samples) {
      newest_us_ = std::max<uint64_t>(newest_us_, s.timeStamp);
      if (!read.insert(s.pid).second) continue;
      auto it = per_pid_.find(s.pid);
      if (it == per_pid_.end())
        it = per_pid_.emplace(s.pid, node::GpuTimeSamples(s.pid, true, started_us_)).first;
      if (uint64_t ns = it->second.Add(samples)) out->push_back({pid_t(s.pid), ns});
    }
  }
  uint64_t UnmeasuredNs() const override {
    uint64_t now = WallClockUs();
    return now > newest_us_ ? std::min<uint64_t>((now - newest_us_) * 1000, kMaxUnmeasuredNs) : 0;
  }
  // NVML samples once a period (about 200 ms on an H200): reading more often than every 20 ms
  // costs driver calls and shows nothing new.
  uint64_t period_ns() const override { return 20'000'000; }
  bool ReadMemory(std::vector<Held>* out) override {
    out->clear();
    if (!processes_) return false;
    std::vector<nvmlProcessInfo_t> infos(256);
    unsigned int n = unsigned(infos.size());
    nvmlReturn_t r = processes_(device_, &n, infos.data());
    if (r == nvml::kErrorInsufficientSize) {  // n now says how many there are
      infos.resize(n + 16);
      n = unsigned(infos.size());
      r = processes_(device_, &n, infos.data());
    }
    if (r != nvml::kSuccess) return false;
    for (unsigned i = 0; i < n && i < infos.size(); ++i) {
      // NVML_VALUE_NOT_AVAILABLE (all ones) where the driver cannot say.
      if (infos[i].usedGpuMemory != ~0ull && infos[i].usedGpuMemory > 0)
        out->push_back({pid_t(infos[i].pid), infos[i].usedGpuMemory});
    }
    return true;
  }

 private:
  decltype(&nvmlDeviceGetProcessUtilization) utilisation_ = nullptr;
  decltype(&nvmlDeviceGetComputeRunningProcesses_v3) processes_ = nullptr;
  nvmlDevice_t device_ = nullptr;
  uint64_t started_us_, newest_us_;
  std::vector<nvmlProcessUtilizationSample_t> buffer_;
  std::map<unsigned, node::GpuTimeSamples> per_pid_;
};

}  // namespace

std::unique_ptr<DeviceMeter> MakeSimulatedMeter(std::string state_path) {
  return std::make_unique<SimulatedMeter>(std::move(state_path));
}
std::unique_ptr<DeviceMeter> MakeNvmlMeter(int index) { return std::make_unique<NvmlMeter>(index); }

}  // namespace gpumux::agent
