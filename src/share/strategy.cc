#include "share/strategy.h"

#include <fmt/format.h>

#include <algorithm>

namespace gpumux {

TenantOutcome MakeOutcome(const TenantLoad& load, double step_rate, std::string slice) {
  const Tenant& t = *load.tenant;
  TenantOutcome o;
  o.name = t.name;
  o.slice = std::move(slice);
  o.unit = t.unit();
  o.solo_rate = load.SequenceRate(load.solo_step_rate());
  o.rate = load.SequenceRate(step_rate);
  o.required_rate = load.SequenceRate(load.min_step_rate);
  o.margin = load.margin;
  o.slowdown = o.solo_rate / o.rate;
  o.memory = load.memory;
  o.bandwidth = step_rate * t.work.bytes_per_step;
  o.flops = step_rate * t.work.flops_per_step;
  o.meets_slo = load.MeetsSlo(step_rate);
  return o;
}

void Conclude(StrategyResult* r, bool memory_ok, const std::string& cause, bool name_slice) {
  r->headroom = std::numeric_limits<double>::infinity();
  const TenantOutcome* worst = nullptr;
  double worst_ratio = std::numeric_limits<double>::infinity();
  bool slos_met = true;
  for (const TenantOutcome& o : r->tenants) {
    double ratio = o.required_rate > 0 ? o.rate / o.required_rate : o.rate / o.solo_rate;
    r->headroom = std::min(r->headroom, ratio);
    slos_met &= o.meets_slo;
    if (o.required_rate > 0 && ratio < worst_ratio) {
      worst_ratio = ratio;
      worst = &o;
    }
  }
  r->fits = memory_ok && slos_met;
  if (!cause.empty() && (!memory_ok || r->tenants.empty())) {
    r->verdict = cause;
    return;
  }
  std::string tail;
  if (worst) {
    tail = fmt::format("{}{} {:.4g} {} {} SLO {:.4g}", worst->name,
                       name_slice ? " on " + worst->slice + ":" : "", worst->rate, worst->unit,
                       worst->meets_slo ? ">=" : "<", worst->required_rate);
  }
  r->verdict = cause.empty() ? tail : tail.empty() ? cause : cause + " -> " + tail;
}

}  // namespace gpumux
