// A tenant: one job that wants a share of a GPU, with the service level it must keep.
#pragma once

#include <optional>
#include <span>
#include <string>

#include "core/gpu_kind.h"
#include "core/workload.h"

namespace gpumux {

// A service-level objective. Rates are per sequence: tokens/s for LLMs, steps/s for generic jobs.
// Any combination may be set; the tightest wins. An empty Slo accepts any speed.
struct Slo {
  std::optional<double> min_rate;  // tokens (steps) per second per sequence
  std::optional<double> max_ms_per_token;
  std::optional<double> max_slowdown;  // against running alone on a whole GPU of the same kind
  // The model's error allowed for: a predicted rate meets min_rate (max_ms_per_token) only when it
  // is that fraction above it. nullopt: the workload's expected error (Workload::expected_error).
  std::optional<double> margin;

  bool empty() const { return !min_rate && !max_ms_per_token && !max_slowdown; }
  // The per-sequence rate this SLO requires of a tenant whose solo rate is `solo_rate`, predicted
  // with `margin` for the model's error (on the absolute objectives; a slowdown is relative to
  // the tenant's own predicted solo rate); 0 if none.
  double RequiredRate(double solo_rate, double margin = 0) const;
  std::string Describe(const std::string& unit) const;  // "≥ 50 tok/s", "≤ 1.5× slowdown"
};

struct Tenant {
  std::string name;
  Workload work;
  Slo slo;
  double mps_thread_cap = 1.0;  // CUDA_MPS_ACTIVE_THREAD_PERCENTAGE / 100 under MPS
  std::string unit() const { return work.kind == "generic" ? "step/s" : "tok/s"; }
};

// What one tenant asks of one GPU kind, precomputed once so that the strategies' inner loops read
// only numbers. All times are seconds per step on the whole GPU.
struct TenantLoad {
  const Tenant* tenant = nullptr;
  double memory = 0;
  StepTimes whole;           // roofline times alone on the whole GPU
  double bandwidth_use = 0;  // seconds of full-GPU bandwidth one step consumes (bytes / BW)
  double compute_use = 0;    // seconds of full-GPU math one step consumes (FLOPs / peak, or the
                             // SMs unpacking its quantised weights: DequantSecondsOn)
  double min_step_rate = 0;  // steps/s the SLO requires (with the margin); 0 = none
  double margin = 0;         // Slo::margin as applied

  double solo_step_rate() const { return 1.0 / whole.step(); }
  // Whether `step_rate` keeps the SLO; a relative tolerance keeps "exactly at the SLO" from failing
  // on rounding.
  bool MeetsSlo(double step_rate) const { return step_rate >= min_step_rate * (1 - 1e-9); }
  // Per-sequence rate for a step rate (tokens/s for decode).
  double SequenceRate(double step_rate) const {
    return step_rate * tenant->work.tokens_per_sequence_step;
  }
};
TenantLoad MakeLoad(const Tenant& tenant, const GpuKind& gpu);

// Bytes the tenants hold together.
double TotalMemory(std::span<const TenantLoad* const> loads);

}  // namespace gpumux
