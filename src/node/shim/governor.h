// The compute governor of one tenant process (part of the shim): a background thread that, once a
// millisecond, reports the GPU time this process used (NVML per-process utilisation, the same call
// on the real and the simulated GPU; measured every tick on the simulated GPU, every 20 ms on a
// real one) to the ledger's ComputeTick and opens or closes the launch gate that every intercepted
// launch passes. The share algorithm and its accuracy
// are described at Ledger::ComputeTick.
//
// If NVML is missing, or never reports this process (a PID namespace hides the host PID), the
// governor says so once on stderr and leaves launches ungated: memory quotas still hold.
//
// Under gpumuxd the governor measures and decides nothing (Follow): gpumuxd measures every
// process's GPU time itself and writes each tenant's gate into the read-only view; the thread
// publishes, once a millisecond, whether this process launched or waited (the tenant's activity
// file) and copies the tenant's gate.
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "node/ledger/activity.h"
#include "node/ledger/ledger.h"
#include "node/shim/launch_forecast.h"
#include "node/shim/launch_route.h"

namespace gpumux::shim {

class Governor {
 public:
  // Hot path of every launch: two relaxed atomic loads (a store only on a process's first launch
  // of a tick); no lock, no system call unless the gate is closed.
  void BeforeLaunch() {
    if (!launched_.load(std::memory_order_relaxed))
      launched_.store(true, std::memory_order_relaxed);
    if (gate_closed_.load(std::memory_order_relaxed)) WaitForTurn();
  }
  // Whether BeforeLaunch would do nothing now: this tick's launch is noted and the gate is open.
  bool Open() const {
    return launched_.load(std::memory_order_relaxed) &&
           !gate_closed_.load(std::memory_order_relaxed);
  }

  // Starts the thread for `process` of `ledger` (which must outlive it). Call once per process
  // (again in a forked child, after Forget()).
  void Start(node::Ledger* ledger, int process, int gpu_index);
  // Under gpumuxd: starts the thread that follows tenant slot `tenant`'s gate in `view` (mapped
  // read-only from `view_path`) and publishes into `activity` (null: publishes nothing), as the
  // tenant's GPU number `gpu` (0: its first). Both must outlive it. Once `view_path` names another
  // file or the view is retired (Ledger::Retire: gpumuxd made its view anew, e.g. one of another
  // ledger version, which this process cannot read) the gate stays open, said once on stderr:
  // launches of a process gpumuxd no longer governs are never held for good.
  void Follow(const node::Ledger* view, std::string view_path, int tenant,
              node::ActivityWriter* activity, int gpu);
  // Refreshes `forecast` (which must outlive the thread) on every tick. Before Start or Follow.
  void Tick(LaunchForecast* forecast) { forecast_ = forecast; }
  // Stops ticking and waits (up to 50 ms, in case NVML hangs) until the thread has left its loop,
  // so that nothing it touches is torn down under it at exit.
  void Stop();
  // In a forked child: the parent's thread does not exist here.
  void Forget() {
    gate_closed_.store(false);
    stopped_.store(false);
    running_.store(false);
  }

 private:
  void WaitForTurn();
  // Runs `loop` on a detached thread, `running_` while it is inside.
  void Launch(std::function<void()> loop);
  // Whether this process launched since the last call, or has a launch waiting at the gate.
  bool TakeActivity();
  // The gate's state for this tick; launches go through the gate again when it closes.
  void SetGate(bool closed);
  void Run(int gpu_index);
  void RunFollowing(const node::Ledger* view, const std::string& view_path, int tenant);

  // First, read by every launch (Open, BeforeLaunch).
  std::atomic<bool> launched_{false}, waiting_{false}, gate_closed_{false}, stopped_{false};
  std::atomic<bool> running_{false};  // the thread is inside Run
  int process_ = -1;
  int activity_gpu_ = 0;  // which of the tenant's GPUs it publishes for
  node::Ledger* ledger_ = nullptr;
  node::ActivityWriter* activity_ = nullptr;
  LaunchForecast* forecast_ = nullptr;
};

}  // namespace gpumux::shim
