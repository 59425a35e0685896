// What starts a container as a gpumuxd tenant, for both ways Kubernetes starts one: the device
// plugin's Allocate answer (envs and mounts) and the DRA driver's CDI spec (containerEdits).
// Built from gpumuxd's admission answer: its environment (the shim in LD_PRELOAD, the ledger,
// gpumuxd's socket, the simulated GPU or the MPS pipe), the files it names mounted at the same
// paths (the shim's directory read-only; never gpumuxd's private authority ledgers, which are not
// named), and, on a real GPU, its device nodes and NVIDIA_VISIBLE_DEVICES (for the NVIDIA
// container runtime, which also brings in the driver's libraries and, for MIG, its capabilities).
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpumux::k8s {

struct ContainerEdits {
  struct Mount {
    std::string container_path, host_path;
    bool read_only = false;
  };
  std::map<std::string, std::string> envs;
  std::vector<Mount> mounts;
  std::vector<std::string> device_nodes;  // host paths, the same in the container, "rw"
};

// `admission`: gpumuxd's answer to POST /v1/tenants ({"env": {...}, "gpu": N, "gpus": [...]}); a
// tenant over several GPUs has each ledger and simulated state its environment lists mounted.
// `gpu_uuids`: the real GPUs' or MIG instance's UUIDs, in the tenant's order, none for simulated
// ones. Device nodes are those of `dev_dir` that exist: nvidiactl, nvidia-uvm, nvidia-uvm-tools and
// nvidia<N> for each GPU (its index as its minor number, as the driver numbers them unless told
// otherwise).
ContainerEdits EditsForTenant(const nlohmann::json& admission,
                              const std::vector<std::string>& gpu_uuids,
                              const std::string& dev_dir = "/dev");

// The CDI kind of gpumux's devices, and a CDI spec (version 0.6.0) with one device `name` that
// makes these edits; the container runtime applies it for the device "gpumux.io/tenant=NAME".
inline constexpr char kCdiKind[] = "gpumux.io/tenant";
nlohmann::json CdiSpec(const std::string& name, const ContainerEdits& edits);

}  // namespace gpumux::k8s
