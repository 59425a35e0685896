#include "core/mig_layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "base/error.h"

namespace gpumux {
namespace {

unsigned Mask(const MigProfile& p, int start) { return ((1u << p.memory_slices) - 1u) << start; }

// Largest instance first, then highest start: the MIG user guide's advice for creation order.
bool LargerFirst(const MigInstance& a, const MigInstance& b) {
  if (a.profile->memory_slices != b.profile->memory_slices) {
    return a.profile->memory_slices > b.profile->memory_slices;
  }
  return a.start > b.start;
}

}  // namespace

int DriverDefaultStart(const MigProfile& profile, unsigned occupied_mask) {
  int best = -1;
  for (int start : profile.placement_starts) {
    if ((Mask(profile, start) & occupied_mask) == 0) best = std::max(best, start);
  }
  return best;
}

std::string MigLayout::Violation(const MigGeometry& geo) const {
  unsigned occupied = 0;
  int compute = 0, media = 0;
  std::map<const MigProfile*, int> count;
  for (const MigInstance& inst : instances) {
    const MigProfile& p = *inst.profile;
    if (std::find(p.placement_starts.begin(), p.placement_starts.end(), inst.start) ==
        p.placement_starts.end()) {
      return fmt::format("{} may not start at slot {}", p.name, inst.start);
    }
    unsigned mask = Mask(p, inst.start);
    if (mask & occupied) return fmt::format("{}@{} overlaps another instance", p.name, inst.start);
    occupied |= mask;
    if (++count[&p] > p.max_instances) {
      return fmt::format("more than {} instances of {}", p.max_instances, p.name);
    }
    compute += p.compute_slices;
    media += p.holds_media_engines ? 1 : 0;
  }
  if (compute > geo.compute_slices) {
    return fmt::format("{} compute slices used of {}", compute, geo.compute_slices);
  }
  if (media > 1) return "more than one media-engine (+me) instance";
  return "";
}

std::vector<MigInstance> MigLayout::FirstFitCreationOrder(const MigGeometry&) const {
  std::vector<MigInstance> order = instances;
  // Largest first, then every other order until one reproduces the layout.
  std::sort(order.begin(), order.end(), LargerFirst);
  auto reproduces = [](const std::vector<MigInstance>& seq) {
    unsigned occupied = 0;
    for (const MigInstance& inst : seq) {
      if (DriverDefaultStart(*inst.profile, occupied) != inst.start) return false;
      occupied |= Mask(*inst.profile, inst.start);
    }
    return true;
  };
  do {
    if (reproduces(order)) return order;
  } while (std::next_permutation(order.begin(), order.end(), LargerFirst));
  return {};
}

std::string MigLayout::CreateCommand(const MigGeometry& geo) const {
  std::vector<MigInstance> order = FirstFitCreationOrder(geo);
  if (order.empty()) {
    order = instances;
    std::sort(order.begin(), order.end(), LargerFirst);
  }
  std::string list;
  for (const MigInstance& inst : order) {
    list += fmt::format("{}{}:{}", list.empty() ? "" : ",", inst.profile->id, inst.start);
  }
  return fmt::format("nvidia-smi mig -cgi {} -C", list);
}

std::string MigInstance::Entry() const { return profile->name + "@" + std::to_string(start); }

std::string MigLayout::Describe() const {
  std::string out;
  for (const MigInstance& inst : instances) out += (out.empty() ? "" : " ") + inst.Entry();
  return out;
}

MigLayout PlaceInCreationOrder(const MigGeometry& geo, const std::vector<std::string>& profiles) {
  MigLayout layout;
  unsigned occupied = 0;
  for (const std::string& entry : profiles) {
    // "NAME" or "NAME@START" (an explicit placement, as `nvidia-smi mig -cgi ID:START` takes).
    size_t at = entry.find('@');
    std::string name = entry.substr(0, at);
    auto p = std::find_if(geo.profiles.begin(), geo.profiles.end(),
                          [&](const MigProfile& q) { return q.name == name; });
    if (p == geo.profiles.end()) throw BadInput("no MIG profile '" + name + "' on this GPU");
    int start = -1;
    if (at == std::string::npos) {
      start = DriverDefaultStart(*p, occupied);
    } else {
      std::string digits = entry.substr(at + 1);
      if (digits.empty() || digits.size() > 2 ||
          digits.find_first_not_of("0123456789") != std::string::npos) {
        throw BadInput("'" + entry + "': expected NAME@START with START a slot number");
      }
      start = std::stoi(digits);
      auto& starts = p->placement_starts;
      if (std::find(starts.begin(), starts.end(), start) == starts.end()) {
        throw BadInput(fmt::format("{} may not start at slot {}", name, start));
      }
      if (Mask(*p, start) & occupied) start = -1;
    }
    if (start < 0) {
      throw BadInput(fmt::format("no room for {} after {}", entry,
                                 layout.instances.empty() ? "nothing" : layout.Describe()));
    }
    layout.instances.push_back({&*p, start});
    for (int s = start; s < start + p->memory_slices; ++s) occupied |= 1u << s;
  }
  if (std::string why = layout.Violation(geo); !why.empty()) throw BadInput(why);
  return layout;
}

std::vector<std::string> KeepingInstances(const MigGeometry& geo, const MigLayout& now,
                                          const std::vector<KeptInstance>& kept,
                                          const std::vector<std::string>& next) {
  MigLayout placed = PlaceInCreationOrder(geo, next);
  const size_t n = placed.instances.size();
  std::vector<const MigInstance*> order(n, nullptr);
  std::vector<bool> taken(n, false);
  for (const KeptInstance& k : kept) {
    const MigInstance& was = now.instances.at(size_t(k.index));
    std::string what = "instance " + std::to_string(k.index) + " (" + was.profile->name + " at " +
                       std::to_string(was.start) + ", " + k.held_by + ")";
    size_t found = n;
    for (size_t i = 0; i < n && found == n; ++i)
      if (!taken[i] && placed.instances[i] == was) found = i;
    if (found == n)
      throw Conflict(what + " would move or go; a new layout keeps it at its placement");
    if (size_t(k.index) >= n)
      throw Conflict(what + " keeps its number only in a layout of at least " +
                     std::to_string(k.index + 1) + " instances");
    taken[found] = true;
    order[size_t(k.index)] = &placed.instances[found];
  }
  size_t next_free = 0;
  for (size_t i = 0; i < n; ++i) {
    if (taken[i]) continue;
    while (order[next_free]) ++next_free;
    order[next_free] = &placed.instances[i];
  }
  std::vector<std::string> layout;
  for (const MigInstance* m : order) layout.push_back(m->Entry());
  return layout;
}

}  // namespace gpumux
