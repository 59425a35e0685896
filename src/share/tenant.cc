#include "share/tenant.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <vector>

namespace gpumux {

double Slo::RequiredRate(double solo_rate, double margin) const {
  double need = 0;
  if (min_rate) need = std::max(need, *min_rate / (1 - margin));
  if (max_ms_per_token) need = std::max(need, 1000.0 / *max_ms_per_token / (1 - margin));
  if (max_slowdown) need = std::max(need, solo_rate / *max_slowdown);
  return need;
}

std::string Slo::Describe(const std::string& unit) const {
  std::vector<std::string> parts;
  if (min_rate) parts.push_back(fmt::format(">= {:.4g} {}", *min_rate, unit));
  if (max_ms_per_token) parts.push_back(fmt::format("<= {:.4g} ms/token", *max_ms_per_token));
  if (max_slowdown) parts.push_back(fmt::format("<= {:.3g}x slowdown", *max_slowdown));
  if (parts.empty()) return "none";
  return fmt::format("{}", fmt::join(parts, ", "));
}

double TotalMemory(std::span<const TenantLoad* const> loads) {
  double sum = 0;
  for (const TenantLoad* l : loads) sum += l->memory;
  return sum;
}

TenantLoad MakeLoad(const Tenant& tenant, const GpuKind& gpu) {
  const Workload w = OnGpu(tenant.work, gpu);
  double peak = gpu.PeakFlops(w.compute_dtype);
  TenantLoad load;
  load.tenant = &tenant;
  load.memory = w.memory_bytes();
  load.whole = StepTimesOn(w, gpu);
  load.bandwidth_use = w.bytes_per_step / gpu.bandwidth;
  // The SMs' time: the step's math, or unpacking its quantised weights if that is longer.
  load.compute_use = std::max(w.flops_per_step / peak, DequantSecondsOn(w, gpu));
  double solo_rate = load.SequenceRate(load.solo_step_rate());
  load.margin = tenant.slo.margin.value_or(w.expected_error);
  load.min_step_rate = tenant.slo.RequiredRate(solo_rate, load.margin) / w.tokens_per_sequence_step;
  return load;
}

}  // namespace gpumux
