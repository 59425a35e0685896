// gpumux's kube-scheduler extender (the extender protocol of kube-scheduler/extender/v1: JSON over
// HTTP POST to URL_PREFIX/VERB). kube-scheduler sends pods that ask for gpumux.io/* resources:
//   filter     ExtenderArgs {Pod, Nodes | NodeNames} → ExtenderFilterResult {Nodes | NodeNames,
//              FailedNodes, FailedAndUnresolvableNodes, Error}: the nodes where one GPU (or MIG
//              instance) holds the pod's memory and compute (or, for a pod of several GPUs, that
//              many GPUs hold their share each), and for the others why not: FailedNodes where
//              room may come, FailedAndUnresolvableNodes (every node) for a pod no node can ever
//              take (one gpumuxd would refuse);
//   prioritize ExtenderArgs → HostPriorityList [{Host, Score 0..10}]: gpumux's fleet policy (the
//              same code as `gpumux fleet simulate`, policy_scores.h);
//   bind       ExtenderBindingArgs {PodName, PodNamespace, PodUID, Node} → {Error}: picks the GPU
//              (or GPUs) on the node, records it on the pod (annotation gpumux.io/assigned, "3" or
//              "2,3", which the device plugin admits the pod by) and binds the pod through the API
//              server.
// Keys are matched case-insensitively (Go's decoder does; older clients send "pod", "nodes").
// Every refusal is a 200 whose fields say it, as kube-scheduler's HTTP extender client reads no
// body of any other status (pkg/scheduler/extender.go): the filter's per node, or its Error (args
// that are not what kube-scheduler sends), the bind's Error; a prioritize that cannot score gives
// no scores (kube-scheduler then goes on without this extender's).
//
// Room is counted here, under one lock: bind checks the GPU again and counts the pod in before it
// answers, so of two pods racing for the last room of a GPU one is bound and the other's bind
// fails (kube-scheduler then filters it again); never are both placed. Resync() re-reads what the
// API server holds (node annotations, pods with gpumux.io/assigned that have not finished), keeping
// binds of the last 30 s the API does not show yet.
//
// Thread-safety: every call may come from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "integrations/kubernetes/extender_args.h"
#include "integrations/kubernetes/informer.h"
#include "integrations/kubernetes/kube_api.h"
#include "integrations/kubernetes/node_gpus.h"
#include "integrations/kubernetes/pod_request.h"
#include "integrations/kubernetes/policy_scores.h"
#include "service/http_request.h"

namespace gpumux::k8s {

struct ExtenderConfig {
  std::string policy = "gpumux";  // a fleet policy name (fleet::PolicyNames())
  size_t recent_pods = 1000;      // placed pods whose shares make the target workload
  // The most nodes a filter with full Nodes may teach it (memory keyed by request content is
  // bounded); nodes past it are known only from the API server (Resync). Kubernetes supports
  // 5,000 nodes per cluster.
  size_t max_nodes = 50'000;
};

// kube-scheduler's ExtenderFilterResult.
struct FilterResult {
  std::vector<std::string> node_names;  // the nodes that pass, when the args named them (NodeNames)
  nlohmann::json nodes;  // or, when the args carried full Nodes: {"items": [those that pass]}
  std::vector<std::pair<std::string, std::string>> failed;        // node, why not (yet)
  std::vector<std::pair<std::string, std::string>> unresolvable;  // node, why never
  std::string error;                                              // the args were wrong
  std::string Json() const;                                       // as kube-scheduler reads it
};

// One entry of kube-scheduler's HostPriorityList.
struct HostPriority {
  std::string host;
  int64_t score = 0;  // 0..10
};
// The list as kube-scheduler reads it: [{"Host": ..., "Score": ...}, ...].
std::string HostPriorityListJson(const std::vector<HostPriority>& list);

class Extender {
 public:
  // `api` may be null (tests of filter and prioritize alone): bind then fails with that reason.
  Extender(ExtenderConfig config, const KubeApi* api);

  // The verbs on parsed bodies. Throw Error (bad input) for a body that is not what
  // kube-scheduler sends, naming the field.
  FilterResult Filter(ExtenderArgs args);
  std::vector<HostPriority> Prioritize(ExtenderArgs args);  // in the candidates' order
  nlohmann::json Bind(const nlohmann::json& args);
  // HTTP: POST /filter, /prioritize, /bind (any prefix before the verb); GET /healthz. A malformed
  // body is answered 200 with the reason in the verb's answer (above), and changes nothing.
  service::HttpResponse Handle(const service::HttpRequest& request);

  // Lists nodes and pods from the API server (in pages) and brings its model to them: nodes'
  // slots, and the pods placed on them. Throws Error (unavailable).
  void Resync();
  // Keeps the model current from then on: watches nodes and pods (informer.h), listing again
  // when the server says 410 Gone, until `stop`. Resync first. Blocks; filter, prioritize and bind
  // answer from the model meanwhile, never from a list.
  void Watch(const std::atomic<bool>& stop);
  // A node or pod as the API server has it now, or one that is gone (its metadata).
  void OnNode(const nlohmann::json& node);
  void OnNodeGone(const nlohmann::json& node);
  void OnPod(const nlohmann::json& pod);
  void OnPodGone(const nlohmann::json& pod);
  // Sets a node's slots (as Resync or a filter with full Nodes does), keeping their use. A node
  // not known yet is not learnt once `max_nodes` are (returns false).
  bool SetNode(const std::string& name, const NodeGpus& gpus);
  size_t node_count();
  // The node's slots and their use now (empty if unknown). For tests and the bench.
  NodeGpus NodeState(const std::string& name);

 private:
  struct Placement {
    PodRequest pod;
    std::string node;
    std::vector<SlotId> slots;  // one, or one per GPU of a pod of several
    std::chrono::steady_clock::time_point when;
  };
  // The candidate nodes of ExtenderArgs as names, learning slots from full Nodes when given.
  std::vector<std::string> Candidates(ExtenderArgs& args, bool* full_nodes);
  void Count(const Placement& p, int sign);  // with mu_ held
  // Counts the node's slots' use again from the placements on it; with mu_ held.
  void Recount(const std::string& name);
  // Sets a node's slots keeping their use (with mu_ held); a node not known yet is refused once
  // `max_nodes` are.
  enum class NodeChange { kRefused, kLearnt, kUpdated };
  NodeChange PutNode(const std::string& name, NodeGpus gpus);
  // The shares of the last `recent_pods` pods placed (the target workload), newest first; with
  // mu_ held.
  std::vector<int> RecentMilli() const;
  void Remember(const std::string& uid);  // a pod just placed; with mu_ held
  // Gives the scorer the target workload of now when a quarter of the pods it was made from (at
  // least one) have been placed or removed since (the first at once, later ones staged); with
  // mu_ held.
  void RefreshTarget();
  struct KnownNode;
  // Scores `known` (null: a node not known) for `pod` with the policy, reusing what is remembered
  // of unchanged nodes; `take_in_staged` as NodeScorer::Choose. With mu_ held.
  std::vector<NodeChoice> Choose(const std::vector<KnownNode*>& known, const PodRequest& pod,
                                 bool take_in_staged);

  struct KnownNode {
    NodeGpus gpus;       // changed only by PutNode, Count and Recount, which Forget the memo
    NodeScoreMemo memo;  // the scorer's last answers for it
  };
  // Each of `names` in nodes_ (null if unknown), in order; with mu_ held. Hot path of filter and
  // prioritize: a string comparison per node when the names are the last call's.
  const std::vector<KnownNode*>& Find(const std::vector<std::string>& names);

  ExtenderConfig config_;
  const KubeApi* api_;
  std::unique_ptr<Informer> nodes_informer_, pods_informer_;  // when there is an API server
  std::mutex mu_;
  std::unordered_map<std::string, KnownNode> nodes_;
  std::unordered_map<std::string, Placement> placed_;  // by pod UID
  std::deque<std::string> recent_;  // UIDs of placements, oldest first (Remember)
  NodeScorer scorer_;
  bool has_target_ = false;
  size_t target_pods_ = 0;                  // the recent pods the scorer's target was made from
  size_t counted_since_ = 0;                // placements counted in or out since (Count)
  std::map<std::string, PodRequest> seen_;  // pods filtered lately, by UID (bind has no pod)
  // The nodes the last call named, found (kube-scheduler names the same nodes call after call):
  // reused while no node has been learnt or forgotten since.
  std::vector<std::string> found_names_;
  std::vector<KnownNode*> found_;  // null: not known
  uint64_t node_set_changes_ = 0, found_at_ = ~uint64_t(0);
};

}  // namespace gpumux::k8s
