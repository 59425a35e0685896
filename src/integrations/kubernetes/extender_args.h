// kube-scheduler's ExtenderArgs (kube-scheduler/extender/v1) as the extender's filter and
// prioritize read it: the pod, and the candidate nodes, either by name (NodeNames, when the
// extender is nodeCacheCapable) or as full v1.Nodes (Nodes.items). Keys are matched without regard
// to case, as Go's encoding/json does (older clients send "pod", "nodenames").
//
// Hot path of the extender: a body names every candidate node (thousands), so the names are read
// straight into strings (simdjson, on demand) and only the pod and full nodes become JSON values.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpumux::k8s {

struct ExtenderArgs {
  nlohmann::json pod;                   // null when absent
  nlohmann::json nodes;                 // the v1.NodeList when sent (null otherwise)
  std::vector<std::string> node_names;  // when sent as NodeNames
  bool has_node_names = false;

  // Reads a request body. Throws Error (bad input) for a body that is not JSON or not an object,
  // or whose NodeNames is not a list of strings, naming what is wrong. Members it does not read,
  // and text after the object, are skipped unchecked (simdjson reads on demand).
  static ExtenderArgs Parse(std::string_view body);
};

}  // namespace gpumux::k8s
