#include "integrations/kubernetes/node_gpus.h"

#include "base/error.h"

namespace gpumux::k8s {

using nlohmann::json;

bool Slot::Fits(const PodRequest& pod, std::string* why) const {
  auto no = [&](std::string reason) {
    if (why) *why = "GPU " + id.ToString() + ": " + reason;
    return false;
  };
  if (!healthy) return no("unhealthy");
  if (held_whole) return no("held whole by a pod");
  if (pod.asks_mig()) return no("its MIG instances are not made on demand");
  if (pod.gpu_count > 1 && is_mig())
    return no("a MIG instance; a pod of several GPUs takes whole GPUs");
  if (pod.gpu_count > 1 && mps)
    return no("shared by MPS; a pod of several GPUs takes time-sliced GPUs");
  if (pod.whole_gpu()) {
    if (is_mig()) return no("a MIG instance, not a whole GPU");
    if (pods > 0) return no(std::to_string(pods) + " pod(s) share it");
    return true;
  }
  const int memory = pod.memory_gib_per_gpu(), compute = pod.compute_percent_per_gpu();
  if (used_memory_gib + memory > memory_gib)
    return no(std::to_string(memory_gib - used_memory_gib) + " GiB of memory free, the pod asks " +
              std::to_string(memory));
  if (compute > 0 && is_mig())
    return no("a MIG instance takes no compute share (its slices are its compute)");
  if (used_compute_percent + compute > 100)
    return no(std::to_string(100 - used_compute_percent) + "% of compute free, the pod asks " +
              std::to_string(compute) + "%");
  return true;
}

void Slot::Count(const PodRequest& pod, int sign) {
  pods += sign;
  if (pod.whole_gpu()) {
    held_whole = sign > 0;
    return;
  }
  used_memory_gib += sign * pod.memory_gib_per_gpu();
  used_compute_percent += sign * pod.compute_percent_per_gpu();
}

uint32_t MigRoom::Taken() const {
  uint32_t taken = held;
  for (int s = 0; s < kMaxSlices; ++s)
    if (pods_on_slice[size_t(s)] > 0) taken |= 1u << s;
  return taken;
}

int MigRoom::Loss(const Placement& p) const {
  if (!healthy) return 0;
  const uint32_t taken = Taken();  // once, not per placement: the extender's filter runs this
  int loss = 0;
  for (const Placement& o : placements)
    if ((o.Mask() & p.Mask()) && !(taken & o.Mask())) loss += o.memory_slices;
  return loss;
}

int MigRoom::Weight() const {
  int weight = 0;
  for (const Placement& o : placements) weight += o.memory_slices;
  return weight;
}

void MigRoom::Count(const Placement& p, int sign) {
  for (int s = p.start; s < p.start + p.memory_slices && s < kMaxSlices; ++s)
    pods_on_slice[size_t(s)] += sign;
}

const MigRoom::Placement* MigRoom::Find(const std::string& profile, int start) const {
  for (const Placement& p : placements)
    if (p.profile == profile && p.start == start) return &p;
  return nullptr;
}

namespace {

// The rooms of annotation gpumux.io/mig-rooms (`where` names it for errors).
std::vector<MigRoom> ReadMigRooms(const json& value, const std::string& where) {
  json list = value.is_string() ? json::parse(value.get<std::string>(), nullptr, false) : json();
  if (!list.is_array()) throw BadInput(where + ": expected a JSON list of GPUs");
  std::vector<MigRoom> rooms;
  for (const json& r : list) {
    auto bad = [&] {
      return BadInput(where +
                      ": each GPU is {\"gpu\": N, \"healthy\": true|false, \"slices\": N (1 to " +
                      std::to_string(MigRoom::kMaxSlices) +
                      "), \"held\": [slice, ...], \"placements\": [[\"1g.10gb\", start, memory "
                      "slices], ...]}, got " +
                      r.dump());
    };
    if (!r.is_object() || !r.contains("gpu") || !r["gpu"].is_number_unsigned() ||
        !r.contains("slices") || !r["slices"].is_number_unsigned() ||
        (r.contains("healthy") && !r["healthy"].is_boolean()) || !r.contains("placements") ||
        !r["placements"].is_array() || (r.contains("held") && !r["held"].is_array()))
      throw bad();
    MigRoom room;
    room.gpu = int(std::min<uint64_t>(r["gpu"].get<uint64_t>(), 1023));
    room.healthy = r.value("healthy", true);
    uint64_t slices = r["slices"].get<uint64_t>();
    if (slices < 1 || slices > MigRoom::kMaxSlices) throw bad();
    room.slices = int(slices);
    auto slice_in_range = [&](const json& s, uint64_t below) {
      return s.is_number_unsigned() && s.get<uint64_t>() < below;
    };
    for (const json& s : r.value("held", json::array())) {
      if (!slice_in_range(s, slices)) throw bad();
      room.held |= 1u << s.get<uint64_t>();
    }
    for (const json& p : r["placements"]) {
      if (!p.is_array() || p.size() != 3 || !p[0].is_string() || p[0].get<std::string>().empty() ||
          p[0].get<std::string>().size() > 24 || !slice_in_range(p[1], slices) ||
          !slice_in_range(p[2], slices + 1) || p[2].get<uint64_t>() == 0 ||
          p[1].get<uint64_t>() + p[2].get<uint64_t>() > slices)
        throw bad();
      room.placements.push_back(
          {p[0].get<std::string>(), int(p[1].get<uint64_t>()), int(p[2].get<uint64_t>())});
    }
    rooms.push_back(std::move(room));
  }
  return rooms;
}

}  // namespace

NodeGpus NodeGpus::FromNode(const json& node) {
  if (!node.is_object()) throw BadInput("node: expected a v1.Node object, got " + node.dump());
  std::string name = node.value("/metadata/name"_json_pointer, std::string());
  const json annotations = node.value("/metadata/annotations"_json_pointer, json::object());
  if (!annotations.is_object()) return {};
  std::vector<MigRoom> rooms;
  if (annotations.contains(kMigRoomsAnnotation))
    rooms = ReadMigRooms(annotations[kMigRoomsAnnotation],
                         "node " + name + ": annotation " + kMigRoomsAnnotation);
  if (!annotations.contains(kNodeGpusAnnotation)) return NodeGpus({}, std::move(rooms));
  std::string where = "node " + name + ": annotation " + kNodeGpusAnnotation;
  const json& value = annotations[kNodeGpusAnnotation];
  json list = value.is_string() ? json::parse(value.get<std::string>(), nullptr, false) : json();
  if (!list.is_array()) throw BadInput(where + ": expected a JSON list of GPUs");
  std::vector<Slot> slots;
  for (const json& s : list) {
    if (!s.is_object() || !s.contains("gpu") || !s["gpu"].is_number_unsigned() ||
        !s.contains("memory_gib") || !s["memory_gib"].is_number_unsigned() ||
        (s.contains("instance") && !s["instance"].is_number_unsigned()) ||
        (s.contains("healthy") && !s["healthy"].is_boolean()) ||
        (s.contains("mode") && !s["mode"].is_string()))
      throw BadInput(where +
                     ": each GPU is {\"gpu\": N, \"instance\": N (MIG only), "
                     "\"memory_gib\": N, \"healthy\": true|false, \"mode\": \"mps\" (MPS "
                     "only)}, got " +
                     s.dump());
    Slot slot;
    slot.id = {
        int(std::min<uint64_t>(s["gpu"].get<uint64_t>(), 1023)),
        s.contains("instance") ? int(std::min<uint64_t>(s["instance"].get<uint64_t>(), 63)) : -1};
    slot.memory_gib = int(std::min<uint64_t>(s["memory_gib"].get<uint64_t>(), 1 << 20));
    slot.healthy = s.value("healthy", true);
    slot.mps = s.value("mode", "") == "mps";
    slots.push_back(slot);
  }
  return NodeGpus(std::move(slots), std::move(rooms));
}

std::string NodeGpus::Annotation() const {
  json list = json::array();
  for (const Slot& s : slots_) {
    json j = {{"gpu", s.id.gpu}, {"memory_gib", s.memory_gib}, {"healthy", s.healthy}};
    if (s.is_mig()) j["instance"] = s.id.instance;
    if (s.mps) j["mode"] = "mps";
    list.push_back(j);
  }
  return list.dump();
}

std::string NodeGpus::MigRoomsAnnotation() const {
  if (mig_rooms_.empty()) return "";
  json list = json::array();
  for (const MigRoom& r : mig_rooms_) {
    json held = json::array(), placements = json::array();
    for (int s = 0; s < r.slices; ++s)
      if (r.held & (1u << s)) held.push_back(s);
    for (const MigRoom::Placement& p : r.placements)
      placements.push_back({p.profile, p.start, p.memory_slices});
    list.push_back({{"gpu", r.gpu},
                    {"healthy", r.healthy},
                    {"slices", r.slices},
                    {"held", held},
                    {"placements", placements}});
  }
  return list.dump();
}

MigRoom* NodeGpus::FindMigRoom(int gpu) {
  for (MigRoom& r : mig_rooms_)
    if (r.gpu == gpu) return &r;
  return nullptr;
}

MigChoice NodeGpus::ChooseMigPlacement(const PodRequest& pod, std::string* why) const {
  MigChoice best;
  int best_loss = 0;
  std::string reasons;
  for (size_t r = 0; r < mig_rooms_.size(); ++r) {
    const MigRoom& room = mig_rooms_[r];
    bool offered = false;
    for (size_t i = 0; i < room.placements.size(); ++i) {
      const MigRoom::Placement& p = room.placements[i];
      if (p.profile != pod.mig_profile) continue;
      offered = true;
      if (!room.Free(p)) continue;
      int loss = room.Loss(p);
      if (best.room >= 0 && loss >= best_loss) continue;
      best_loss = loss;
      best = {int(r), int(i), room.Weight() > 0 ? 10.0 * (1 - double(loss) / room.Weight()) : 0};
    }
    if (!why) continue;  // hot path of the extender's filter: the reasons only where asked
    std::string reason =
        !room.healthy ? "unhealthy"
        : !offered    ? "makes no " + pod.mig_profile + " instance"
                      : "no " + pod.mig_profile + " placement left beside the instances there";
    reasons += (reasons.empty() ? "" : "; ") + ("GPU " + std::to_string(room.gpu) + ": " + reason);
  }
  if (best.room < 0 && why)
    *why = mig_rooms_.empty() ? "no GPU whose MIG instances are made on demand (the gpumux "
                                "device plugin's --dynamic-mig)"
                              : reasons;
  return best;
}

Slot* NodeGpus::Find(const SlotId& id) {
  for (Slot& s : slots_)
    if (s.id == id) return &s;
  return nullptr;
}

bool NodeGpus::Fits(const PodRequest& pod) const {
  if (pod.asks_mig()) return ChooseMigPlacement(pod).room >= 0;
  int fitting = 0;
  for (const Slot& s : slots_)
    if (s.Fits(pod) && ++fitting >= pod.gpu_count) return true;
  return false;
}

std::vector<int> NodeGpus::FittingSlots(const PodRequest& pod, std::string* why) const {
  if (pod.asks_mig()) {  // a MIG room, not a slot
    ChooseMigPlacement(pod, why);
    return {};
  }
  std::vector<int> fitting;
  std::string reasons;
  for (size_t i = 0; i < slots_.size(); ++i) {
    std::string reason;
    if (slots_[i].Fits(pod, &reason))
      fitting.push_back(int(i));
    else if (reasons.size() < 400)
      reasons += (reasons.empty() ? "" : "; ") + reason;
  }
  if (int(fitting.size()) < pod.gpu_count && why) {
    if (slots_.empty())
      *why = "no gpumux GPU (the gpumux device plugin publishes them on the node)";
    else if (pod.gpu_count == 1)
      *why = reasons;
    else
      *why = "the pod needs " + std::to_string(pod.gpu_count) + " GPUs, " +
             std::to_string(fitting.size()) + " fit" + (reasons.empty() ? "" : ": " + reasons);
  }
  return fitting;
}

std::vector<int> NodeGpus::SlotsForPodOfSeveralGpus(const PodRequest& pod) const {
  std::vector<int> fitting = FittingSlots(pod, nullptr);
  if (int(fitting.size()) < pod.gpu_count) return {};
  auto left = [&](int i) {
    return slots_[size_t(i)].memory_gib - slots_[size_t(i)].used_memory_gib;
  };
  std::stable_sort(fitting.begin(), fitting.end(), [&](int a, int b) { return left(a) < left(b); });
  fitting.resize(size_t(pod.gpu_count));
  return fitting;
}

}  // namespace gpumux::k8s
