// A way to put a set of tenants on one GPU, and what it predicts for every tenant.
//
// Split in space: `whole` (one tenant, the baseline) and `MIG` (hardware instances). Share in time:
// `MPS` (kernels of all tenants run at once and contend; see interference.h) and `time-slicing`
// (tenants take turns). Each strategy is one file (whole.cc, mig.cc, mps.cc, time_slice.cc) that
// implements `Strategy`; strategy_registry.h lists them. A strategy says whether the tenants fit
// (memory, and every SLO), predicts each tenant's rate, and explains a refusal in numbers.
#pragma once

#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/share_mode.h"
#include "core/gpu_kind.h"
#include "core/mig_layout.h"
#include "share/tenant.h"

namespace gpumux {

// Time-slicing costs. The hardware's default channel-group timeslice on Volta and later is 1024 µs
// [V, open GPU kernel modules]; no authoritative context-switch cost is published, so 50 µs is an
// assumption within the 10s-100s of µs reported (uncertain; measure on the device).
inline constexpr double kTimeSliceQuantumSeconds = 1.024e-3;
inline constexpr double kContextSwitchSeconds = 50e-6;
// The share of the GPU's time time-sliced tenants keep together after the switches, as modelled:
// q/(q+c). A calibration's measured share replaces it (GpuKind::TimeSliceUsable).
inline constexpr double kTimeSliceUsableModelled =
    kTimeSliceQuantumSeconds / (kTimeSliceQuantumSeconds + kContextSwitchSeconds);
// MPS clients per GPU on Volta and later with CUDA ≤ 13.0 (60 from CUDA 13.1; we keep the lower).
inline constexpr int kMpsMaxClients = 48;

struct TenantOutcome {
  std::string name;
  std::string unit;          // "tok/s" or "step/s"
  std::string slice;         // "whole GPU", "MIG 3g.40gb@0", "MPS client", "time share 49%"
  double solo_rate = 0;      // per-sequence rate alone on the whole GPU
  double rate = 0;           // predicted per-sequence rate under the strategy
  double required_rate = 0;  // what its SLO asks, with the margin; 0 = no SLO
  double margin = 0;         // for the model's error (Slo::margin): required_rate × (1 - margin)
                             // is the SLO as stated
  double slowdown = 1;       // solo_rate / rate
  double memory = 0;         // bytes it holds
  double bandwidth = 0;      // bytes/s it uses under the strategy
  double flops = 0;          // FLOP/s it uses under the strategy
  // MIG only: what its instance holds that it does not use.
  double stranded_memory = 0, stranded_bandwidth = 0, stranded_flops = 0;
  bool meets_slo = true;
};

struct StrategyResult {
  ShareMode kind = ShareMode::kWhole;
  bool fits = false;
  std::string verdict;  // one line, in numbers: why it fits or why it loses
  std::vector<TenantOutcome> tenants;
  // Smallest rate/required over tenants with an SLO (rate/solo for those without): larger is safer.
  double headroom = 0;
  std::optional<MigLayout> layout;  // MIG only
};

// One strategy. Implementations are stateless and thread-safe; their answers are pure functions of
// their inputs.
class Strategy {
 public:
  virtual ~Strategy() = default;
  // The sharing mode it plans (a node runs the plan in this mode).
  virtual ShareMode mode() const = 0;
  // Whether it can hold `tenants` tenants on `gpu` at all (whole: exactly one; MIG: a GPU with
  // MIG).
  virtual bool Applies(const GpuKind& gpu, size_t tenants) const = 0;
  // Yes/no: do the tenants fit, every SLO kept? The planner's hot path; the same answer as
  // Evaluate(...).fits, without building the explanation.
  virtual bool Fits(const GpuKind& gpu, std::span<const TenantLoad* const> loads) const = 0;
  // The prediction for every tenant and the verdict, in numbers.
  virtual StrategyResult Evaluate(const GpuKind& gpu,
                                  std::span<const TenantLoad* const> loads) const = 0;
};

// A strategy made of three free functions, so that each strategy file holds only its model:
//   const Strategy& MpsStrategy() {
//     static const StrategyOf<ShareMode::kMps, AppliesToAnyGpu, FitsMps, EvaluateMps> strategy;
//     return strategy;
//   }
// The functions are template arguments, so the planner's calls to Fits inline them.
template <ShareMode kMode, auto kApplies, auto kFits, auto kEvaluate>
class StrategyOf final : public Strategy {
 public:
  ShareMode mode() const override { return kMode; }
  bool Applies(const GpuKind& gpu, size_t tenants) const override { return kApplies(gpu, tenants); }
  bool Fits(const GpuKind& gpu, std::span<const TenantLoad* const> loads) const override {
    return kFits(gpu, loads);
  }
  StrategyResult Evaluate(const GpuKind& gpu,
                          std::span<const TenantLoad* const> loads) const override {
    return kEvaluate(gpu, loads);
  }
};

// For strategies that can hold any number of tenants on any GPU (MPS, time-slicing).
inline bool AppliesToAnyGpu(const GpuKind&, size_t) { return true; }

// Shared by the evaluators: fills rate-derived fields of an outcome and the SLO check.
TenantOutcome MakeOutcome(const TenantLoad& load, double step_rate, std::string slice);
// Sets headroom, fits (given memory_ok) and a verdict naming the tenant furthest below its SLO.
// With `name_slice`, the verdict also names the worst tenant's slice (MIG: its instance).
void Conclude(StrategyResult* result, bool memory_ok, const std::string& cause,
              bool name_slice = false);

}  // namespace gpumux
