// Helpers shared by the share/ tests: tenants built from the bundled catalog, kept alive together
// with their loads.
#pragma once

#include <deque>
#include <string>
#include <vector>

#include "core/catalog.h"
#include "share/tenant.h"

namespace gpumux {

class TenantSet {
 public:
  explicit TenantSet(const GpuKind& gpu) : gpu_(gpu) {}

  // A batch-1 decoder of `params` parameters in bf16 without KV cache, at efficiency `eta`.
  const TenantLoad* AddDecoder(const std::string& name, double params, double eta, Slo slo) {
    LlmSpec spec;
    spec.params = params;
    spec.bandwidth_efficiency = eta;
    return Add({name, LlmDecode(spec), slo});
  }
  const TenantLoad* Add(Tenant t) {
    tenants_.push_back(std::move(t));
    loads_.push_back(MakeLoad(tenants_.back(), gpu_));
    ptrs_.push_back(&loads_.back());
    return ptrs_.back();
  }
  const std::vector<const TenantLoad*>& loads() const { return ptrs_; }

 private:
  const GpuKind& gpu_;
  std::deque<Tenant> tenants_;
  std::deque<TenantLoad> loads_;
  std::vector<const TenantLoad*> ptrs_;
};

inline Slo MinRate(double r) {
  Slo s;
  s.min_rate = r;
  return s;
}

}  // namespace gpumux
