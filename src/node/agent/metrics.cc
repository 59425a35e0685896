#include "node/agent/metrics.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <sstream>

#include "service/log.h"

namespace gpumux::agent {
namespace {

struct Family {
  const char* name;
  const char* type;
  const char* help;
};

}  // namespace

std::string FormatMetrics(const std::vector<GpuMetrics>& gpus, uint64_t now_ns) {
  std::ostringstream out;
  out.precision(12);
  auto family = [&](const Family& f, const std::function<void()>& samples) {
    out << "# HELP " << f.name << ' ' << f.help << "\n# TYPE " << f.name << ' ' << f.type << '\n';
    samples();
  };
  family({"gpumux_gpu_memory_bytes", "gauge", "Memory of the GPU."}, [&] {
    for (const GpuMetrics& g : gpus)
      out << "gpumux_gpu_memory_bytes{gpu=\"" << g.id << "\",name=\"" << service::EscapeQuoted(g.name)
          << "\"} " << g.capacity << '\n';
  });
  family({"gpumux_gpu_memory_enforcement", "gauge",
          "What holds tenants' memory quotas on the GPU: by=\"shim\", \"driver\" (the driver's "
          "limit per cgroup, for tenants bound to one) or \"mig\"."},
         [&] {
           for (const GpuMetrics& g : gpus)
             out << "gpumux_gpu_memory_enforcement{gpu=\"" << g.id << "\",by=\"" << g.enforcement
                 << "\"} 1\n";
         });
  family({"gpumux_gpu_tenants", "gauge", "Tenants admitted on the GPU."}, [&] {
    for (const GpuMetrics& g : gpus)
      out << "gpumux_gpu_tenants{gpu=\"" << g.id << "\"} " << g.tenants.size() << '\n';
  });
  // What a calibration measured, for the GPUs given one (a family only where some GPU has it).
  struct CalibratedFamily {
    Family f;
    double GpuMetrics::*value;
  };
  const bool calibrated = std::any_of(
      gpus.begin(), gpus.end(), [](const GpuMetrics& g) { return g.calibrated_bandwidth > 0; });
  for (const CalibratedFamily& c :
       {CalibratedFamily{
            {"gpumux_gpu_calibrated_bandwidth_bytes_per_second", "gauge",
             "HBM bandwidth a streaming kernel achieved on the GPU (gpumux calibrate)."},
            &GpuMetrics::calibrated_bandwidth},
        CalibratedFamily{{"gpumux_gpu_calibrated_flops_per_second", "gauge",
                          "Math rate a matmul-like kernel achieved on the GPU (gpumux calibrate)."},
                         &GpuMetrics::calibrated_flops}}) {
    if (!calibrated) break;
    family(c.f, [&] {
      for (const GpuMetrics& g : gpus)
        if (g.calibrated_bandwidth > 0)
          out << c.f.name << "{gpu=\"" << g.id << "\"} " << g.*c.value << '\n';
    });
  }
  // One family per tenant measure.
  struct TenantFamily {
    Family f;
    // nullopt: no sample for this tenant (what the device cannot say)
    std::function<std::optional<double>(const node::TenantUsage&, const GpuMetrics&)> value;
  };
  const TenantFamily families[] = {
      {{"gpumux_tenant_memory_quota_bytes", "gauge", "Memory quota of the tenant."},
       [](auto& u, auto&) { return double(u.quota); }},
      {{"gpumux_tenant_memory_used_bytes", "gauge", "Memory the tenant's processes hold."},
       [](auto& u, auto&) { return double(u.used); }},
      {{"gpumux_tenant_compute_cap_ratio", "gauge",
        "Most GPU time the tenant may use (1 = no cap)."},
       [](auto& u, auto&) { return u.cap_permille / 1000.0; }},
      {{"gpumux_tenant_gpu_time_seconds_total", "counter", "GPU time the tenant's processes used."},
       [](auto& u, auto&) { return u.gpu_ns / 1e9; }},
      {{"gpumux_tenant_gpu_time_share_ratio", "gauge",
        "GPU time used over wall time since the tenant was admitted."},
       [now_ns](auto& u, auto&) {
         return now_ns > u.added_ns ? double(u.gpu_ns) / double(now_ns - u.added_ns) : 0.0;
       }},
      {{"gpumux_tenant_held_launches_total", "counter",
        "Kernel launches held back by the tenant's compute share."},
       [](auto& u, auto&) { return double(u.held); }},
      {{"gpumux_tenant_refused_allocations_total", "counter",
        "Allocations refused (out of memory) for the tenant's quota."},
       [](auto& u, auto&) { return double(u.refused); }},
      {{"gpumux_tenant_reclaimed_bytes_total", "counter",
        "Memory returned from the tenant's dead processes."},
       [](auto& u, auto&) { return double(u.reclaimed); }},
      {{"gpumux_tenant_reclaimed_processes_total", "counter",
        "Dead processes of the tenant whose memory was reclaimed."},
       [](auto& u, auto&) { return double(u.reclaimed_processes); }},
      {{"gpumux_tenant_device_memory_bytes", "gauge",
        "Memory the tenant's processes hold on the device as the driver counts it, CUDA contexts "
        "included."},
       [](auto& u, const GpuMetrics& g) -> std::optional<double> {
         auto m = g.memory.find(u.id);
         if (m == g.memory.end()) return std::nullopt;
         return double(m->second.held);
       }},
      {{"gpumux_tenant_memory_outside_grants_bytes", "gauge",
        "Memory the tenant's processes hold on the device beyond what gpumuxd granted them."},
       [](auto& u, const GpuMetrics& g) -> std::optional<double> {
         auto m = g.memory.find(u.id);
         if (m == g.memory.end()) return std::nullopt;
         return double(m->second.outside);
       }},
      {{"gpumux_tenant_memory_kills_total", "counter",
        "Processes of the tenant killed for holding device memory past its quota around the shim "
        "(since gpumuxd started)."},
       [](auto& u, const GpuMetrics& g) {
         auto k = g.memory_kills.find(u.id);
         return k == g.memory_kills.end() ? 0.0 : double(k->second);
       }},
  };
  for (const TenantFamily& tf : families) {
    family(tf.f, [&] {
      for (const GpuMetrics& g : gpus) {
        for (const node::TenantUsage& u : g.tenants) {
          std::optional<double> value = tf.value(u, g);
          if (!value) continue;
          out << tf.f.name << "{gpu=\"" << g.id << "\",tenant=\"" << service::EscapeQuoted(u.id) << '"';
          if (auto l = g.labels.find(u.id); l != g.labels.end()) {
            for (const TenantLabels::Field& f : TenantLabels::kFields) {
              const std::string& value = l->second.*f.value;
              if (!value.empty())
                out << ',' << f.metric_label << "=\"" << service::EscapeQuoted(value) << '"';
            }
          }
          out << "} " << *value << '\n';
        }
      }
    });
  }
  return out.str();
}

}  // namespace gpumux::agent
