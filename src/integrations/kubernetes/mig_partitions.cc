#include "integrations/kubernetes/mig_partitions.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <vector>

#include "base/error.h"
#include "integrations/kubernetes/pod_tenants.h"

namespace gpumux::k8s {

using nlohmann::json;

namespace {

constexpr uint64_t kGiB = 1ull << 30;
constexpr char kAt[] = "-at-";

// A profile's name as a DNS label part: "1g.10gb" -> "1g-10gb", "1g.10gb+me" -> "1g-10gb-me".
std::string LabelOf(const std::string& profile) {
  std::string label;
  for (char c : profile) label += (c == '.' || c == '+') ? '-' : char(std::tolower(c));
  return label;
}

std::string CounterSetName(int gpu) { return "gpu-" + std::to_string(gpu) + "-mig"; }

}  // namespace

std::string MigPlacementDevice(int gpu, const MigPlacement& p) {
  return "gpu-" + std::to_string(gpu) + "-mig-" + LabelOf(p.profile) + kAt +
         std::to_string(p.start);
}

std::optional<int> GpuOfMigPlacementDevice(const std::string& device) {
  if (device.rfind("gpu-", 0) != 0 || device.find(kAt) == std::string::npos) return std::nullopt;
  size_t end = device.find("-mig-");
  if (end == std::string::npos || end == 4) return std::nullopt;
  std::string digits = device.substr(4, end - 4);
  if (digits.size() > 4 || digits.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return std::stoi(digits);
}

std::optional<MigGpu> MigGpu::Read(const json& gpu, const json& tenants) {
  if (gpu.value("mode", "") != "mig" || !gpu.contains("mig_geometry")) return std::nullopt;
  MigGpu out;
  try {
    out.gpu = gpu.at("index").get<int>();
    out.model = gpu.value("name", "");
    const json& geo = gpu.at("mig_geometry");
    out.slots = geo.at("slots").get<int>();
    out.compute_slices = geo.at("compute_slices").get<int>();
    if (out.slots < 1 || out.slots > 16 || out.compute_slices < 1)
      throw BadInput("mig_geometry: " + geo.dump());
    std::map<std::string, MigPlacement> shape;  // by profile name, start 0
    for (const json& p : geo.at("profiles")) {
      MigPlacement base{p.at("name").get<std::string>(), 0, p.at("memory_slices").get<int>(),
                        p.at("compute_slices").get<int>(), p.at("memory_bytes").get<uint64_t>()};
      shape[base.profile] = base;
      if (p.value("media_engines", false)) continue;
      for (const json& start : p.at("starts")) {
        base.start = start.get<int>();
        if (base.start < 0 || base.start + base.memory_slices > out.slots) continue;
        out.placements.push_back(base);
      }
    }
    for (const json& i : gpu.value("instances", json::array())) {
      if (!i.contains("profile") || !i.contains("start")) continue;  // placed by no known geometry
      auto known = shape.find(i.at("profile").get<std::string>());
      if (known == shape.end()) continue;
      Instance instance{i.at("instance").get<int>(), known->second, i.value("uuid", "")};
      instance.placement.start = i.at("start").get<int>();
      instance.placement.memory_bytes = i.value("memory_bytes", instance.placement.memory_bytes);
      out.instances.push_back(instance);
    }
    for (const json& t : tenants.at("tenants")) {
      std::optional<TenantOwner> owner = OwnerOfTenant(t.at("id").get<std::string>());
      const bool claim = owner && owner->kind == TenantOwner::kClaim;
      // Every device it is admitted on ("places"; an older gpumuxd gives its first alone).
      std::vector<std::string> places;
      if (t.contains("places")) {
        for (const json& p : t["places"]) places.push_back(p.get<std::string>());
      } else {
        int instance = t.value("instance", -1);
        places.push_back(std::to_string(t.at("gpu").get<int>()) +
                         (instance < 0 ? "" : "." + std::to_string(instance)));
      }
      for (const std::string& place : places) {
        for (Instance& i : out.instances)
          if (place == std::to_string(out.gpu) + "." + std::to_string(i.index))
            ++(claim ? i.claim_tenants : i.other_tenants);
      }
    }
  } catch (const json::exception& e) {
    throw BadInput(std::string("gpumuxd's answer for a MIG GPU: ") + e.what());
  }
  return out;
}

json MigGpu::CounterSet() const {
  json counters = json::object();
  int compute = compute_slices;
  std::vector<bool> held(size_t(slots), false);
  for (const Instance& i : instances) {
    if (i.other_tenants == 0) continue;
    compute -= i.placement.compute_slices;
    for (int s = i.placement.start; s < i.placement.start + i.placement.memory_slices; ++s)
      held[size_t(s)] = true;
  }
  for (int s = 0; s < slots; ++s)
    counters["memory-slice-" + std::to_string(s)] = {{"value", held[size_t(s)] ? "0" : "1"}};
  counters["compute-slices"] = {{"value", std::to_string(std::max(compute, 0))}};
  return {{"name", CounterSetName(gpu)}, {"counters", counters}};
}

std::vector<json> MigGpu::Devices() const {
  std::vector<json> devices;
  for (const MigPlacement& p : placements) {
    if (!Offered(MigPlacementDevice(gpu, p))) continue;
    json attributes = {{"index", {{"int", gpu}}},
                       {"mode", {{"string", "mig"}}},
                       {"model", {{"string", model}}},
                       {"profile", {{"string", p.profile}}},
                       {"start", {{"int", p.start}}}};
    if (const Instance* made = InstanceAt(p)) {
      attributes["instance"] = {{"int", made->index}};
      if (!made->uuid.empty()) attributes["uuid"] = {{"string", made->uuid}};
    }
    json used = {{"compute-slices", {{"value", std::to_string(p.compute_slices)}}}};
    for (int s = p.start; s < p.start + p.memory_slices; ++s)
      used["memory-slice-" + std::to_string(s)] = {{"value", "1"}};
    devices.push_back(
        {{"name", MigPlacementDevice(gpu, p)},
         {"attributes", attributes},
         // One claim's alone (MIG isolates it): its memory is the quota unless the claim's
         // parameters give one.
         {"capacity", {{"memory", {{"value", std::to_string(p.memory_bytes / kGiB) + "Gi"}}}}},
         {"consumesCounters", {{{"counterSet", CounterSetName(gpu)}, {"counters", used}}}}});
  }
  return devices;
}

std::optional<MigPlacement> MigGpu::Offered(const std::string& device) const {
  for (const MigPlacement& p : placements) {
    if (MigPlacementDevice(gpu, p) != device) continue;
    for (const Instance& i : instances) {
      if (!i.placement.Overlaps(p)) continue;
      bool at_p = i.placement.profile == p.profile && i.placement.start == p.start;
      if (i.other_tenants > 0 || (i.kept && !at_p)) return std::nullopt;
    }
    return p;
  }
  return std::nullopt;
}

const MigGpu::Instance* MigGpu::InstanceAt(const MigPlacement& p) const {
  for (const Instance& i : instances)
    if (i.placement.profile == p.profile && i.placement.start == p.start) return &i;
  return nullptr;
}

std::vector<std::string> MigGpu::LayoutMaking(const MigPlacement& p) const {
  std::vector<std::string> layout;
  for (const Instance& i : instances)
    if (!(i.idle() && !i.kept && i.placement.Overlaps(p))) layout.push_back(i.placement.Entry());
  if (!InstanceAt(p)) layout.push_back(p.Entry());
  return layout;
}

std::vector<std::string> MigGpu::LayoutWithout(const std::set<int>& indices) const {
  std::vector<std::string> layout;
  for (const Instance& i : instances)
    if (!indices.count(i.index)) layout.push_back(i.placement.Entry());
  return layout;
}

}  // namespace gpumux::k8s
