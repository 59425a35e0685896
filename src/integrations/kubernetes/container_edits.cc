#include "integrations/kubernetes/container_edits.h"

#include <filesystem>

#include "base/comma_list.h"

namespace gpumux::k8s {

using nlohmann::json;

ContainerEdits EditsForTenant(const json& admission, const std::vector<std::string>& gpu_uuids,
                              const std::string& dev_dir) {
  ContainerEdits edits;
  for (auto& [k, v] : admission.at("env").items()) edits.envs[k] = v.get<std::string>();
  std::string uuids = JoinCommas(gpu_uuids);
  if (!uuids.empty()) edits.envs["NVIDIA_VISIBLE_DEVICES"] = uuids;
  auto env = [&](const char* key) {
    auto it = edits.envs.find(key);
    return it == edits.envs.end() ? std::string() : it->second;
  };
  // The shim's directory (with the simulated GPU's libraries under it) and gpumuxd's view ledger
  // read-only; gpumuxd's socket, a simulated GPU's state and the MPS pipe directory writable (the
  // tenant's activity file comes with its processes' registrations, not as a file). Nothing of
  // another tenant's is mounted.
  std::string shim = env("LD_PRELOAD");
  shim = shim.substr(0, shim.find(':'));
  if (shim.find('/') != std::string::npos) {
    std::string dir = shim.substr(0, shim.rfind('/'));
    edits.mounts.push_back({dir, dir, true});
  }
  for (const std::string& ledger : SplitCommas(env("GPUMUX_LEDGER")))  // one per GPU
    edits.mounts.push_back({ledger, ledger, true});
  for (const char* key : {"GPUMUX_AGENT", "CUDA_MPS_PIPE_DIRECTORY"}) {
    if (std::string path = env(key); !path.empty()) edits.mounts.push_back({path, path, false});
  }
  for (const std::string& state : SplitCommas(env("GPUMUX_SIM_STATE")))  // one per GPU
    edits.mounts.push_back({state, state, false});
  if (!gpu_uuids.empty()) {
    std::vector<std::string> nodes = {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"};
    json gpus = admission.value("gpus", json::array({admission.value("gpu", 0)}));
    for (const json& gpu : gpus) nodes.push_back("nvidia" + std::to_string(gpu.get<int>()));
    for (const std::string& node : nodes) {
      std::string path = dev_dir + "/" + node;
      if (std::filesystem::exists(path)) edits.device_nodes.push_back(path);
    }
  }
  return edits;
}

json CdiSpec(const std::string& name, const ContainerEdits& edits) {
  json env = json::array(), mounts = json::array();
  for (const auto& [k, v] : edits.envs) env.push_back(k + "=" + v);
  for (const auto& m : edits.mounts) {
    json options = {"bind", "nosuid", "nodev"};
    if (m.read_only) options.push_back("ro");
    mounts.push_back(
        {{"hostPath", m.host_path}, {"containerPath", m.container_path}, {"options", options}});
  }
  json edits_json = {{"env", env}, {"mounts", mounts}};
  if (!edits.device_nodes.empty()) {
    json nodes = json::array();
    for (const auto& path : edits.device_nodes)
      nodes.push_back({{"path", path}, {"permissions", "rw"}});
    edits_json["deviceNodes"] = nodes;
  }
  return {{"cdiVersion", "0.6.0"},
          {"kind", kCdiKind},
          {"devices", {{{"name", name}, {"containerEdits", edits_json}}}}};
}

}  // namespace gpumux::k8s
