// Ways to put a set of tenants on one GPU, and what each predicts for every tenant.
//
// Split in space: `whole` (one tenant, the baseline) and `MIG` (hardware instances). Share in time:
// `MPS` (kernels of all tenants run at once and contend; see interference.h) and `time-slicing`
// (tenants take turns). Each evaluator says whether the tenants fit (memory, and every SLO), predicts
// each tenant's rate, and explains a refusal in numbers. Evaluators are pure functions of their
// inputs and thread-safe. The `Fits*` variants answer only yes/no and are the planner's hot path.
#pragma once

#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/gpu_kind.h"
#include "share/mig_layout.h"
#include "share/tenant.h"

namespace gpumux {

enum class StrategyKind { kWhole, kMig, kMps, kTimeSlice };
std::string_view StrategyName(StrategyKind kind);  // "whole", "mig", "mps", "timeslice"

// Time-slicing costs. The hardware's default channel-group timeslice on Volta and later is 1024 µs
// [V, open GPU kernel modules]; no authoritative context-switch cost is published, so 50 µs is an
// assumption within the 10s-100s of µs reported (uncertain; measure on the device).
inline constexpr double kTimeSliceQuantumSeconds = 1.024e-3;
inline constexpr double kContextSwitchSeconds = 50e-6;
// MPS clients per GPU on Volta and later with CUDA ≤ 13.0 (60 from CUDA 13.1; we keep the lower).
inline constexpr int kMpsMaxClients = 48;

struct TenantOutcome {
  std::string name;
  std::string unit;           // "tok/s" or "step/s"
  std::string slice;          // "whole GPU", "MIG 3g.40gb@0", "MPS client", "time share 49%"
  double solo_rate = 0;       // per-sequence rate alone on the whole GPU
  double rate = 0;            // predicted per-sequence rate under the strategy
  double required_rate = 0;   // what its SLO asks; 0 = no SLO
  double slowdown = 1;        // solo_rate / rate
  double memory = 0;          // bytes it holds
  double bandwidth = 0;       // bytes/s it uses under the strategy
  double flops = 0;           // FLOP/s it uses under the strategy
  // MIG only: what its instance holds that it does not use.
  double stranded_memory = 0, stranded_bandwidth = 0, stranded_flops = 0;
  bool meets_slo = true;
};

struct StrategyResult {
  StrategyKind kind = StrategyKind::kWhole;
  bool fits = false;
  std::string verdict;        // one line, in numbers: why it fits or why it loses
  std::vector<TenantOutcome> tenants;
  // Smallest rate/required over tenants with an SLO (rate/solo for those without): larger is safer.
  double headroom = 0;
  std::optional<MigLayout> layout;   // MIG only
};

StrategyResult EvaluateWhole(const GpuKind& gpu, std::span<const TenantLoad* const> loads);
StrategyResult EvaluateMig(const GpuKind& gpu, std::span<const TenantLoad* const> loads);
StrategyResult EvaluateMps(const GpuKind& gpu, std::span<const TenantLoad* const> loads);
StrategyResult EvaluateTimeSlice(const GpuKind& gpu, std::span<const TenantLoad* const> loads);

bool FitsMig(const GpuKind& gpu, std::span<const TenantLoad* const> loads);
bool FitsMps(const GpuKind& gpu, std::span<const TenantLoad* const> loads);
bool FitsTimeSlice(const GpuKind& gpu, std::span<const TenantLoad* const> loads);

// Shared by the evaluators: fills rate-derived fields of an outcome and the SLO check.
TenantOutcome MakeOutcome(const TenantLoad& load, double step_rate, std::string slice);
// Sets headroom, fits (given memory_ok) and a verdict naming the tenant furthest below its SLO.
// With `name_slice`, the verdict also names the worst tenant's slice (MIG: its instance).
void Conclude(StrategyResult* result, bool memory_ok, const std::string& cause,
              bool name_slice = false);

}  // namespace gpumux
