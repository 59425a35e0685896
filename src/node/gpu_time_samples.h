// One process's GPU time from NVML's per-process utilisation samples (read by the compute governor
// of `gpumux run`'s shim and by gpumuxd's meter; never on a launch).
//
// NVML keeps, per sampling period (1/6 s to 1 s by product), one sample for each process that used
// the GPU in it: its CPU timestamp (µs, wall clock) and the percent of the period the process had a
// kernel running. nvmlDeviceGetProcessUtilization answers the samples newer than a timestamp, so a
// read may hold several of one process, or none, and a process idle for a while has a gap. Each
// sample is therefore counted over the span since the one before it, that span capped at twice the
// shortest span seen (one nominal period until two samples have shown it) (an idle gap is not a
// sampling period; spans under 1 ms, jitter, are not periods either), and a process's time is never
// counted beyond 100% of the wall time its samples cover.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "abi/nvml_api.h"

namespace gpumux::node {

class GpuTimeSamples {
 public:
  // `periodic`: the samples are a real driver's, one per sampling period, and spans and percentages
  // are capped as above; the simulated GPU's each cover the whole span since the previous read, and
  // its kernels' time lands in whole kernels (over 100% of a short span), so there they are not.
  // `since_us`: when the process started measuring (wall clock); samples from before it (another
  // process that had the same PID) are not counted, and the first one after it is counted over at
  // most one nominal period.
  GpuTimeSamples(unsigned pid, bool periodic, unsigned long long since_us = 0)
      : pid_(pid), periodic_(periodic), newest_us_(since_us) {}

  // GPU time (ns) in this process's samples among `samples` newer than the newest seen so far.
  uint64_t Add(std::span<const nvmlProcessUtilizationSample_t> samples) {
    mine_.clear();
    for (const nvmlProcessUtilizationSample_t& s : samples)
      if (s.pid == pid_ && s.timeStamp > newest_us_) mine_.push_back({s.timeStamp, s.smUtil});
    std::sort(mine_.begin(), mine_.end());
    uint64_t used_ns = 0;
    for (auto [at_us, percent] : mine_) {
      if (at_us == newest_us_) continue;  // the same sample twice in one read
      if (newest_us_) {
        uint64_t span_us = at_us - newest_us_;
        if (seen_ && span_us >= kMinPeriodUs &&
            (shortest_span_us_ == 0 || span_us < shortest_span_us_))
          shortest_span_us_ = span_us;
        if (periodic_)
          span_us = std::min(span_us, shortest_span_us_ ? 2 * shortest_span_us_ : kNominalPeriodUs);
        if (periodic_) percent = std::min(percent, 100u);
        used_ns += uint64_t(percent) * span_us * 10;  // % of µs -> ns
      }
      newest_us_ = at_us;
      seen_ = true;
    }
    return used_ns;
  }

  // The newest sample's timestamp (µs), or `since_us` before the first.
  unsigned long long newest_us() const { return newest_us_; }
  // Whether any sample of this process has been seen.
  bool seen() const { return seen_; }

 private:
  static constexpr uint64_t kMinPeriodUs = 1000;
  static constexpr uint64_t kNominalPeriodUs = 166'667;  // NVML's shortest documented: 1/6 s
  unsigned pid_;
  bool periodic_;
  unsigned long long newest_us_;
  bool seen_ = false;
  uint64_t shortest_span_us_ = 0;
  std::vector<std::pair<unsigned long long, unsigned>> mine_;  // (timestamp, percent) of one read
};

}  // namespace gpumux::node
