// A structural check of deploy/kubernetes/ (Debian 12 has no API server to dry-run them against,
// and kubectl's client-side dry run needs one): every object is well formed, the pieces refer to
// each other consistently, and they name the resources, annotations, paths and ports the programs
// use. Whether the programs accept the command lines is checked end to end
// (tests/kubernetes_test.cc, KubernetesTest.TheManifestsCommandLinesAreOnesTheProgramsTake).
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <map>
#include <set>

#include "integrations/kubernetes/device_plugin.h"
#include "integrations/kubernetes/dra_driver.h"
#include "integrations/kubernetes/pod_request.h"

namespace gpumux::k8s {
namespace {

using nlohmann::json;

// YAML as the API server reads it: integers and booleans typed, everything else a string.
json ToJson(const YAML::Node& n) {
  if (n.IsMap()) {
    json j = json::object();
    for (const auto& kv : n) j[kv.first.as<std::string>()] = ToJson(kv.second);
    return j;
  }
  if (n.IsSequence()) {
    json j = json::array();
    for (const auto& item : n) j.push_back(ToJson(item));
    return j;
  }
  if (!n.IsScalar()) return nullptr;
  std::string s = n.as<std::string>();
  if (n.Tag() != "!" && !s.empty() && s.find_first_not_of("0123456789") == std::string::npos)
    return std::stoll(s);
  if (n.Tag() != "!" && (s == "true" || s == "false")) return s == "true";
  return s;
}

std::vector<json> Objects() {
  std::vector<json> objects;
  std::string dir = std::string(GPUMUX_SOURCE_DIR) + "/deploy/kubernetes";
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    // The kustomizations are rendered by kubectl in tests/kubernetes_test.cc.
    if (entry.path().extension() != ".yaml" || entry.path().filename() == "kustomization.yaml")
      continue;
    for (const YAML::Node& doc : YAML::LoadAllFromFile(entry.path().string())) {
      json j = ToJson(doc);
      j["__file"] = std::filesystem::relative(entry.path(), dir).string();
      objects.push_back(j);
    }
  }
  return objects;
}

const json& Find(const std::vector<json>& objects, const std::string& kind,
                 const std::string& name) {
  for (const json& o : objects)
    if (o["kind"] == kind && o["metadata"]["name"] == name) return o;
  static const json kNone;
  ADD_FAILURE() << "no " << kind << " " << name << " in deploy/kubernetes";
  return kNone;
}

// The value after `flag` in a container's command.
std::string Flag(const json& container, const std::string& flag) {
  const json& command = container["command"];
  for (size_t i = 0; i + 1 < command.size(); ++i)
    if (command[i] == flag) return command[i + 1];
  return "";
}

const json& Container(const json& workload, const std::string& name) {
  for (const json& c : workload["spec"]["template"]["spec"]["containers"])
    if (c["name"] == name) return c;
  static const json kNone;
  ADD_FAILURE() << "no container " << name;
  return kNone;
}

TEST(Manifests, EveryObjectIsWellFormedAndItsWorkloadsHangTogether) {
  const std::set<std::string> cluster_scoped = {"Namespace",
                                                "ClusterRole",
                                                "ClusterRoleBinding",
                                                "DeviceClass",
                                                "ValidatingAdmissionPolicy",
                                                "ValidatingAdmissionPolicyBinding"};
  std::vector<json> objects = Objects();
  ASSERT_GE(objects.size(), 10u);
  std::set<std::string> service_accounts;
  for (const json& o : objects)
    if (o["kind"] == "ServiceAccount") service_accounts.insert(o["metadata"]["name"]);
  for (const json& o : objects) {
    std::string where = o["__file"].get<std::string>() + ": " + o.value("kind", "?");
    ASSERT_TRUE(o.contains("apiVersion") && o.contains("kind")) << where;
    ASSERT_TRUE(o["metadata"].contains("name")) << where;
    if (!cluster_scoped.count(o["kind"])) {
      EXPECT_TRUE(o["metadata"].contains("namespace")) << where << " has no namespace";
    }
    if (o["kind"] != "DaemonSet" && o["kind"] != "Deployment") continue;
    EXPECT_EQ(o["apiVersion"], "apps/v1") << where;
    const json& pod = o["spec"]["template"];
    for (auto& [k, v] : o["spec"]["selector"]["matchLabels"].items())
      EXPECT_EQ(pod["metadata"]["labels"][k], v) << where << ": the selector must match the pods";
    EXPECT_TRUE(service_accounts.count(pod["spec"]["serviceAccountName"])) << where;
    std::set<std::string> volumes;
    for (const json& v : pod["spec"]["volumes"]) volumes.insert(v["name"]);
    for (const json& c : pod["spec"]["containers"]) {
      EXPECT_TRUE(c.contains("image") && c.contains("command")) << where << " " << c["name"];
      for (const json& m : c.value("volumeMounts", json::array()))
        EXPECT_TRUE(volumes.count(m["name"])) << where << ": no volume " << m["name"];
    }
  }
}

TEST(Manifests, TheSchedulerConfigurationCallsTheExtenderForGpumuxResources) {
  std::vector<json> objects = Objects();
  const json& map = Find(objects, "ConfigMap", "gpumux-scheduler-config");
  json config = ToJson(YAML::Load(map["data"]["config.yaml"].get<std::string>()));
  EXPECT_EQ(config["apiVersion"], "kubescheduler.config.k8s.io/v1");
  EXPECT_EQ(config["kind"], "KubeSchedulerConfiguration");
  const json& extender = config["extenders"][0];
  const json& deployment = Find(objects, "Deployment", "gpumux-scheduler");
  // The extender listens where kube-scheduler sends, and its verbs are the ones it answers.
  std::string listen = Flag(Container(deployment, "extender"), "--listen");
  EXPECT_EQ(extender["urlPrefix"].get<std::string>().rfind("http://" + listen + "/", 0), 0u)
      << extender["urlPrefix"] << " vs " << listen;
  EXPECT_EQ(extender["filterVerb"], "filter");
  EXPECT_EQ(extender["prioritizeVerb"], "prioritize");
  EXPECT_EQ(extender["bindVerb"], "bind");
  std::set<std::string> managed;
  for (const json& r : extender["managedResources"]) {
    managed.insert(r["name"]);
    EXPECT_EQ(r["ignoredByScheduler"], true) << "the extender counts GPU room, not kube-scheduler";
  }
  EXPECT_EQ(managed, (std::set<std::string>{kMemoryResource, kComputeResource, kGpuResource}));
  // The example pod goes to that scheduler, and asks what gpumux reads.
  std::string scheduler = config["profiles"][0]["schedulerName"];
  const json& pod = Find(objects, "Pod", "llama-13b-decode");
  EXPECT_EQ(pod["spec"]["schedulerName"], scheduler);
  json created = pod;
  created["metadata"]["uid"] = "0b5c9e2a-0000-4000-8000-000000000001";  // the API server's
  PodRequest request = ParsePod(created);
  EXPECT_EQ(request.memory_gib_per_gpu(), 24);
  EXPECT_EQ(request.compute_percent_per_gpu(), 40);
  EXPECT_EQ(request.containers[0].run_as_user, 1000);
}

// Whether `path` lies, in `container`, in a node folder (a hostPath volume) mounted at the node's
// own path: then what the program hands others under it is the node's path too.
bool OnNodeFolder(const json& pod_spec, const json& container, const std::string& path) {
  for (const json& m : container.value("volumeMounts", json::array())) {
    std::string at = m["mountPath"];
    if (path != at && path.rfind(at + "/", 0) != 0) continue;
    for (const json& v : pod_spec["volumes"])
      if (v["name"] == m["name"] && v.contains("hostPath")) return v["hostPath"]["path"] == at;
  }
  return false;
}

TEST(Manifests, TheNodeDaemonSetWiresThePluginToTheKubeletGpumuxdAndTheApiServer) {
  std::vector<json> objects = Objects();
  const json& daemonset = Find(objects, "DaemonSet", "gpumux-node");
  const json& spec = daemonset["spec"]["template"]["spec"];
  const json& gpumuxd = Container(daemonset, "gpumuxd");
  const json& plugin = Container(daemonset, "device-plugin");
  EXPECT_EQ(Flag(plugin, "--agent"), Flag(gpumuxd, "--socket"));
  EXPECT_EQ(Flag(plugin, "--kubelet-dir"), DevicePluginConfig().kubelet_dir);
  EXPECT_TRUE(OnNodeFolder(spec, plugin, DevicePluginConfig().kubelet_dir));
  // The API server with the pod's service account: no proxy.
  EXPECT_EQ(Flag(plugin, "--apiserver"), "in-cluster");
  for (const json& o : objects) {
    EXPECT_EQ(o.dump().find("kubectl"), std::string::npos) << o["metadata"]["name"];
    EXPECT_EQ(o.dump().find("8001"), std::string::npos) << o["metadata"]["name"];
  }
  // NODE_NAME comes from the downward API: the plugin finds its pods by it.
  EXPECT_EQ(plugin["env"][0]["name"], "NODE_NAME");
  EXPECT_EQ(plugin["env"][0]["valueFrom"]["fieldRef"]["fieldPath"], "spec.nodeName");
  // The device plugin may read pods and annotate its node; the extender also binds.
  const json& node_role = Find(objects, "ClusterRole", "gpumux-node");
  EXPECT_EQ(node_role["rules"][1]["resources"][0], "nodes");
  EXPECT_NE(node_role["rules"][1]["verbs"].dump().find("patch"), std::string::npos);
  const json& extender_role = Find(objects, "ClusterRole", "gpumux-scheduler-extender");
  EXPECT_NE(extender_role.dump().find("pods/binding"), std::string::npos);
}

// What gpumuxd hands a tenant — its socket, its ledgers, the shim — is a path the device plugin
// (Allocate) or the DRA driver (CDI edits) mounts into the tenant's container from the node: each
// is on a node folder mounted at the node's own path, and the shim is the one the init container
// installed there from the image, never the image's own copy.
TEST(Manifests, WhatGpumuxdHandsTenantsLiesInNodeFoldersTheInitContainerFilled) {
  int found = 0;
  for (const json& o : Objects()) {
    if (o["kind"] != "DaemonSet") continue;
    ++found;
    std::string where = o["__file"];
    const json& spec = o["spec"]["template"]["spec"];
    const json& gpumuxd = Container(o, "gpumuxd");
    std::string libraries = Flag(gpumuxd, "--tenant-libraries");
    ASSERT_FALSE(libraries.empty()) << where;
    EXPECT_TRUE(OnNodeFolder(spec, gpumuxd, libraries)) << where;
    ASSERT_EQ(spec["initContainers"].size(), 1u) << where;
    const json& init = spec["initContainers"][0];
    EXPECT_EQ(init["image"], gpumuxd["image"]) << where << ": the shim of this gpumuxd";
    EXPECT_EQ(init["command"], json({"/usr/bin/gpumux", "install-shim", libraries})) << where;
    EXPECT_TRUE(OnNodeFolder(spec, init, libraries)) << where;
    for (const char* flag : {"--socket", "--runtime-dir", "--state"})
      EXPECT_TRUE(OnNodeFolder(spec, gpumuxd, Flag(gpumuxd, flag))) << where << " " << flag;
    for (const json& c : spec["containers"]) {
      if (c["name"] == "gpumuxd") continue;
      EXPECT_TRUE(OnNodeFolder(spec, c, Flag(c, "--agent")))
          << where << ": " << c["name"] << " reaches gpumuxd's socket where tenants do";
    }
    // The driver's libraries come from the NVIDIA container toolkit.
    EXPECT_NE(gpumuxd["env"].dump().find("NVIDIA_VISIBLE_DEVICES"), std::string::npos) << where;
  }
  EXPECT_EQ(found, 2) << "node-daemonset.yaml and dra/dra-daemonset.yaml";
}

// Nothing runs from the node: every container of gpumux runs a program of its image, and no
// volume mounts the node's root.
TEST(Manifests, NoContainerRunsAProgramOfTheNodeOrMountsItsRoot) {
  int containers = 0;
  for (const json& o : Objects()) {
    if (!o.contains("spec") || !o["spec"].contains("template")) continue;
    const json& spec = o["spec"]["template"]["spec"];
    for (const char* list : {"initContainers", "containers"}) {
      for (const json& c : spec.value(list, json::array())) {
        std::string where = o["__file"].get<std::string>() + ": " + c["name"].get<std::string>();
        std::string program = c["command"][0];
        if (c["image"] != "gpumux") {
          EXPECT_EQ(c["name"], "kube-scheduler") << where << " runs image " << c["image"];
          continue;
        }
        ++containers;
        EXPECT_EQ(program.rfind("/usr/bin/", 0), 0u) << where << " runs " << program;
        EXPECT_EQ(c["command"].dump().find("/host"), std::string::npos) << where;
      }
    }
    for (const json& v : spec.value("volumes", json::array()))
      if (v.contains("hostPath"))
        EXPECT_NE(v["hostPath"]["path"], "/") << o["__file"] << ": the node's root";
  }
  EXPECT_EQ(containers, 7) << "2 x (install-shim, gpumuxd, a node program) and the extender";
}

// gpumuxd counts a grant against the pid the kernel reports for the caller (SO_PEERCRED), in the
// reader's PID namespace: 0 for a process of a namespace it cannot see, as every other pod's is
// from a pod's own. It then reads that pid's /proc entries (uid, cgroup, environment) and matches
// it with NVML's process list, which names the node's pids. So the pod that runs it must share
// the node's PID namespace.
// gpumuxd counts grants by the caller's pid (SO_PEERCRED: 0 from another PID namespace), and reads
// pods' control groups in the node's cgroup namespace, which it joins through /proc/1 (its own
// container's would give other pods' groups as "/../…"): hostPID, and privileged to join.
TEST(Manifests, EveryPodThatRunsGpumuxdSharesTheNodesPidNamespaceAndSeesItsCgroups) {
  int found = 0;
  for (const json& o : Objects()) {
    if (o["kind"] != "DaemonSet") continue;
    const json& spec = o["spec"]["template"]["spec"];
    for (const json& c : spec["containers"]) {
      if (c["command"][0] != "/usr/bin/gpumuxd") continue;
      ++found;
      EXPECT_EQ(spec.value("hostPID", false), true) << o["__file"] << ": " << o["metadata"]["name"];
      EXPECT_EQ(c["securityContext"].value("privileged", false), true)
          << o["__file"] << ": " << c["name"];
      // The node's cgroup hierarchy whole, beside the container's own view of it.
      std::string volume;
      for (const json& m : c["volumeMounts"])
        if (m["mountPath"] == "/host/sys/fs/cgroup") volume = m["name"];
      bool host_cgroup = false;
      for (const json& v : spec["volumes"])
        host_cgroup |= v["name"] == volume && v["hostPath"].value("path", "") == "/sys/fs/cgroup";
      EXPECT_TRUE(host_cgroup) << o["__file"] << ": gpumuxd mounts the node's /sys/fs/cgroup";
    }
  }
  EXPECT_EQ(found, 2) << "node-daemonset.yaml and dra/dra-daemonset.yaml each run gpumuxd";
}

TEST(Manifests, TheDraClassesSelectGpumuxDevicesByModeAndTheExampleClaimUsesOne) {
  std::vector<json> objects = Objects();
  std::set<std::string> classes;
  for (const std::string mode : {"mig", "mps", "timeslice"}) {
    const json& c = Find(objects, "DeviceClass", mode + ".gpumux.io");
    EXPECT_EQ(c["apiVersion"], "resource.k8s.io/v1");
    std::string cel = c["spec"]["selectors"][0]["cel"]["expression"];
    EXPECT_NE(cel.find("device.driver == \"" + std::string(kDraDriverName) + "\""),
              std::string::npos)
        << cel;
    EXPECT_NE(cel.find(".mode == \"" + mode + "\""), std::string::npos) << cel;
    classes.insert(c["metadata"]["name"]);
  }
  const json& tmpl = Find(objects, "ResourceClaimTemplate", "gpumux-24gi-40pct");
  const json& request = tmpl["spec"]["spec"]["devices"]["requests"][0];
  EXPECT_TRUE(classes.count(request["exactly"]["deviceClassName"]));
  const json& config = tmpl["spec"]["spec"]["devices"]["config"][0];
  EXPECT_EQ(config["opaque"]["driver"], kDraDriverName);
  EXPECT_EQ(config["requests"][0], request["name"]);
  for (auto& [k, v] : config["opaque"]["parameters"].items())
    EXPECT_TRUE(k == "memory" || k == "compute" || k == "priority" || k == "owner_uid") << k;
  const json& pod = Find(objects, "Pod", "llama-13b-decode-dra");
  EXPECT_EQ(pod["spec"]["resourceClaims"][0]["resourceClaimTemplateName"], "gpumux-24gi-40pct");
  EXPECT_EQ(pod["spec"]["containers"][0]["resources"]["claims"][0]["name"],
            pod["spec"]["resourceClaims"][0]["name"]);
  // The driver's DaemonSet gives it the kubelet's directories it registers in.
  const json& daemonset = Find(objects, "DaemonSet", "gpumux-dra");
  const json& driver = Container(daemonset, "dra-driver");
  EXPECT_EQ(Flag(driver, "--registry-dir"), DraDriverConfig().registry_dir);
  EXPECT_EQ(Flag(driver, "--plugin-dir"), DraDriverConfig().plugin_dir);
  EXPECT_EQ(Flag(driver, "--cdi-dir"), DraDriverConfig().cdi_dir);
}

// A pod cannot choose its own GPU: the policy refuses gpumux.io/assigned (and a MIG placement,
// gpumux.io/mig-placement) from anyone but the extender's service account (the one scheduler.yaml
// runs it as), and is bound to deny.
TEST(Manifests, OnlyTheExtendersServiceAccountMaySetTheAssignedAnnotation) {
  std::vector<json> objects = Objects();
  const json& policy = Find(objects, "ValidatingAdmissionPolicy", "gpumux-assigned-annotation");
  EXPECT_EQ(policy["apiVersion"], "admissionregistration.k8s.io/v1");
  EXPECT_EQ(policy["spec"]["failurePolicy"], "Fail");
  const json& rule = policy["spec"]["matchConstraints"]["resourceRules"][0];
  EXPECT_EQ(rule["resources"], json{"pods"});
  EXPECT_EQ(rule["operations"], json({"CREATE", "UPDATE"}));
  const json& deployment = Find(objects, "Deployment", "gpumux-scheduler");
  std::string account =
      "system:serviceaccount:" + deployment["metadata"]["namespace"].get<std::string>() + ":" +
      deployment["spec"]["template"]["spec"]["serviceAccountName"].get<std::string>();
  const json& extender = policy["spec"]["variables"][0];
  EXPECT_EQ(extender["name"], "extender");
  EXPECT_EQ(extender["expression"], "'" + account + "'");
  // One validation per annotation the device plugin places a pod by, each of the same form.
  const json& validations = policy["spec"]["validations"];
  ASSERT_EQ(validations.size(), 2u);
  const char* placed_by[] = {kAssignedAnnotation, kMigPlacementAnnotation};
  for (size_t i = 0; i < 2; ++i) {
    std::string cel = validations[i]["expression"];
    EXPECT_EQ(cel.rfind("request.userInfo.username == variables.extender ||", 0), 0u) << cel;
    std::string quoted = std::string("'") + placed_by[i] + "'";
    size_t uses = 0;
    for (size_t at = cel.find(quoted); at != std::string::npos; at = cel.find(quoted, at + 1))
      ++uses;
    EXPECT_EQ(uses, 4u) << "set, or changed from what it was: " << cel;
    EXPECT_EQ(validations[i]["reason"], "Forbidden");
  }
  const json& binding =
      Find(objects, "ValidatingAdmissionPolicyBinding", "gpumux-assigned-annotation");
  EXPECT_EQ(binding["spec"]["policyName"], policy["metadata"]["name"]);
  EXPECT_EQ(binding["spec"]["validationActions"], json{"Deny"});
}

}  // namespace
}  // namespace gpumux::k8s
