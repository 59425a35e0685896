// The launch forecast of a best-effort process beside a high-priority tenant with a rhythm, on
// fake driver events (each launch's kernel runs for the duration the test gives it, one after
// another on the stream).
#include "node/shim/launch_forecast.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <thread>

#include "base/clock.h"

namespace gpumux::shim {
namespace {

constexpr uint64_t kMs = 1'000'000;

// The fake driver: an event recorded completes when the work queued before it does.
struct FakeStream {
  uint64_t busy_until = 0;   // when the queued kernels end
  uint64_t next_kernel = 0;  // duration of the next kernel launched (set by the test)
  std::map<CUevent, uint64_t> at;
  int next_event = 1;
  int recorded = 0;
  int capturing = 0;  // the stream is capturing a graph
} fake;

EventCalls FakeEvents() {
  return {[](CUevent* e, unsigned) {
            *e = reinterpret_cast<CUevent>(uintptr_t(fake.next_event++));
            return CUresult(0);
          },
          [](CUevent e, CUstream) {
            ++fake.recorded;
            fake.at[e] = std::max(NowNs(), fake.busy_until);
            return CUresult(0);
          },
          [](CUevent e) { return CUresult(fake.at[e] <= NowNs() ? 0 : 600); },
          [](float* ms, CUevent a, CUevent b) {
            *ms = float(double(fake.at[b] - fake.at[a]) / 1e6);
            return CUresult(0);
          },
          [](CUevent) { return CUresult(0); },
          [](CUstream, int* capturing) {
            *capturing = fake.capturing;
            return CUresult(0);
          }};
}

class LaunchForecastTest : public ::testing::Test {
 protected:
  LaunchForecastTest()
      : path_(std::filesystem::temp_directory_path() /
              ("gpumux_forecast_" + std::to_string(getpid()))) {
    std::filesystem::remove(path_);
    ledger_.emplace(node::Ledger::CreateOrOpen(path_, 1ull << 30, "sim"));
    hp_ = ledger_->AddTenant("hp", {1ull << 20, node::kNoCap, 1, node::Priority::kHigh});
    be_ = ledger_->AddTenant("be", {1ull << 20, node::kNoCap, 1, node::Priority::kLow});
    fake = FakeStream();
  }
  ~LaunchForecastTest() override { std::filesystem::remove(path_); }

  // The high-priority tenant had bursts of 5 ms every 80 ms over the last 400 ms, the next one
  // due `due_in` (< 73 ms) from now.
  void RhythmWithNextBurstIn(uint64_t due_in) {
    uint64_t now = NowNs(), next = now + due_in;
    for (uint64_t ms = 400; ms > 0; --ms) {
      uint64_t t = now - ms * kMs;
      ledger_->TenantComputeTick(hp_, t, 0, (next - t) % (80 * kMs) > 75 * kMs);
    }
  }
  // Starts the forecast as the process of tenant slot `tenant` would, on the fake events.
  void StartAs(int tenant) {
    forecast_.Start(&*ledger_, tenant, FakeEvents());
    forecast_.Refresh(NowNs());
  }
  // Launches a kernel of `duration` through the forecast; returns how long Before held it.
  uint64_t Launch(const void* kernel, uint64_t duration) {
    uint64_t t = NowNs();
    forecast_.Before(kernel, nullptr);
    uint64_t held = NowNs() - t;
    fake.busy_until = std::max(NowNs(), fake.busy_until) + duration;
    forecast_.After(kernel, nullptr, true);
    return held;
  }

  std::filesystem::path path_;
  std::optional<node::Ledger> ledger_;
  int hp_, be_;
  LaunchForecast forecast_;
};

TEST_F(LaunchForecastTest, IsOffWithoutAHighPriorityRhythm) {
  StartAs(be_);
  EXPECT_LT(Launch(&fake, 5 * kMs), 1 * kMs);
  EXPECT_EQ(fake.recorded, 0) << "no events, nothing held";
}

TEST_F(LaunchForecastTest, HoldsAKernelThatWouldStillRunWhenTheNextBurstComes) {
  RhythmWithNextBurstIn(70 * kMs);
  StartAs(be_);
  int kernel_a = 0, kernel_b = 0;
  // Learn the kernels (a kernel never timed counts as the longest seen): B takes 2 ms, A 20 ms.
  EXPECT_LT(Launch(&kernel_b, 2 * kMs), 1 * kMs);
  SleepUntilNs(fake.busy_until + kMs);
  EXPECT_LT(Launch(&kernel_a, 20 * kMs), 1 * kMs) << "it fits before the burst";
  SleepUntilNs(fake.busy_until + kMs);
  // 8 ms before the burst: B fits, A does not and waits until the burst is past.
  uint64_t burst = ledger_->HighPriorityForecast(NowNs()).next_start_ns;
  ASSERT_GT(burst, NowNs() + 8 * kMs);
  SleepUntilNs(burst - 8 * kMs);
  EXPECT_LT(Launch(&kernel_b, 2 * kMs), 1 * kMs) << "2 ms fits before the burst";
  Launch(&kernel_a, 20 * kMs);
  EXPECT_GE(NowNs(), burst + node::kLateBurstNs)
      << "A went once the burst was due and did not come";
  EXPECT_LT(NowNs(), burst + node::kLateBurstNs + 20 * kMs) << "and not a period later";
}

// A kernel longer than any gap between bursts waits four periods, then goes as a burst ends, with
// the whole gap to run in: not at the first moment outside a burst (mid-gap, into the next one).
TEST_F(LaunchForecastTest, WorkThatFitsNoGapGoesAsABurstEndsAfterWaiting) {
  // Bursts of 5 ms every 80 ms, kept up by a feeder as the high-priority tenant's ticks would.
  const uint64_t first = NowNs() + 40 * kMs;
  RhythmWithNextBurstIn(40 * kMs);
  std::atomic<bool> stop{false};
  std::thread feeder([&] {
    for (uint64_t t = NowNs(); !stop; t += kMs / 4) {
      SleepUntilNs(t);
      uint64_t phase = (t + 80 * kMs - first % (80 * kMs)) % (80 * kMs);
      ledger_->TenantComputeTick(hp_, t, 0, phase < 5 * kMs);
    }
  });
  StartAs(be_);
  int kernel = 0;
  EXPECT_LT(Launch(&kernel, 78 * kMs), 1 * kMs) << "never seen: nothing to hold it by";
  SleepUntilNs(fake.busy_until + kMs);  // learnt: 78 ms, longer than the 75 ms gaps
  // Held from mid-gap (30 ms after a burst ended): four periods later is mid-gap again.
  SleepUntilNs(first + 3 * 80 * kMs + 35 * kMs);
  const uint64_t held_from = NowNs();
  Launch(&kernel, 78 * kMs);
  const uint64_t went = NowNs();
  stop = true;
  feeder.join();
  EXPECT_GE(went - held_from, 4 * 78 * kMs) << "it waited four periods (as learnt)";
  uint64_t since_burst_start = (went - first) % (80 * kMs);
  EXPECT_GE(since_burst_start, 5 * kMs) << "not inside a burst";
  // As a burst ends (5 ms in), not mid-gap (35 ms in, where it was held from): a loaded 2-core CI
  // machine once woke the waiting thread 10.9 ms in, so the bound sits well between the two.
  EXPECT_LT(since_burst_start, 20 * kMs) << "but as one ended, the whole gap ahead of it";
}

TEST_F(LaunchForecastTest, ALaunchIntoAGraphBeingCapturedIsNeitherHeldNorTimed) {
  RhythmWithNextBurstIn(kMs / 2);  // a 50 ms launch now would be held
  StartAs(be_);
  fake.capturing = 1;
  EXPECT_LT(Launch(&fake, 50 * kMs), 1 * kMs);
  EXPECT_EQ(fake.recorded, 0) << "an event in a capture would end it";
}

TEST_F(LaunchForecastTest, AHighPriorityTenantIsNeverHeldByIt) {
  RhythmWithNextBurstIn(5 * kMs);
  StartAs(hp_);
  EXPECT_LT(Launch(&fake, 50 * kMs), 1 * kMs);
  EXPECT_EQ(fake.recorded, 0);
}

}  // namespace
}  // namespace gpumux::shim
