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

NodeGpus NodeGpus::FromNode(const json& node) {
  if (!node.is_object()) throw BadInput("node: expected a v1.Node object, got " + node.dump());
  std::string name = node.value("/metadata/name"_json_pointer, std::string());
  const json annotations = node.value("/metadata/annotations"_json_pointer, json::object());
  if (!annotations.is_object() || !annotations.contains(kNodeGpusAnnotation)) return {};
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
  return NodeGpus(std::move(slots));
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

Slot* NodeGpus::Find(const SlotId& id) {
  for (Slot& s : slots_)
    if (s.id == id) return &s;
  return nullptr;
}

bool NodeGpus::Fits(const PodRequest& pod) const {
  int fitting = 0;
  for (const Slot& s : slots_)
    if (s.Fits(pod) && ++fitting >= pod.gpu_count) return true;
  return false;
}

std::vector<int> NodeGpus::FittingSlots(const PodRequest& pod, std::string* why) const {
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
