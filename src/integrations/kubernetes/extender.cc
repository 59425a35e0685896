#include "integrations/kubernetes/extender.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <deque>
#include <optional>
#include <set>
#include <string_view>
#include <thread>

#include "base/error.h"
#include "base/input_file.h"
#include "fleet/policy.h"
#include "integrations/kubernetes/policy_scores.h"
#include "service/log.h"

namespace gpumux::k8s {

using nlohmann::json;

namespace {

constexpr auto kUnconfirmedBindKept = std::chrono::seconds(30);
constexpr size_t kSeenPodsKept = 10000;

// args[key], matching the key without regard to case, as Go's encoding/json does; null if absent.
const json& Key(const json& args, std::string_view key) {
  static const json kNull;
  if (!args.is_object()) return kNull;
  for (auto it = args.begin(); it != args.end(); ++it) {
    const std::string& k = it.key();
    if (k.size() == key.size() && std::equal(k.begin(), k.end(), key.begin(), [](char a, char b) {
          return std::tolower(static_cast<unsigned char>(a)) ==
                 std::tolower(static_cast<unsigned char>(b));
        }))
      return it.value();
  }
  return kNull;
}

std::string Text(const json& args, std::string_view key) {
  const json& v = Key(args, key);
  if (!v.is_string() || v.get<std::string>().empty())
    throw BadInput(std::string(key) + ": expected a non-empty string");
  return v.get<std::string>();
}

json ErrorBody(const std::string& message) { return {{"Error", message}}; }

}  // namespace

Extender::Extender(ExtenderConfig config, const KubeApi* api)
    : config_(std::move(config)),
      api_(api),
      scorer_(config_.policy) {  // an unknown policy is refused now, not at a pod
  if (api_) {
    nodes_informer_ =
        std::make_unique<Informer>(api_, "/api/v1/nodes",
                                   Informer::Handlers{[this](const json& n) { OnNode(n); },
                                                      [this](const json& n) { OnNodeGone(n); }});
    pods_informer_ =
        std::make_unique<Informer>(api_, "/api/v1/pods",
                                   Informer::Handlers{[this](const json& p) { OnPod(p); },
                                                      [this](const json& p) { OnPodGone(p); }});
  }
}

std::vector<std::string> Extender::Candidates(ExtenderArgs& args, bool* full_nodes) {
  std::vector<std::string> names;
  *full_nodes = !args.nodes.is_null();
  if (*full_nodes) {
    const json& items = Key(args.nodes, "items");
    if (!items.is_array()) throw BadInput("Nodes.items: expected the v1.NodeList's list of nodes");
    for (const json& node : items) {
      std::string name = node.value("/metadata/name"_json_pointer, std::string());
      if (name.empty()) throw BadInput("Nodes.items: a node without metadata.name");
      SetNode(name, NodeGpus::FromNode(node));
      names.push_back(name);
    }
    return names;
  }
  if (!args.has_node_names) throw BadInput("NodeNames: expected a list of node names (or Nodes)");
  return std::move(args.node_names);
}

bool Extender::SetNode(const std::string& name, const NodeGpus& gpus) {
  std::lock_guard lock(mu_);
  return PutNode(name, gpus) != NodeChange::kRefused;
}

Extender::NodeChange Extender::PutNode(const std::string& name, NodeGpus gpus) {
  bool fresh = !nodes_.count(name);
  if (fresh && nodes_.size() >= config_.max_nodes) return NodeChange::kRefused;
  node_set_changes_ += fresh;
  KnownNode& known = nodes_[name];
  NodeGpus& node = known.gpus;
  for (Slot& s : gpus.slots()) {
    if (Slot* old = node.Find(s.id)) {
      s.used_memory_gib = old->used_memory_gib;
      s.used_compute_percent = old->used_compute_percent;
      s.pods = old->pods;
      s.held_whole = old->held_whole;
    }
  }
  for (MigRoom& r : gpus.mig_rooms())
    if (MigRoom* old = node.FindMigRoom(r.gpu)) r.pods_on_slice = old->pods_on_slice;
  // The same slots again (a filter with full Nodes sends every node each time) keep their scores.
  if (gpus.slots() != node.slots() || gpus.mig_rooms() != node.mig_rooms()) known.memo.Forget();
  node = std::move(gpus);
  return fresh ? NodeChange::kLearnt : NodeChange::kUpdated;
}

size_t Extender::node_count() {
  std::lock_guard lock(mu_);
  return nodes_.size();
}

NodeGpus Extender::NodeState(const std::string& name) {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(name);
  return it == nodes_.end() ? NodeGpus() : it->second.gpus;
}

FilterResult Extender::Filter(ExtenderArgs args) {
  bool full = false;
  std::vector<std::string> names = Candidates(args, &full);
  FilterResult result;
  PodRequest pod;
  try {
    pod = ParsePod(args.pod);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kBadInput) throw;
    // A pod gpumuxd would refuse: no node can ever take it, and kube-scheduler shows why with
    // each node (and does not retry it until the pod changes).
    for (std::string& name : names)
      result.unresolvable.emplace_back(std::move(name), std::string("gpumux: ") + e.what());
    if (full) result.nodes = {{"items", json::array()}};
    return result;
  }
  std::vector<bool> fits(names.size());
  {
    std::lock_guard lock(mu_);
    if (pod.asks_gpumux()) {
      if (seen_.size() >= kSeenPodsKept) seen_.clear();
      seen_[pod.uid] = pod;
    }
    const std::vector<KnownNode*>& found = Find(names);
    for (size_t i = 0; i < names.size(); ++i) {
      // Hot path: a scan of the node's slots; the reason only where it fails.
      const NodeGpus* node = found[i] ? &found[i]->gpus : nullptr;  // a node not seen yet has none
      fits[i] = !pod.asks_gpumux() || (node && node->Fits(pod));
      if (fits[i]) continue;
      std::string why = "no gpumux GPU (the gpumux device plugin publishes them on the node)";
      if (node) node->FittingSlots(pod, &why);
      result.failed.emplace_back(names[i], "gpumux: " + why);
    }
  }
  if (!full) {
    for (size_t i = 0; i < names.size(); ++i)
      if (fits[i]) result.node_names.push_back(std::move(names[i]));
    return result;
  }
  // Candidates named the nodes in the order of Nodes.items.
  json items = json::array();
  const json& nodes = Key(args.nodes, "items");
  for (size_t i = 0; i < nodes.size(); ++i)
    if (fits[i]) items.push_back(nodes[i]);
  result.nodes = {{"items", items}};
  return result;
}

namespace {

// `text` as a JSON string. Hot path of the answers' writers: node names need no escaping.
void AppendJsonString(std::string* out, const std::string& text) {
  bool plain = std::all_of(text.begin(), text.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_';
  });
  if (plain) {
    *out += '"';
    *out += text;
    *out += '"';
  } else {
    *out += json(text).dump(-1, ' ', false, json::error_handler_t::replace);
  }
}

// `,"FIELD":{"node":"why",...}`: a FailedNodesMap.
void AppendNodeReasons(std::string* out, const char* field,
                       const std::vector<std::pair<std::string, std::string>>& reasons) {
  *out += ",\"";
  *out += field;
  *out += "\":{";
  for (size_t i = 0; i < reasons.size(); ++i) {
    if (i) *out += ',';
    AppendJsonString(out, reasons[i].first);
    *out += ':';
    AppendJsonString(out, reasons[i].second);
  }
  *out += '}';
}

}  // namespace

std::string FilterResult::Json() const {
  // Hot path (one name per candidate node): written as text, not built as a json value.
  std::string out = "{\"Nodes\":";
  out += nodes.is_null() ? "null" : nodes.dump(-1, ' ', false, json::error_handler_t::replace);
  out += ",\"NodeNames\":";
  if (nodes.is_null()) {
    out.reserve(out.size() + node_names.size() * 16);
    out += '[';
    for (size_t i = 0; i < node_names.size(); ++i) {
      if (i) out += ',';
      AppendJsonString(&out, node_names[i]);
    }
    out += ']';
  } else {
    out += "null";
  }
  AppendNodeReasons(&out, "FailedNodes", failed);
  AppendNodeReasons(&out, "FailedAndUnresolvableNodes", unresolvable);
  out += ",\"Error\":";
  AppendJsonString(&out, error);
  out += '}';
  return out;
}

void Extender::Remember(const std::string& uid) {
  recent_.push_back(uid);
  if (recent_.size() <= 4 * config_.recent_pods) return;
  // Keep the newest placement of each pod still placed, in order: the bound is a small multiple
  // of what is read, so remembering costs O(1) amortised.
  std::deque<std::string> kept;
  std::set<std::string> seen;
  for (auto it = recent_.rbegin(); it != recent_.rend() && kept.size() < config_.recent_pods; ++it)
    if (placed_.count(*it) && seen.insert(*it).second) kept.push_front(*it);
  recent_ = std::move(kept);
}

std::vector<int> Extender::RecentMilli() const {
  // Hot path of prioritize and bind: O(recent_pods), whatever the number of pods placed.
  std::vector<int> milli;
  std::set<std::string_view> seen;
  for (auto it = recent_.rbegin(); it != recent_.rend() && milli.size() < config_.recent_pods;
       ++it) {
    auto placed = placed_.find(*it);
    if (placed == placed_.end() || !seen.insert(*it).second) continue;
    const Placement& p = placed->second;
    if (p.pod.asks_mig()) continue;  // an instance of its own, not a share the fleet model counts
    auto node = nodes_.find(p.node);
    const Slot* slot = nullptr;
    if (node != nodes_.end())
      for (const Slot& s : node->second.gpus.slots())
        if (s.id == p.slots[0]) slot = &s;
    milli.push_back(PodMilli(p.pod, slot ? slot->memory_gib : 0));
  }
  return milli;
}

std::vector<HostPriority> Extender::Prioritize(ExtenderArgs args) {
  PodRequest pod = ParsePod(args.pod);
  bool full = false;
  std::vector<std::string> names = Candidates(args, &full);
  std::vector<HostPriority> list;
  list.reserve(names.size());
  if (!pod.asks_gpumux()) {
    for (auto& name : names) list.push_back({std::move(name), 0});
    return list;
  }
  std::vector<NodeChoice> choices;
  {
    std::lock_guard lock(mu_);
    choices = Choose(Find(names), pod, /*take_in_staged=*/true);
  }
  for (size_t i = 0; i < names.size(); ++i)
    list.push_back({std::move(names[i]), int64_t(std::lround(choices[i].score))});
  return list;
}

std::string HostPriorityListJson(const std::vector<HostPriority>& list) {
  // Hot path (one entry per candidate node): written as text, not built as a json value.
  std::string out = "[";
  out.reserve(list.size() * 32 + 2);
  for (const HostPriority& p : list) {
    if (out.size() > 1) out += ',';
    out += "{\"Host\":";
    AppendJsonString(&out, p.host);
    out += ",\"Score\":";
    out += std::to_string(p.score);
    out += '}';
  }
  out += ']';
  return out;
}

void Extender::Count(const Placement& p, int sign) {
  ++counted_since_;
  auto node = nodes_.find(p.node);
  if (node == nodes_.end()) return;
  node->second.memo.Forget();
  if (p.pod.asks_mig()) {
    MigRoom* room = node->second.gpus.FindMigRoom(p.slots[0].gpu);
    const MigRoom::Placement* at = room ? room->Find(p.pod.mig_profile, p.pod.mig_start) : nullptr;
    if (at) room->Count(*at, sign);
    return;
  }
  for (const SlotId& id : p.slots)
    if (Slot* slot = node->second.gpus.Find(id)) slot->Count(p.pod, sign);
}

void Extender::RefreshTarget() {
  if (has_target_ && counted_since_ < std::max<size_t>(1, target_pods_ / 4)) return;
  std::vector<int> milli = RecentMilli();
  target_pods_ = milli.size();
  if (has_target_)
    scorer_.StageTarget(std::move(milli));  // taken in over the next calls, a slice at each
  else
    scorer_.SetTarget(std::move(milli));
  has_target_ = true;
  counted_since_ = 0;
}

std::vector<NodeChoice> Extender::Choose(const std::vector<KnownNode*>& known,
                                         const PodRequest& pod, bool take_in_staged) {
  // Hot path of prioritize: the scorer scores only the nodes that changed.
  RefreshTarget();
  static const NodeGpus kNone;
  std::vector<const NodeGpus*> nodes;
  std::vector<NodeScoreMemo*> memos;
  nodes.reserve(known.size());
  memos.reserve(known.size());
  for (KnownNode* node : known) {
    nodes.push_back(node ? &node->gpus : &kNone);
    memos.push_back(node ? &node->memo : nullptr);
  }
  return scorer_.Choose(nodes, pod, &memos, take_in_staged);
}

const std::vector<Extender::KnownNode*>& Extender::Find(const std::vector<std::string>& names) {
  if (found_at_ != node_set_changes_ || found_names_.size() != names.size()) {
    found_names_.assign(names.size(), std::string());
    found_.assign(names.size(), nullptr);
    found_at_ = node_set_changes_;
  }
  for (size_t i = 0; i < names.size(); ++i) {
    if (found_[i] && found_names_[i] == names[i]) continue;
    auto it = nodes_.find(names[i]);
    found_names_[i] = names[i];
    found_[i] = it == nodes_.end() ? nullptr : &it->second;
  }
  return found_;
}

json Extender::Bind(const json& args) {
  if (!args.is_object()) throw BadInput("expected ExtenderBindingArgs, a JSON object");
  std::string name = Text(args, "PodName"), ns = Text(args, "PodNamespace"),
              uid = Text(args, "PodUID"), node = Text(args, "Node");
  // As the API server would check them, before anything is sent to it (a 400 naming the field).
  CheckDnsSubdomain("PodName", name);
  CheckDnsLabel("PodNamespace", ns);
  CheckDnsSubdomain("Node", node);
  if (uid.empty() || uid.size() > 128 ||
      uid.find_first_not_of("0123456789abcdefABCDEF-") != std::string::npos)
    throw BadInput("PodUID: '" + Quoted(uid) + "' is not a UID (hexadecimal digits and '-')");
  if (!api_) return ErrorBody("gpumux: no API server to bind through (--apiserver)");
  std::optional<PodRequest> pod;
  {
    std::lock_guard lock(mu_);
    if (auto it = seen_.find(uid); it != seen_.end()) pod = it->second;
    if (auto it = placed_.find(uid); it != placed_.end())
      return ErrorBody("gpumux: pod " + ns + "/" + name + " is already placed on " +
                       it->second.node);
  }
  try {
    if (!pod) pod = ParsePod(api_->GetPod(ns, name));
  } catch (const Error& e) {
    return ErrorBody(std::string("gpumux: ") + e.what());
  }
  Placement placement{*pod, node, {}, std::chrono::steady_clock::now()};
  if (pod->asks_gpumux()) {
    std::lock_guard lock(mu_);
    auto it = nodes_.find(node);
    if (it == nodes_.end()) return ErrorBody("gpumux: node " + node + " has no gpumux GPU");
    // The one node bind names: not through Find (which keeps the candidates prioritize named), and
    // no slice of a staged target (a slice of one node would end it).
    NodeChoice choice = Choose({&it->second}, *pod, /*take_in_staged=*/false)[0];
    if (!choice.fits)
      return ErrorBody("gpumux: pod " + ns + "/" + name + " no longer fits node " + node + ": " +
                       choice.why_not);
    if (pod->asks_mig()) {
      const MigRoom& room = it->second.gpus.mig_rooms()[size_t(choice.mig.room)];
      placement.slots = {{room.gpu, -1}};
      placement.pod.mig_start = room.placements[size_t(choice.mig.placement)].start;
    } else {
      placement.slots = {it->second.gpus.slots()[size_t(choice.slot)].id};
      for (int more : choice.more_slots)
        placement.slots.push_back(it->second.gpus.slots()[size_t(more)].id);
    }
    Count(placement, +1);
    placed_[uid] = placement;
    Remember(uid);
  }
  try {
    if (pod->asks_mig())
      api_->AnnotatePod(ns, name,
                        {{kAssignedAnnotation, SlotId::ListToString(placement.slots)},
                         {kMigPlacementAnnotation,
                          pod->mig_profile + "@" + std::to_string(placement.pod.mig_start)}});
    else if (pod->asks_gpumux())
      api_->AnnotatePod(ns, name, {{kAssignedAnnotation, SlotId::ListToString(placement.slots)}});
    api_->Bind(ns, name, uid, node);
  } catch (const Error& e) {
    std::lock_guard lock(mu_);
    if (placed_.erase(uid)) Count(placement, -1);
    return ErrorBody(std::string("gpumux: ") + e.what());
  }
  return ErrorBody("");
}

void Extender::Resync() {
  if (!api_) throw Unavailable("no API server to read nodes and pods from (--apiserver)");
  nodes_informer_->List();  // nodes first: a placed pod counts on a node it knows
  pods_informer_->List();
}

void Extender::Watch(const std::atomic<bool>& stop) {
  if (!api_) return;
  std::thread nodes([&] { nodes_informer_->Run(stop); });
  pods_informer_->Run(stop);
  nodes.join();
}

void Extender::OnNode(const json& item) {
  std::string name = item.value("/metadata/name"_json_pointer, std::string());
  std::optional<NodeGpus> gpus;
  try {
    gpus = NodeGpus::FromNode(item);
  } catch (const Error&) {
    // A node whose annotation is broken offers no gpumux GPU until its plugin writes it again.
  }
  std::lock_guard lock(mu_);
  if (!gpus) {
    node_set_changes_ += nodes_.erase(name);
    return;
  }
  // A node learnt now, or whose GPUs changed (its annotation: one written after pods were bound
  // to it, a MIG re-layout), has what is placed on it counted again from the placements.
  auto known = nodes_.find(name);
  bool changed = known == nodes_.end() || known->second.gpus.Annotation() != gpus->Annotation() ||
                 known->second.gpus.MigRoomsAnnotation() != gpus->MigRoomsAnnotation();
  if (PutNode(name, *gpus) != NodeChange::kRefused && changed) Recount(name);
}

void Extender::Recount(const std::string& name) {
  auto node = nodes_.find(name);
  if (node == nodes_.end()) return;
  node->second.memo.Forget();
  for (Slot& slot : node->second.gpus.slots()) {
    slot.used_memory_gib = slot.used_compute_percent = slot.pods = 0;
    slot.held_whole = false;
  }
  for (MigRoom& room : node->second.gpus.mig_rooms()) room.pods_on_slice = {};
  for (const auto& [uid, p] : placed_)
    if (p.node == name) Count(p, +1);
}

void Extender::OnNodeGone(const json& item) {
  std::lock_guard lock(mu_);
  node_set_changes_ += nodes_.erase(item.value("/metadata/name"_json_pointer, std::string()));
}

void Extender::OnPod(const json& item) {
  std::optional<PodRequest> pod;
  try {
    pod = ParsePod(item);
  } catch (const Error&) {
    // A pod gpumux cannot read is not one it placed.
  }
  std::string uid = item.value("/metadata/uid"_json_pointer, std::string());
  auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(mu_);
  auto it = placed_.find(uid);
  if (pod && !pod->assigned.empty() && !pod->node.empty() && !pod->finished() &&
      pod->asks_gpumux()) {
    Placement p{*pod, pod->node, pod->assigned, now};
    if (it != placed_.end()) {
      if (it->second.node == p.node && it->second.slots == p.slots &&
          it->second.pod.mig_start == p.pod.mig_start)
        return;
      Count(it->second, -1);
    }
    placed_[uid] = p;
    Count(p, +1);
    Remember(uid);
  } else if (it != placed_.end()) {
    // A bind the API server has not shown yet (its annotation) is kept for a while.
    bool unconfirmed = pod && !pod->finished() && now - it->second.when < kUnconfirmedBindKept;
    if (unconfirmed) return;
    Count(it->second, -1);
    placed_.erase(it);
  }
}

void Extender::OnPodGone(const json& item) {
  std::lock_guard lock(mu_);
  auto it = placed_.find(item.value("/metadata/uid"_json_pointer, std::string()));
  if (it == placed_.end()) return;
  Count(it->second, -1);
  placed_.erase(it);
}

service::HttpResponse Extender::Handle(const service::HttpRequest& r) {
  std::string verb = r.path.substr(r.path.rfind('/') + 1);
  if (r.method == "GET" && verb == "healthz") return {200, R"({"status":"ok"})"};
  if (r.method != "POST" || (verb != "filter" && verb != "prioritize" && verb != "bind"))
    return {404, json{{"Error", "no such verb: " + r.method + " " + r.path}}.dump()};
  std::string why;
  try {
    if (verb == "filter") return {200, Filter(ExtenderArgs::Parse(r.body)).Json()};
    if (verb == "prioritize")
      return {200, HostPriorityListJson(Prioritize(ExtenderArgs::Parse(r.body)))};
    json args = json::parse(r.body, nullptr, false);
    if (args.is_discarded()) throw BadInput("the body is not JSON");
    return {200, Bind(args).dump(-1, ' ', false, json::error_handler_t::replace)};
  } catch (const json::exception& e) {
    why = e.what();  // a field of the wrong JSON type in a pod or node: bad input as much as any
  } catch (const Error& e) {
    why = e.what();
  }
  // In the verb's own answer (kube-scheduler reads no other): the filter's and the bind's Error;
  // a prioritize gives no scores, and the reason goes to the log.
  why = "gpumux: " + verb + ": " + why;
  service::Log("warn", "scheduler extender refused a request", {{"verb", verb}, {"reason", why}});
  if (verb == "prioritize") return {200, "[]"};
  if (verb == "bind")
    return {200, ErrorBody(why).dump(-1, ' ', false, json::error_handler_t::replace)};
  FilterResult refused;
  refused.error = why;
  return {200, refused.Json()};
}

}  // namespace gpumux::k8s
