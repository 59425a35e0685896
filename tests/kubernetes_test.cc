// The Kubernetes integration end to end, with a fake kubelet and a fake API server
// (kubernetes_fixture.h) around the real programs: gpumuxd on simulated H100s, the built
// gpumux-k8s-device-plugin, and the scheduler extender answering kube-scheduler's JSON over HTTP.
#include <gtest/gtest.h>
#include <sys/prctl.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <thread>

#include <yaml-cpp/yaml.h>

#include "agent_fixture.h"
#include "integrations/kubernetes/dra_driver.h"
#include "integrations/kubernetes/extender.h"
#include "integrations/kubernetes/informer.h"
#include "integrations/kubernetes/kube_api.h"
#include "integrations/kubernetes/pod_tenants.h"
#include "integrations/kubernetes/proto/dra_v1.grpc.pb.h"
#include "integrations/kubernetes/proto/pluginregistration_v1.grpc.pb.h"
#include "kubernetes_fixture.h"

namespace gpumux::testing {
namespace {

namespace pb = ::v1beta1;
constexpr uint64_t kMiB = 1ull << 20, kGiB = 1ull << 30;
constexpr char kMemory[] = "gpumux.io/gpu-memory";
constexpr char kCompute[] = "gpumux.io/gpu-compute";
constexpr char kPodUid[] = "90d0aaaa-0000-4000-8000-000000000009";  // the DRA tests' pod

// What both node programs' tests share: gpumuxd on simulated H100s, the fake API server with
// node-a, a short folder for sockets (their paths must stay under 108 bytes), the program under
// test as a child process with its log, and running the test client as a tenant in its pod's
// control group, as the kubelet would start it. Root only: pods run as root (runAsUser 0), and
// their control groups are made here.
class KubernetesNodeTest : public AgentTest {
 protected:
  void SetUp() override {
    AgentTest::SetUp();
    if (geteuid() != 0) GTEST_SKIP() << "needs root: the test's pods run as root in pod cgroups";
    for (const char* hierarchy : {"/sys/fs/cgroup/pids", "/sys/fs/cgroup/memory",
                                  "/sys/fs/cgroup/unified", "/sys/fs/cgroup"}) {
      std::filesystem::path base =
          std::filesystem::path(hierarchy) / ("gpumux-test-" + std::to_string(getpid()));
      std::error_code ec;
      if (std::filesystem::create_directory(base, ec) || std::filesystem::is_directory(base)) {
        cgroups_ = base;
        break;
      }
    }
    if (cgroups_.empty()) GTEST_SKIP() << "needs a writable cgroup hierarchy for pod cgroups";
    static int count = 0;
    sockets_ = std::filesystem::temp_directory_path() /
               ("gk" + std::to_string(getpid()) + "-" + std::to_string(count++));
    std::filesystem::remove_all(sockets_);
  }
  void TearDown() override {
    StopProgram(SIGTERM);
    api_.reset();
    AgentTest::TearDown();
    std::filesystem::remove_all(sockets_);
    // The pod cgroups, empty now that their processes have exited: groups go by rmdir, deepest
    // first (their control files cannot be removed).
    std::function<void(const std::filesystem::path&)> remove = [&](const auto& group) {
      for (const auto& child : std::filesystem::directory_iterator(group))
        if (child.is_directory()) remove(child.path());
      rmdir(group.c_str());
    };
    if (!cgroups_.empty()) remove(cgroups_);
  }

  void StartNode(int gpus) {
    std::vector<std::string> args = {"--sim", "H100", "--gpus", std::to_string(gpus)};
    args.insert(args.end(), agent_args_.begin(), agent_args_.end());
    StartAgentOn(args, {});
    api_ = std::make_unique<FakeApiServer>((dir_ / "api.sock").string());
    api_->AddNode("node-a");
  }
  // Starts `binary` with `args` and the options every node program takes.
  void StartProgram(const char* binary, std::vector<std::string> args) {
    args.insert(args.end(), {"--agent", socket_, "--node", "node-a", "--poll", "0.1"});
    if (api_) args.insert(args.end(), {"--apiserver", api_->address()});
    program_ = fork();
    if (program_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // goes with the test, however the test ends
      std::string log = (dir_ / "program.log").string();
      freopen(log.c_str(), "a", stderr);
      std::vector<char*> argv = {const_cast<char*>(binary)};
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(binary, argv.data());
      _exit(127);
    }
  }
  void StopProgram(int sig) {
    if (program_ <= 0) return;
    kill(program_, sig);
    waitpid(program_, nullptr, 0);
    program_ = 0;
  }
  std::string Log() {
    std::ifstream in(dir_ / "program.log");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  // Runs the test client with a container's environment in pod `pod_uid`'s cgroup (named as
  // cgroupfs does, "pod<UID>", or as systemd does, "kubepods-besteffort-pod<UID_>.slice"), as
  // user `user`: allocates 64 MiB at a time until refused; returns what it got.
  uint64_t FillWith(const std::map<std::string, std::string>& envs, const std::string& pod_uid,
                    bool systemd_style = false, uid_t user = 0) {
    std::string as_user = user == 0 ? ""
                                    : "setpriv --reuid=" + std::to_string(user) +
                                          " --regid=" + std::to_string(user) + " --clear-groups ";
    json out =
        RunInPod(envs, pod_uid,
                 as_user + GPUMUX_ALLOC_CLIENT + " direct fill " + std::to_string(64 * kMiB) + " 0",
                 systemd_style);
    return out.is_null() ? 0 : out["allocated"].get<uint64_t>();
  }
  // Lets users other than root reach the test's directory (gpumuxd's sockets and files), as they
  // reach /run/gpumux on a node.
  void OpenToEveryone() {
    std::filesystem::permissions(
        dir_, std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                  std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
                  std::filesystem::perms::others_exec);
  }
  // Runs `command` (a test client printing one JSON line) so; returns its line, null if it failed.
  json RunInPod(const std::map<std::string, std::string>& envs, const std::string& pod_uid,
                const std::string& command, bool systemd_style = false) {
    std::string name = "pod" + pod_uid;
    if (systemd_style) {
      std::replace(name.begin(), name.end(), '-', '_');
      name = "kubepods-besteffort-" + name + ".slice";
    }
    name = pod_cgroups_under_ + name;
    std::filesystem::create_directories(cgroups_ / name);
    std::string env = "sh -c 'echo $$ > " + (cgroups_ / name / "cgroup.procs").string() +
                      " && exec \"$@\"' sh env";
    for (const auto& [k, v] : envs) env += " " + k + "='" + v + "'";
    auto [code, out] = Sh(env + " ASAN_OPTIONS=verify_asan_link_order=0 " + command);
    EXPECT_EQ(code, 0) << out;
    return code == 0 ? json::parse(out) : json();
  }
  json Tenant(const std::string& id) {
    auto [status, text] = CallUnix(socket_, "GET", "/v1/tenants/" + id);
    return status == 200 ? json::parse(text) : json();
  }

  std::filesystem::path sockets_, cgroups_;
  // Where RunInPod makes pods' groups, under cgroups_: "" (as the kubelet would), or a folder of
  // the test's ("user@65534.service/", to play a user who names a group of its own as a pod's).
  std::string pod_cgroups_under_;
  std::vector<std::string> agent_args_;  // more of gpumuxd's options
  std::unique_ptr<FakeApiServer> api_;
  pid_t program_ = 0;
};

class KubernetesTest : public KubernetesNodeTest {
 protected:
  void TearDown() override {
    if (http_) http_->Stop();
    if (http_thread_.joinable()) http_thread_.join();
    http_.reset();
    kubelet_.reset();
    KubernetesNodeTest::TearDown();
  }

  // gpumuxd on `gpus` simulated H100s, the fake API server with node-a, the fake kubelet, the
  // device plugin (registered, its `resources`, after `before_plugin` ran), and the extender on a
  // TCP port.
  void StartStack(int gpus, const std::function<void()>& before_plugin = {}, size_t resources = 3) {
    StartNode(gpus);
    if (before_plugin) before_plugin();
    kubelet_ = std::make_unique<FakeKubelet>(sockets_);
    kubelet_->Start();
    StartPlugin();
    ASSERT_EQ(kubelet_->WaitForRegistrations(resources), resources) << Log();
    for (int i = 0; i < 250 && !api_->Node("node-a")["metadata"].contains("annotations"); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    kube_ = std::make_unique<k8s::KubeApi>(api_->address());
    extender_ = std::make_unique<k8s::Extender>(k8s::ExtenderConfig{}, kube_.get());
    extender_->Resync();
    http_ = std::make_unique<service::HttpServer>();
    http_->ListenTcp("127.0.0.1:0");
    http_thread_ = std::thread([this] {
      http_->Serve([this](const service::HttpRequest& r) { return extender_->Handle(r); });
    });
  }
  void StartPlugin() {
    std::vector<std::string> args = {"--kubelet-dir", sockets_.string(), "--state-dir",
                                     (dir_ / "k8s-state").string()};
    args.insert(args.end(), plugin_args_.begin(), plugin_args_.end());
    StartProgram(GPUMUX_K8S_DEVICE_PLUGIN, args);
  }

  // POST /VERB to the extender; returns (status, answer).
  std::pair<int, json> Extend(const std::string& verb, const std::string& body) {
    auto [status, text] = service::CallHttp("127.0.0.1:" + std::to_string(http_->tcp_port()),
                                            "POST", "/gpumux/" + verb, body);
    return {status, json::parse(text)};
  }
  // What kube-scheduler records for a pod after this extender's filter, written from its HTTP
  // extender client and its FitError (pkg/scheduler/extender.go, schedule_one.go, types.go): an
  // answer other than 200 is an error naming the code alone ("failed Filter with extender at URL
  // ..., code N": the body is not read); a result's Error is the error; else each node that
  // failed (FailedNodes, FailedAndUnresolvableNodes) counts its reason, and the pod's
  // FailedScheduling message is "0/N nodes are available: K reason, ...." ("" if a node passed).
  std::string WhatKubeSchedulerRecords(const json& args) {
    std::string url = "127.0.0.1:" + std::to_string(http_->tcp_port());
    auto [status, text] = service::CallHttp(url, "POST", "/gpumux/filter", args.dump());
    if (status != 200)
      return "failed Filter with extender at URL http://" + url + "/gpumux, code " +
             std::to_string(status);
    json result = json::parse(text);
    if (!result.value("Error", "").empty()) return result["Error"];
    size_t passed = result["NodeNames"].is_array() ? result["NodeNames"].size()
                                                   : result["Nodes"]["items"].size();
    if (passed > 0) return "";
    std::map<std::string, int> reasons;
    for (const char* field : {"FailedNodes", "FailedAndUnresolvableNodes"}) {
      const json failed = result.value(field, json::object());
      for (const auto& [node, why] : failed.items()) ++reasons[why.get<std::string>()];
    }
    std::string message =
        "0/" + std::to_string(args["NodeNames"].size()) + " nodes are available: ";
    for (const auto& [why, count] : reasons)
      message += (message.back() == ' ' ? "" : ", ") + std::to_string(count) + " " + why;
    return message + ".";
  }

  // What kube-scheduler does for a pod that asks gpumux resources: filter, prioritize, bind.
  // Returns bind's Error ("" when bound).
  std::string Schedule(const std::string& name) {
    json pod = api_->Pod(name);
    json args = {{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", {"node-a"}}};
    auto [fs, filtered] = Extend("filter", args.dump());
    EXPECT_EQ(fs, 200) << filtered;
    if (filtered["NodeNames"] != json{"node-a"}) return "filtered out: " + filtered.dump();
    auto [ps, priorities] = Extend("prioritize", args.dump());
    EXPECT_EQ(ps, 200) << priorities;
    EXPECT_EQ(priorities[0]["Host"], "node-a");
    json bind = {{"PodName", name},
                 {"PodNamespace", "default"},
                 {"PodUID", pod["metadata"]["uid"]},
                 {"Node", "node-a"}};
    auto [bs, bound] = Extend("bind", bind.dump());
    EXPECT_EQ(bs, 200) << bound;
    return bound["Error"].get<std::string>();
  }

  // The first ListAndWatch message of `resource`.
  std::vector<pb::Device> Devices(const std::string& resource) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    auto reader = kubelet_->Plugin(resource)->ListAndWatch(&context, pb::Empty());
    pb::ListAndWatchResponse response;
    EXPECT_TRUE(reader->Read(&response)) << Log();
    context.TryCancel();
    return {response.devices().begin(), response.devices().end()};
  }

  // What the kubelet does for one container's `units` of `resource`: asks the preferred devices
  // among all, then allocates them. Returns the status and the container's answer.
  std::pair<grpc::Status, pb::ContainerAllocateResponse> Allocate(const std::string& resource,
                                                                  int units) {
    auto plugin = kubelet_->Plugin(resource);
    pb::PreferredAllocationRequest preferred_request;
    auto* c = preferred_request.add_container_requests();
    for (const pb::Device& d : Devices(resource)) c->add_available_deviceids(d.id());
    c->set_allocation_size(units);
    pb::PreferredAllocationResponse preferred;
    grpc::ClientContext context1;
    EXPECT_TRUE(plugin->GetPreferredAllocation(&context1, preferred_request, &preferred).ok());
    pb::AllocateRequest request;
    auto* ids = request.add_container_requests();
    for (const auto& id : preferred.container_responses(0).deviceids()) ids->add_devices_ids(id);
    EXPECT_EQ(ids->devices_ids_size(), units);
    pb::AllocateResponse response;
    grpc::ClientContext context2;
    grpc::Status status = plugin->Allocate(&context2, request, &response);
    return {status,
            status.ok() ? response.container_responses(0) : pb::ContainerAllocateResponse()};
  }

  // In the cgroup of the pod the container is of (its tenant's), or of `other_pod`.
  uint64_t FillAs(const pb::ContainerAllocateResponse& container, bool systemd_style = false,
                  std::string other_pod = "", uid_t user = 0) {
    auto owner = k8s::OwnerOfTenant(container.annotations().at("gpumux.io/tenant"));
    return FillWith({container.envs().begin(), container.envs().end()},
                    other_pod.empty() ? owner->uid : other_pod, systemd_style, user);
  }

  std::vector<std::string> plugin_args_;  // more of the device plugin's options
  std::unique_ptr<FakeKubelet> kubelet_;
  std::unique_ptr<k8s::KubeApi> kube_;
  std::unique_ptr<k8s::Extender> extender_;
  std::unique_ptr<service::HttpServer> http_;
  std::thread http_thread_;
};

// A tensor-parallel pod through the device-plugin path: 40 gpu-memory over 2 GPUs is placed on
// two GPUs of the node (best fit: the fuller of those that hold 20 GiB), allocated 20 GiB of
// devices on each, and admitted as one tenant over both, held to 20 GiB on each.
TEST_F(KubernetesTest, APodOfTwoGpusIsPlacedOnTwoAndHeldToItsShareOfEach) {
  ASSERT_NO_FATAL_FAILURE(StartStack(3));
  // A one-GPU pod of 70 GiB first: its GPU keeps 10 GiB, too little for the pod of two.
  api_->AddPod(PendingPod("big", "b1b1b1b1-0000-4000-8000-000000000031", {{{kMemory, 70}}}));
  ASSERT_EQ(Schedule("big"), "");
  std::string big_gpu = api_->Pod("big")["metadata"]["annotations"]["gpumux.io/assigned"];
  json tp = PendingPod("tp", "7b7b7b7b-0000-4000-8000-000000000032", {{{kMemory, 40}}},
                       "2026-12-04T08:00:01Z");
  tp["metadata"]["annotations"]["gpumux.io/gpu-count"] = "2";
  api_->AddPod(tp);
  ASSERT_EQ(Schedule("tp"), "");
  std::string assigned = api_->Pod("tp")["metadata"]["annotations"]["gpumux.io/assigned"];
  std::set<std::string> gpus = {"0", "1", "2"};
  gpus.erase(big_gpu);
  EXPECT_EQ(assigned, *gpus.begin() + "," + *gpus.rbegin()) << "the two GPUs with room";

  auto [status_big, big] = Allocate(kMemory, 70);
  ASSERT_TRUE(status_big.ok()) << status_big.error_message() << Log();
  // The kubelet asks for the preferred 40 devices: 20 on each of the pod's GPUs.
  auto plugin = kubelet_->Plugin(kMemory);
  pb::PreferredAllocationRequest preferred_request;
  auto* c = preferred_request.add_container_requests();
  for (const pb::Device& d : Devices(kMemory)) c->add_available_deviceids(d.id());
  c->set_allocation_size(40);
  pb::PreferredAllocationResponse preferred;
  grpc::ClientContext context;
  ASSERT_TRUE(plugin->GetPreferredAllocation(&context, preferred_request, &preferred).ok());
  std::map<std::string, int> per_gpu;
  for (const auto& id : preferred.container_responses(0).deviceids())
    ++per_gpu[id.substr(3, id.find('-') - 3)];
  EXPECT_EQ(per_gpu, (std::map<std::string, int>{{*gpus.begin(), 20}, {*gpus.rbegin(), 20}}));

  auto [status, answer] = Allocate(kMemory, 40);
  ASSERT_TRUE(status.ok()) << status.error_message() << Log();
  std::string id = answer.annotations().at("gpumux.io/tenant");
  json tenant = Tenant(id);
  EXPECT_EQ(tenant["gpus"], json::array({std::stoi(*gpus.begin()), std::stoi(*gpus.rbegin())}))
      << tenant;
  EXPECT_EQ(tenant["quota_bytes"].get<uint64_t>(), 20 * kGiB) << "the quota on each";
  // Its program sees two devices and is refused at 20 GiB on each, nothing left behind.
  json fill =
      RunInPod({answer.envs().begin(), answer.envs().end()}, "7b7b7b7b-0000-4000-8000-000000000032",
               std::string(GPUMUX_LLM_CLIENT) + " fill-each " + std::to_string(512 * kMiB));
  EXPECT_EQ(fill["allocated"], json::array({20 * kGiB, 20 * kGiB})) << fill;
  EXPECT_EQ(fill["used_after_each_fill"][0], json::array({20 * kGiB, 0})) << fill;
  EXPECT_EQ(fill["used_at_end"], json::array({0, 0})) << fill;

  // The extender keeps count: 65 GiB on each of two GPUs no longer fits the node (the pod's GPUs
  // have 60 GiB left, the big pod's 10), though it would on an empty one.
  json more = PendingPod("more", "3c3c3c3c-0000-4000-8000-000000000033", {{{kMemory, 130}}});
  more["metadata"]["annotations"]["gpumux.io/gpu-count"] = "2";
  api_->AddPod(more);
  auto [code, filtered] =
      Extend("filter", json{{"Pod", api_->Pod("more")}, {"NodeNames", {"node-a"}}}.dump());
  EXPECT_EQ(code, 200);
  EXPECT_EQ(filtered["NodeNames"], json::array()) << filtered;
  EXPECT_NE(filtered["FailedNodes"]["node-a"].get<std::string>().find("needs 2 GPUs, 0 fit"),
            std::string::npos)
      << filtered;
}

// Issue 40: the reason a pod is not placed reaches what kube-scheduler records (what `kubectl
// describe pod` shows), read as kube-scheduler reads the extender's answers: a pod that does not
// fit now (FailedNodes), one no node can ever take (FailedAndUnresolvableNodes), arguments that
// are not a pod, and a bind that cannot be done (ExtenderBindingResult's Error).
// Dynamic MIG through the device plugin: a GPU whose 3g.40gb instance runs an operator's tenant
// offers the 1g.10gb placements beside it (one resource per profile, a device per placement). A
// pod asking gpumux.io/mig-1g.10gb is placed by the extender where it rules out least (@6: the
// 1g.20gb@4 and 2g.20gb@4 stay possible), gets the instance made there, the busy one untouched,
// and runs under the instance's memory; the next such pod goes elsewhere. A profile no free
// placement allows is refused with the reason. Once the pod is gone and the grace period passes,
// the instance it got is removed; the operator's stays.
TEST_F(KubernetesTest, APodAskingAMigProfileGetsAnInstanceMadeThatGoesOnceItIsIdle) {
  plugin_args_ = {"--dynamic-mig", "--mig-idle-grace", "1"};
  const size_t kResources = 3 + 6;  // and the H100's profiles without media engines
  ASSERT_NO_FATAL_FAILURE(StartStack(
      1,
      [&] {
        Call("PUT", "/v1/gpus/0", {{"mode", "mig"}, {"layout", {"3g.40gb@0"}}}, 200);
        Call("POST", "/v1/tenants",
             {{"id", "busy"}, {"gpu", 0}, {"instance", 0}, {"memory", "4GiB"}}, 201);
      },
      kResources));
  const std::string kMig = "gpumux.io/mig-1g.10gb";
  auto healthy = [&] {
    std::set<std::string> ids;
    for (const pb::Device& d : Devices(kMig))
      if (d.health() == "Healthy") ids.insert(d.id());
    return ids;
  };
  EXPECT_EQ(Devices(kMig).size(), 7u) << "one per placement of 1g.10gb";
  EXPECT_EQ(healthy(), (std::set<std::string>{"gpu-0-mig-1g-10gb-at-4", "gpu-0-mig-1g-10gb-at-5",
                                              "gpu-0-mig-1g-10gb-at-6"}))
      << "those beside the busy instance";
  const uint64_t busy_bytes =
      Call("GET", "/v1/gpus", json(), 200)["gpus"][0]["instances"][0]["memory_bytes"];
  EXPECT_EQ(Devices(kMemory).size(), busy_bytes / kGiB)
      << "the operator's instance stays a slot of its own";

  api_->AddPod(PendingPod("small", "e1e1e1e1-0000-4000-8000-000000000041", {{{kMig, 1}}}));
  ASSERT_EQ(Schedule("small"), "");
  json annotations = api_->Pod("small")["metadata"]["annotations"];
  EXPECT_EQ(annotations["gpumux.io/assigned"], "0");
  EXPECT_EQ(annotations["gpumux.io/mig-placement"], "1g.10gb@6") << annotations;

  auto [status, container] = Allocate(kMig, 1);
  ASSERT_TRUE(status.ok()) << status.error_message() << Log();
  json gpu = Call("GET", "/v1/gpus", json(), 200)["gpus"][0];
  ASSERT_EQ(gpu["instances"].size(), 2u) << gpu;
  EXPECT_EQ(gpu["instances"][0]["profile"], "3g.40gb");
  EXPECT_EQ(gpu["instances"][0]["start"], 0) << "the busy instance stays where it is";
  EXPECT_EQ(gpu["instances"][1]["profile"], "1g.10gb");
  EXPECT_EQ(gpu["instances"][1]["start"], 6);
  const std::string tenant_id = "k8s-e1e1e1e1-0000-4000-8000-000000000041-0";
  json tenant = Tenant(tenant_id);
  EXPECT_EQ(tenant["instance"], gpu["instances"][1]["instance"]) << tenant;
  const uint64_t quota = tenant["quota_bytes"].get<uint64_t>();
  EXPECT_EQ(quota, gpu["instances"][1]["memory_bytes"].get<uint64_t>()) << "the whole instance";
  uint64_t got = FillAs(container);
  EXPECT_LE(got, quota);
  EXPECT_GT(got, quota - 64 * kMiB) << "the pod runs under its quota on the new instance";
  EXPECT_FALSE(Tenant("busy").is_null());

  // The extender counted it: the next 1g.10gb goes beside it; a 4g.40gb fits nowhere now.
  api_->AddPod(PendingPod("next", "e1e1e1e1-0000-4000-8000-000000000042", {{{kMig, 1}}},
                          "2026-12-04T08:00:01Z"));
  ASSERT_EQ(Schedule("next"), "");
  std::string next = api_->Pod("next")["metadata"]["annotations"]["gpumux.io/mig-placement"];
  EXPECT_TRUE(next == "1g.10gb@4" || next == "1g.10gb@5") << next;
  api_->AddPod(
      PendingPod("big", "e1e1e1e1-0000-4000-8000-000000000043", {{{"gpumux.io/mig-4g.40gb", 1}}}));
  std::string refused = Schedule("big");
  EXPECT_NE(refused.find("GPU 0: no 4g.40gb placement left beside the instances there"),
            std::string::npos)
      << refused;
  api_->DeletePod("next");
  api_->DeletePod("big");
  // The made instance is its pod's: no longer offered to others.
  for (int i = 0; i < 250 && healthy().count("gpu-0-mig-1g-10gb-at-6"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(healthy(), (std::set<std::string>{"gpu-0-mig-1g-10gb-at-4", "gpu-0-mig-1g-10gb-at-5"}));

  // The pod goes: its tenant is removed, then its idle instance after the grace period.
  api_->DeletePod("small");
  json after;
  for (int i = 0; i < 400; ++i) {
    after = Call("GET", "/v1/gpus", json(), 200)["gpus"][0];
    if (after["instances"].size() == 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(Tenant(tenant_id).is_null());
  EXPECT_EQ(after["layout"], json({"3g.40gb@0"})) << "the idle instance removed: " << Log();
  EXPECT_FALSE(Tenant("busy").is_null());
}

// A GPU put in MIG mode after the plugin registered (an operator's 1g.10gb@0 on it) brings its
// profiles' resources, registered with the kubelet then; the operator's instance stays a slot of
// gpu-memory, and no placement overlapping it is offered.
TEST_F(KubernetesTest, WithDynamicMigAGpuPutInMigModeLaterHasItsProfilesRegistered) {
  plugin_args_ = {"--dynamic-mig"};
  ASSERT_NO_FATAL_FAILURE(StartStack(1));
  EXPECT_EQ(Devices(kMemory).size(), 80u);
  Call("PUT", "/v1/gpus/0", {{"mode", "mig"}, {"layout", {"1g.10gb@0"}}}, 200);
  ASSERT_EQ(kubelet_->WaitForRegistrations(3 + 9), 12u) << "registered again, with 6 profiles";
  std::set<std::string> registered;
  for (const auto& r : kubelet_->registrations()) registered.insert(r.resource_name());
  for (const char* profile : {"1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"})
    EXPECT_TRUE(registered.count(std::string("gpumux.io/mig-") + profile)) << profile;
  std::map<std::string, std::string> health;
  for (const pb::Device& d : Devices("gpumux.io/mig-1g.10gb")) health[d.id()] = d.health();
  EXPECT_EQ(health.size(), 7u);
  EXPECT_EQ(health["gpu-0-mig-1g-10gb-at-0"], "Unhealthy") << "the operator's, not to give";
  EXPECT_EQ(health["gpu-0-mig-1g-10gb-at-1"], "Healthy");
  EXPECT_EQ(Devices("gpumux.io/mig-7g.80gb")[0].health(), "Unhealthy");
  const uint64_t kept =
      Call("GET", "/v1/gpus", json(), 200)["gpus"][0]["instances"][0]["memory_bytes"];
  EXPECT_EQ(Devices(kMemory).size(), kept / kGiB) << "the operator's instance, a slot";
  json rooms = json::parse(
      api_->Node("node-a")["metadata"]["annotations"]["gpumux.io/mig-rooms"].get<std::string>());
  EXPECT_EQ(rooms[0]["held"], json({0})) << rooms;
}

TEST_F(KubernetesTest, KubeSchedulerRecordsWhyTheExtenderRefusedAPod) {
  ASSERT_NO_FATAL_FAILURE(StartStack(1));
  api_->AddPod(PendingPod("huge", "e1e1e1e1-0000-4000-8000-000000000041", {{{kMemory, 100}}}));
  std::string huge =
      WhatKubeSchedulerRecords({{"Pod", api_->Pod("huge")}, {"NodeNames", {"node-a"}}});
  EXPECT_EQ(huge.rfind("0/1 nodes are available: 1 gpumux: ", 0), 0u) << huge;
  EXPECT_NE(huge.find("the pod asks 100"), std::string::npos) << huge;
  json capped = PendingPod("capped", "e1e1e1e1-0000-4000-8000-000000000042",
                           {{{kMemory, 2}, {kCompute, 20}}});
  capped["metadata"]["annotations"][k8s::kPriorityAnnotation] = "high";
  api_->AddPod(capped);
  std::string never =
      WhatKubeSchedulerRecords({{"Pod", api_->Pod("capped")}, {"NodeNames", {"node-a"}}});
  EXPECT_EQ(never.rfind("0/1 nodes are available: 1 gpumux: ", 0), 0u) << never;
  EXPECT_NE(never.find("high-priority"), std::string::npos) << never;
  std::string malformed = WhatKubeSchedulerRecords({{"Pod", 3}, {"NodeNames", {"node-a"}}});
  EXPECT_NE(malformed.find("v1.Pod"), std::string::npos) << malformed;
  EXPECT_EQ(malformed.find("code 400"), std::string::npos) << malformed;
  // A bind to a node without gpumux GPUs: the reason in the answer's Error.
  auto [status, bound] = Extend("bind", json{{"PodName", "huge"},
                                             {"PodNamespace", "default"},
                                             {"PodUID", "e1e1e1e1-0000-4000-8000-000000000041"},
                                             {"Node", "node-z"}}
                                            .dump());
  EXPECT_EQ(status, 200);
  EXPECT_NE(bound["Error"].get<std::string>().find("node-z"), std::string::npos) << bound;
}

TEST_F(KubernetesTest, TwoPodsOnOneGpuAreEachHeldToTheirQuotaAndTheNeighbourIsUntouched) {
  ASSERT_NO_FATAL_FAILURE(StartStack(1));
  // Registered as the kubelet expects: version, endpoint in its directory, preferred allocation.
  for (const auto& r : kubelet_->registrations()) {
    EXPECT_EQ(r.version(), "v1beta1");
    EXPECT_TRUE(std::filesystem::exists(kubelet_->dir() / r.endpoint())) << r.endpoint();
    EXPECT_TRUE(r.options().get_preferred_allocation_available());
  }
  EXPECT_EQ(Devices(kMemory).size(), 80u);  // one per GiB of the H100
  EXPECT_EQ(Devices(kCompute).size(), 100u);
  EXPECT_EQ(
      json::parse(
          api_->Node("node-a")["metadata"]["annotations"]["gpumux.io/gpus"].get<std::string>()),
      json::parse(R"([{"gpu":0,"memory_gib":80,"healthy":true}])"));

  api_->AddPod(PendingPod("serve-a", "aaaaaaaa-0000-4000-8000-000000000001",
                          {{{kMemory, 2}, {kCompute, 30}}}));
  api_->AddPod(PendingPod("serve-b", "bbbbbbbb-0000-4000-8000-000000000002", {{{kMemory, 4}}},
                          "2026-12-04T08:00:01Z"));
  ASSERT_EQ(Schedule("serve-a"), "");
  ASSERT_EQ(Schedule("serve-b"), "");
  EXPECT_EQ(api_->Pod("serve-a")["metadata"]["annotations"]["gpumux.io/assigned"], "0");
  EXPECT_EQ(api_->Pod("serve-a")["spec"]["nodeName"], "node-a");

  // The kubelet admits serve-a (memory, then compute of its one container), then serve-b.
  auto [status_a, a] = Allocate(kMemory, 2);
  ASSERT_TRUE(status_a.ok()) << status_a.error_message() << Log();
  auto [status_a2, a2] = Allocate(kCompute, 30);
  ASSERT_TRUE(status_a2.ok()) << status_a2.error_message();
  auto [status_b, b] = Allocate(kMemory, 4);
  ASSERT_TRUE(status_b.ok()) << status_b.error_message();
  std::string tenant_a = "k8s-aaaaaaaa-0000-4000-8000-000000000001-0";
  std::string tenant_b = "k8s-bbbbbbbb-0000-4000-8000-000000000002-0";
  EXPECT_EQ(a.envs().at("GPUMUX_TENANT"), tenant_a);
  EXPECT_EQ(a2.envs().at("GPUMUX_TENANT"), tenant_a) << "a container's resources: one tenant";
  EXPECT_EQ(b.envs().at("GPUMUX_TENANT"), tenant_b);
  EXPECT_EQ(a.annotations().at("gpumux.io/tenant"), tenant_a);
  // The container sees the shim, its ledger and gpumuxd at the paths the environment names, and
  // never the private authority ledgers.
  bool shim_read_only = false;
  for (const auto& m : a.mounts()) {
    EXPECT_EQ(m.host_path(), m.container_path());
    EXPECT_EQ(m.host_path().find("/private"), std::string::npos) << m.host_path();
    if (a.envs().at("LD_PRELOAD").rfind(m.host_path(), 0) == 0) shim_read_only = m.read_only();
  }
  EXPECT_TRUE(shim_read_only);
  json limits_a = Tenant(tenant_a);
  EXPECT_EQ(limits_a["quota_bytes"].get<uint64_t>(), 2 * kGiB) << limits_a;
  EXPECT_EQ(limits_a["compute_cap_percent"].get<double>(), 30.0) << limits_a;

  // Each program started with its container's environment is refused at exactly its quota (pod
  // B's cgroup named as systemd names it).
  EXPECT_EQ(FillAs(a), 2 * kGiB);
  json neighbour = Tenant(tenant_b);
  EXPECT_EQ(neighbour["quota_bytes"].get<uint64_t>(), 4 * kGiB) << neighbour;
  EXPECT_EQ(neighbour["used_bytes"].get<uint64_t>(), 0u) << neighbour;
  EXPECT_EQ(FillAs(b, /*systemd_style=*/true), 4 * kGiB);

  // A container is told, and given, the tenants' socket, never the operators'.
  std::string tenant_socket = a.envs().at("GPUMUX_AGENT");
  EXPECT_EQ(tenant_socket, tenant_socket_);
  for (const auto& m : a.mounts()) EXPECT_NE(m.host_path(), socket_);
  // As an attacker inside container a, root as it is: through that socket it can neither raise
  // its quota nor admit a tenant of its own...
  auto [raised, why] =
      CallUnix(tenant_socket, "PUT", "/v1/tenants/" + tenant_a, R"({"memory": "40GiB"})");
  EXPECT_EQ(raised, 403) << why;
  auto [admitted, why2] = CallUnix(tenant_socket, "POST", "/v1/tenants",
                                   R"({"id": "mine", "gpu": 0, "memory": "40GiB"})");
  EXPECT_EQ(admitted, 403) << why2;
  EXPECT_EQ(Tenant(tenant_a)["quota_bytes"].get<uint64_t>(), 2 * kGiB);
  // ...nor draw on its neighbour's memory with the neighbour's environment: both run as root, but
  // pod a's processes are not in pod b's cgroup.
  EXPECT_EQ(FillAs(b, false, "aaaaaaaa-0000-4000-8000-000000000001"), 0u);
  EXPECT_EQ(Tenant(tenant_b)["used_bytes"].get<uint64_t>(), 0u);

  // A pod that nothing scheduled through the extender is refused, saying why.
  auto [stray, unused] = Allocate(kMemory, 3);
  EXPECT_EQ(stray.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(stray.error_message().find("gpumux-k8s-scheduler"), std::string::npos);

  // The pod goes: its tenant goes with it, the neighbour stays.
  api_->DeletePod("serve-a");
  for (int i = 0; i < 250 && !Tenant(tenant_a).is_null(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(Tenant(tenant_a).is_null()) << Log();
  EXPECT_FALSE(Tenant(tenant_b).is_null());
}

// A pod whose spec does not say its user (the image's USER runs it; a namespace under the
// "restricted" Pod Security Standard asks only runAsNonRoot) is owned by the user of its first
// process in the pod, not by root, which would refuse that process every byte. Learned once, kept
// across gpumuxd's restart; no other user, another pod's or a root sidecar's, gets it.
TEST_F(KubernetesTest, APodThatDoesNotSayItsUserIsOwnedByTheUserItsContainerRunsAs) {
  ASSERT_NO_FATAL_FAILURE(StartStack(1));
  OpenToEveryone();
  const uid_t nobody = 65534;
  const std::string pod_uid = "aaaaaaaa-0000-4000-8000-000000000031";
  json pod = PendingPod("serve-a", pod_uid, {{{kMemory, 2}}});
  pod["spec"].erase("securityContext");
  api_->AddPod(pod);
  ASSERT_EQ(Schedule("serve-a"), "");
  auto [status, a] = Allocate(kMemory, 2);
  ASSERT_TRUE(status.ok()) << status.error_message() << Log();
  const std::string tenant = a.annotations().at("gpumux.io/tenant");
  EXPECT_EQ(Tenant(tenant)["owner_uid"], "learn");

  // Another pod's process, of any user, teaches it nothing and gets nothing; nor does a local
  // user's in a group it made of the pod's name, in a subtree systemd delegates to it.
  EXPECT_EQ(FillAs(a, false, "bbbbbbbb-0000-4000-8000-000000000032", nobody), 0u);
  pod_cgroups_under_ = "user@65534.service/";
  for (std::string made : {std::string(), "pod" + pod_uid}) {
    std::filesystem::create_directories(cgroups_ / pod_cgroups_under_ / made);
    ASSERT_EQ(chown((cgroups_ / pod_cgroups_under_ / made).c_str(), nobody, nobody), 0);
  }
  EXPECT_EQ(FillAs(a, false, "", nobody), 0u);
  pod_cgroups_under_ = "";
  EXPECT_EQ(Tenant(tenant)["owner_uid"], "learn");
  // The container's program, as the image's user: its quota, and the tenant is that user's.
  EXPECT_EQ(FillAs(a, false, "", nobody), 2 * kGiB);
  EXPECT_EQ(Tenant(tenant)["owner_uid"], nobody);
  // Root in the same pod (a sidecar of another image) is not that user.
  EXPECT_EQ(FillAs(a), 0u);

  // Admitting it again as the device plugin does (for the container's other resource), and
  // gpumuxd's restart, keep the owner learned.
  Call("POST", "/v1/tenants", {{"id", tenant}, {"memory", "2GiB"}, {"owner_uid", "learn"}}, 200);
  EXPECT_EQ(Tenant(tenant)["owner_uid"], nobody);
  StopAgent(SIGTERM);
  StartAgentOn({"--sim", "H100", "--gpus", "1"}, {});
  EXPECT_EQ(Tenant(tenant)["owner_uid"], nobody);
  EXPECT_EQ(FillAs(a, false, "", nobody), 2 * kGiB);
  EXPECT_EQ(FillAs(a), 0u);
}

TEST_F(KubernetesTest, ListAndWatchSendsARelayoutAndALostGpu) {
  ASSERT_NO_FATAL_FAILURE(StartStack(2));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  auto reader = kubelet_->Plugin(kMemory)->ListAndWatch(&context, pb::Empty());
  pb::ListAndWatchResponse response;
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.devices_size(), 160);
  for (const auto& d : response.devices()) EXPECT_EQ(d.health(), "Healthy");

  // GPU 1 falls off the bus (the simulated NVML reports it lost): its devices go Unhealthy.
  std::ofstream((dir_ / "run" / "sim-gpu1.state.lost").string()) << "Xid 79\n";
  ASSERT_TRUE(reader->Read(&response));
  int unhealthy = 0;
  for (const auto& d : response.devices()) {
    bool on_gpu1 = d.id().rfind("gpu1-", 0) == 0;
    EXPECT_EQ(d.health(), on_gpu1 ? "Unhealthy" : "Healthy") << d.id();
    unhealthy += d.health() == "Unhealthy";
  }
  EXPECT_EQ(unhealthy, 80);

  // GPU 0 laid out as two MIG instances: a device per GiB of each instance.
  Call("PUT", "/v1/gpus/0", {{"mode", "mig"}, {"layout", {"3g.40gb", "3g.40gb"}}}, 200);
  ASSERT_TRUE(reader->Read(&response));
  std::set<std::string> prefixes;
  for (const auto& d : response.devices()) prefixes.insert(d.id().substr(0, d.id().find('-')));
  EXPECT_EQ(prefixes, (std::set<std::string>{"gpu0.0", "gpu0.1", "gpu1"}));
  context.TryCancel();
}

// Registration with the kubelet never waits on the API server (issue 22: one failing node PATCH
// kept the plugin from ever registering); the node's GPUs are published once the server answers.
TEST_F(KubernetesTest, ThePluginRegistersWhileTheApiServerIsDownAndPublishesItsGpusOnceItIsUp) {
  StartNode(1);
  std::string api_socket = (dir_ / "api.sock").string();
  api_.reset();  // the API server is down
  kubelet_ = std::make_unique<FakeKubelet>(sockets_);
  kubelet_->Start();
  StartProgram(GPUMUX_K8S_DEVICE_PLUGIN,
               {"--kubelet-dir", sockets_.string(), "--state-dir", (dir_ / "k8s-state").string(),
                "--apiserver", "unix:" + api_socket});
  EXPECT_EQ(kubelet_->WaitForRegistrations(3), 3u) << Log();
  EXPECT_NE(Log().find("cannot annotate the node"), std::string::npos) << Log();
  api_ = std::make_unique<FakeApiServer>(api_socket);
  api_->AddNode("node-a");
  for (int i = 0; i < 250 && !api_->Node("node-a")["metadata"].contains("annotations"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(api_->Node("node-a")["metadata"].contains("annotations")) << Log();
}

// The device plugin reads its node's pods from a watch: its polls (every 0.1 s here) list nothing.
TEST_F(KubernetesTest, ThePluginWatchesItsNodesPodsInsteadOfListingThemAtEachPoll) {
  ASSERT_NO_FATAL_FAILURE(StartStack(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  int lists = api_->node_lists();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_EQ(api_->node_lists(), lists) << "ten polls, no list";
  // A pod that goes: the watch says so, a list made then confirms it, and its tenant goes.
  api_->AddPod(PendingPod("short", "dddddddd-0000-4000-8000-000000000009", {{{kMemory, 2}}}));
  ASSERT_EQ(Schedule("short"), "");
  auto [status, container] = Allocate(kMemory, 2);
  ASSERT_TRUE(status.ok()) << status.error_message();
  std::string tenant = container.envs().at("GPUMUX_TENANT");
  EXPECT_FALSE(Tenant(tenant).is_null());
  api_->DeletePod("short");
  for (int i = 0; i < 100 && !Tenant(tenant).is_null(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(Tenant(tenant).is_null()) << "the tenant of the pod that went is removed";
}

// The informer as client-go's: a list in pages, then a watch from the list's version; events as
// they come; after 410 Gone a fresh list, which reports what went missing meanwhile.
TEST_F(KubernetesTest, AnInformerListsInPagesWatchesAndListsAgainAfterGone) {
  StartNode(1);
  for (int i = 0; i < 1203; ++i)
    api_->AddPod(PendingPod("p" + std::to_string(i),
                            "00000000-0000-4000-8000-" + std::to_string(100000000000 + i),
                            {{{kMemory, 1}}}));
  k8s::KubeApi api(api_->address());
  std::set<std::string> live;
  int upserts = 0, removes = 0;
  k8s::Informer informer(&api, "/api/v1/pods",
                         {[&](const json& p) {
                            live.insert(p["metadata"]["name"]);
                            ++upserts;
                          },
                          [&](const json& p) {
                            live.erase(p["metadata"]["name"]);
                            ++removes;
                          }},
                         500);
  informer.List();
  EXPECT_EQ(live.size(), 1203u);
  EXPECT_EQ(api_->lists(), 3) << "three pages of at most 500";
  std::atomic<bool> stop{false};
  api_->AddPod(PendingPod("late", "00000000-0000-4000-8000-999999999999", {{{kMemory, 1}}}));
  api_->DeletePod("p7");
  EXPECT_TRUE(informer.Watch(stop));
  EXPECT_TRUE(live.count("late"));
  EXPECT_FALSE(live.count("p7"));
  std::string bookmarked = informer.resource_version();
  EXPECT_TRUE(informer.Watch(stop)) << "nothing new: a bookmark only";
  EXPECT_EQ(informer.resource_version(), bookmarked);
  // The server forgets its events; a pod goes meanwhile. The watch is told 410, the list after it
  // finds the pod gone.
  api_->DeletePod("p8");
  api_->Compact();
  int lists = api_->lists();
  EXPECT_FALSE(informer.Watch(stop)) << "410 Gone";
  informer.List();
  EXPECT_EQ(api_->lists(), lists + 3);
  EXPECT_FALSE(live.count("p8")) << "gone from the fresh list, so removed";
  EXPECT_EQ(live.size(), 1202u);
  EXPECT_EQ(informer.size(), 1202u);
}

// Issue 40: a watch that fails (an API server restarting answers 503, a connection cut) is resumed
// from the last version seen, without a list, after a back-off; only failures that go on list
// again, as client-go's reflector does.
TEST_F(KubernetesTest, AnInformerResumesAFailedWatchWithoutAListAndListsOnlyWhenFailuresGoOn) {
  StartNode(1);
  for (int i = 0; i < 20; ++i)
    api_->AddPod(PendingPod("p" + std::to_string(i),
                            "00000000-0000-4000-8000-" + std::to_string(100000000000 + i),
                            {{{kMemory, 1}}}));
  k8s::KubeApi api(api_->address());
  std::mutex mu;
  std::set<std::string> live;
  k8s::Informer informer(&api, "/api/v1/pods",
                         {[&](const json& p) {
                            std::lock_guard lock(mu);
                            live.insert(p["metadata"]["name"]);
                          },
                          [&](const json& p) {
                            std::lock_guard lock(mu);
                            live.erase(p["metadata"]["name"]);
                          }});
  std::atomic<bool> stop{false};
  std::thread running([&] { informer.Run(stop, std::chrono::milliseconds(10)); });
  auto await = [&](const std::function<bool()>& done) {
    for (int i = 0; i < 400 && !done(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return done();
  };
  ASSERT_TRUE(await([&] { return api_->watches("pods") >= 1; }));
  int lists = api_->lists(), watches = api_->watches("pods");
  api_->FailWatches(k8s::Informer::kListAfterFailures - 1);
  api_->AddPod(PendingPod("after", "00000000-0000-4000-8000-999999999998", {{{kMemory, 1}}}));
  EXPECT_TRUE(await([&] {
    std::lock_guard lock(mu);
    return live.count("after") > 0;
  })) << "the resumed watch brought the new pod";
  EXPECT_GE(api_->watches("pods"), watches + k8s::Informer::kListAfterFailures);
  EXPECT_EQ(api_->lists(), lists) << "no list for a failed watch";
  // Failures that go on: a list then, and the watch from its version.
  api_->FailWatches(k8s::Informer::kListAfterFailures);
  EXPECT_TRUE(await([&] { return api_->lists() > lists; })) << "listed again";
  EXPECT_EQ(api_->lists(), lists + 1);
  stop = true;
  running.join();
  EXPECT_EQ(informer.size(), 21u);
}

// With 150,000 pods in the cluster the extender lists them once, in pages, then answers filter
// from what it holds: a pod placed elsewhere in the cluster by another scheduler run is counted
// when its event arrives, with no list.
TEST_F(KubernetesTest, TheExtenderWatchesAClusterOf150000PodsAndFiltersFromItsModel) {
  ASSERT_NO_FATAL_FAILURE(StartStack(1));
  const int pods = 150000;
  for (int i = 0; i < pods; ++i) {
    json pod = {
        {"metadata",
         {{"name", "cpu-" + std::to_string(i)},
          {"namespace", "batch"},
          {"uid", "ffffffff-0000-4000-8000-" + std::to_string(100000000000 + i)}}},
        {"spec",
         {{"nodeName", "cpu-node-" + std::to_string(i % 1000)}, {"containers", {{{"name", "c"}}}}}},
        {"status", {{"phase", "Running"}}}};
    api_->AddPod(pod);
  }
  api_->Compact();  // the fake keeps no event of them (memory): a list is how they are known
  std::atomic<bool> stop{false};
  auto started = std::chrono::steady_clock::now();
  std::thread watching([&] { extender_->Watch(stop); });
  // An 80 GiB GPU; a pod of 60 GiB placed on it by an earlier bind shows up as an event.
  json placed = PendingPod("big", "abababab-0000-4000-8000-000000000001", {{{kMemory, 60}}});
  placed["metadata"]["annotations"][k8s::kAssignedAnnotation] = "0";
  placed["spec"]["nodeName"] = "node-a";
  placed["status"]["phase"] = "Running";
  // Synced: it has listed the pods and watches them.
  for (int i = 0; i < 1200 && api_->watches("pods") < 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  int lists_before = api_->lists();
  double synced_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  api_->AddPod(placed);
  int used = 0;
  for (int i = 0; i < 100 && used < 60; ++i) {
    used = extender_->NodeState("node-a").slots()[0].used_memory_gib;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(used, 60) << "the watch brought the placed pod";
  api_->AddPod(PendingPod("next", "abababab-0000-4000-8000-000000000002", {{{kMemory, 30}}}));
  std::string error = Schedule("next");
  EXPECT_NE(error.find("20 GiB of memory free"), std::string::npos) << error;
  EXPECT_EQ(api_->lists(), lists_before) << "filter and the watch listed nothing";
  stop = true;
  watching.join();
  std::printf("150,000 pods: listed and watching in %.1f s\n", synced_s);
}

TEST_F(KubernetesTest, ReRegistersWhenTheKubeletRestartsAndKeepsTenantsWhenItRestartsItself) {
  ASSERT_NO_FATAL_FAILURE(StartStack(1));
  api_->AddPod(PendingPod("train", "cccccccc-0000-4000-8000-000000000003",
                          {{{kMemory, 8}, {kCompute, 50}}, {{kMemory, 1}}}));
  ASSERT_EQ(Schedule("train"), "");
  auto [first, c0] = Allocate(kMemory, 8);
  ASSERT_TRUE(first.ok()) << first.error_message();

  // The kubelet restarts: every socket in its directory goes, kubelet.sock comes back.
  kubelet_->Stop();
  kubelet_->Start();
  EXPECT_EQ(kubelet_->WaitForRegistrations(6), 6u) << Log();
  EXPECT_EQ(Devices(kMemory).size(), 80u);

  // The plugin is killed and started again: the running container's tenant stays, and the
  // pod's allocation goes on where it was (container 0's compute, then container 1).
  StopProgram(SIGKILL);
  std::string tenant0 = "k8s-cccccccc-0000-4000-8000-000000000003-0";
  EXPECT_EQ(Tenant(tenant0)["quota_bytes"].get<uint64_t>(), 8 * kGiB);
  // Its metrics' labels: the pod's namespace, name and container.
  EXPECT_EQ(Tenant(tenant0)["pod_namespace"], "default");
  EXPECT_EQ(Tenant(tenant0)["pod"], "train");
  EXPECT_EQ(Tenant(tenant0)["container"], "c0");
  StartPlugin();
  EXPECT_EQ(kubelet_->WaitForRegistrations(9), 9u) << Log();
  auto [second, c0_compute] = Allocate(kCompute, 50);
  ASSERT_TRUE(second.ok()) << second.error_message();
  EXPECT_EQ(c0_compute.envs().at("GPUMUX_TENANT"), tenant0);
  auto [third, c1] = Allocate(kMemory, 1);
  ASSERT_TRUE(third.ok()) << third.error_message();
  EXPECT_EQ(c1.envs().at("GPUMUX_TENANT"), "k8s-cccccccc-0000-4000-8000-000000000003-1");
  EXPECT_EQ(FillAs(c1), 1 * kGiB);
  EXPECT_EQ(Tenant(tenant0)["compute_cap_percent"].get<double>(), 50.0);
}

TEST_F(KubernetesTest, OfTwoPodsRacingForTheLastRoomOfAGpuOneIsBoundAndTheOtherFilteredAgain) {
  ASSERT_NO_FATAL_FAILURE(StartStack(1));
  api_->AddPod(PendingPod("big-1", "dddddddd-0000-4000-8000-000000000001", {{{kMemory, 60}}}));
  api_->AddPod(PendingPod("big-2", "dddddddd-0000-4000-8000-000000000002", {{{kMemory, 60}}}));
  // Both pass filter while neither is bound.
  for (const char* name : {"big-1", "big-2"}) {
    json args = {{"Pod", api_->Pod(name)}, {"NodeNames", {"node-a"}}};
    EXPECT_EQ(Extend("filter", args.dump()).second["NodeNames"], json{"node-a"});
  }
  // Their binds race.
  std::string errors[2];
  std::thread racers[2];
  for (int i = 0; i < 2; ++i) {
    racers[i] = std::thread([&, i] {
      std::string name = "big-" + std::to_string(i + 1);
      json bind = {{"PodName", name},
                   {"PodNamespace", "default"},
                   {"PodUID", "dddddddd-0000-4000-8000-00000000000" + std::to_string(i + 1)},
                   {"Node", "node-a"}};
      errors[i] = Extend("bind", bind.dump()).second["Error"].get<std::string>();
    });
  }
  for (auto& t : racers) t.join();
  EXPECT_NE(errors[0].empty(), errors[1].empty()) << errors[0] << " / " << errors[1];
  EXPECT_EQ(api_->bindings(), 1);
  std::string loser = errors[0].empty() ? "big-2" : "big-1";
  EXPECT_NE((errors[0] + errors[1]).find("no longer fits"), std::string::npos);
  // kube-scheduler filters the loser again: no room, and why.
  json args = {{"Pod", api_->Pod(loser)}, {"NodeNames", {"node-a"}}};
  json again = Extend("filter", args.dump()).second;
  EXPECT_EQ(again["NodeNames"], json::array());
  EXPECT_NE(again["FailedNodes"]["node-a"].get<std::string>().find("20 GiB of memory free"),
            std::string::npos)
      << again;
  // Only the winner is admitted by the device plugin.
  auto [won, unused] = Allocate(kMemory, 60);
  EXPECT_TRUE(won.ok()) << won.error_message();
  auto [lost, unused2] = Allocate(kMemory, 60);
  EXPECT_FALSE(lost.ok());
  json tenants = json::parse(CallUnix(socket_, "GET", "/v1/tenants").second)["tenants"];
  EXPECT_EQ(tenants.size(), 1u) << tenants;
}

TEST_F(KubernetesTest, AMalformedRequestIsRefusedWithTheReasonAndChangesNothing) {
  ASSERT_NO_FATAL_FAILURE(StartStack(1));
  api_->AddPod(PendingPod("p", "eeeeeeee-0000-4000-8000-000000000001", {{{kMemory, 2}}}));
  json pod = api_->Pod("p");
  json bad_quantity = pod;
  bad_quantity["spec"]["containers"][0]["resources"]["limits"][kMemory] = "2.5";
  struct Case {
    std::string verb, body, reason;
  } cases[] = {
      {"filter", "{not json", "not JSON"},
      {"filter", json{{"NodeNames", {"node-a"}}}.dump(), "expected a v1.Pod"},
      {"filter", json{{"Pod", pod}, {"NodeNames", "node-a"}}.dump(), "NodeNames"},
      {"filter", json{{"Pod", bad_quantity}, {"NodeNames", {"node-a"}}}.dump(), "whole number"},
      {"prioritize", json{{"Pod", pod}, {"Nodes", {{"items", 3}}}}.dump(), "Nodes.items"},
      {"bind", json{{"PodName", "p"}, {"Node", "node-a"}}.dump(), "PodNamespace"},
      {"bind", "[]", "ExtenderBindingArgs"},
  };
  for (const Case& c : cases) {
    // A 200 whose fields say why (kube-scheduler reads no other answer's body): the Error, or
    // each node's reason; a prioritize, which has no field for it, gives no scores.
    auto [status, answer] = Extend(c.verb, c.body);
    EXPECT_EQ(status, 200) << c.verb << " " << c.body;
    if (c.verb == "prioritize") {
      EXPECT_EQ(answer, json::array()) << c.body;
      continue;
    }
    EXPECT_NE(answer.dump().find(c.reason), std::string::npos) << answer << " for " << c.body;
    if (c.verb == "filter") EXPECT_TRUE(answer["NodeNames"].empty()) << answer;
  }
  EXPECT_EQ(api_->bindings(), 0);
  EXPECT_FALSE(api_->Pod("p")["metadata"]["annotations"].contains("gpumux.io/assigned"));
  EXPECT_EQ(json::parse(CallUnix(socket_, "GET", "/v1/tenants").second)["tenants"].size(), 0u);
}

// The DRA driver with a fake API server and, as the kubelet, a client of its registration and
// DRAPlugin sockets.
class DraTest : public KubernetesNodeTest {
 protected:
  void StartDra(int gpus) {
    StartNode(gpus);
    StartProgram(GPUMUX_K8S_DRA_DRIVER, {"--cdi-dir", (dir_ / "cdi").string(), "--plugin-dir",
                                         (sockets_ / "plugins").string(), "--registry-dir",
                                         (sockets_ / "registry").string()});
    for (int i = 0; i < 250 && Slice().is_null(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_FALSE(Slice().is_null()) << Log();
  }
  json Slice() { return api_->Get("/apis/resource.k8s.io/v1/resourceslices/node-a-gpu.gpumux.io"); }
  // The slices of this node's pool at its newest generation, once all of them are there (the
  // allocator uses no device of an incomplete pool); empty before.
  std::vector<json> Pool() {
    std::vector<json> slices;
    int64_t newest = -1;
    for (const json& s : api_->List("/apis/resource.k8s.io/v1/resourceslices/")) {
      if (s["spec"]["pool"]["name"] != "node-a") continue;
      int64_t generation = s["spec"]["pool"]["generation"];
      if (generation > newest) slices.clear(), newest = generation;
      if (generation == newest) slices.push_back(s);
    }
    if (slices.empty() || slices[0]["spec"]["pool"]["resourceSliceCount"] != slices.size())
      return {};
    return slices;
  }
  // The device of MIG `profile` that kube-scheduler's allocator could give a claim now, with
  // `allocated` given to others: as it checks partitionable devices, each counter a device consumes
  // must have that much left of its counter set (anywhere in the pool) after what the allocated
  // devices consume. Empty when none can be.
  std::string SchedulerPicks(const std::string& profile, const std::set<std::string>& allocated) {
    std::vector<json> pool = Pool();
    std::map<std::string, std::map<std::string, int64_t>> left;  // set -> counter -> value
    std::vector<json> devices;
    for (const json& slice : pool) {
      for (const json& set : slice["spec"].value("sharedCounters", json::array()))
        for (const auto& [name, counter] : set["counters"].items())
          left[set["name"]][name] = std::stoll(counter["value"].get<std::string>());
      for (const json& d : slice["spec"].value("devices", json::array())) devices.push_back(d);
    }
    auto fits = [&](const json& device, bool take) {
      for (const json& use : device.value("consumesCounters", json::array())) {
        auto set = left.find(use["counterSet"]);
        if (set == left.end()) return false;  // the pool is invalid: nothing is allocated
        for (const auto& [name, counter] : use["counters"].items()) {
          auto have = set->second.find(name);
          int64_t need = std::stoll(counter["value"].get<std::string>());
          if (have == set->second.end() || have->second < need) return false;
          if (take) have->second -= need;
        }
      }
      return true;
    };
    for (const json& d : devices)
      if (allocated.count(d["name"])) EXPECT_TRUE(fits(d, true)) << d;
    for (const json& d : devices)
      if (!allocated.count(d["name"]) && d["attributes"]["profile"]["string"] == profile &&
          fits(d, false))
        return d["name"];
    return "";
  }
  // The slice's device names, once it shows `expected` (or after 5 s).
  std::set<std::string> SliceDevices(const std::set<std::string>& expected) {
    std::set<std::string> names;
    for (int i = 0; i < 250; ++i) {
      names.clear();
      json devices = Slice()["spec"]["devices"];  // a copy: the loop's range must outlive it
      for (const json& d : devices) names.insert(d["name"]);
      if (names == expected) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return names;
  }

  // A claim's status.reservedFor naming the pod p-<name> (kPodUid), as the scheduler writes it.
  static json ReservedFor(const std::string& name) {
    return json::array({{{"resource", "pods"}, {"name", "p-" + name}, {"uid", kPodUid}}});
  }
  // A ResourceClaim as the scheduler leaves it: allocated `device` of `driver` for request "gpu",
  // with opaque `parameters` (none if null) and the capacity it consumed (none if null).
  static constexpr const char* kShareId = "5ba7e000-0000-4000-8000-000000000002";
  // (On `pool`, reserved for a pod unless `reserved` is false.)
  void PutClaim(const std::string& name, const std::string& uid, const std::string& device,
                const json& parameters, const json& consumed = nullptr,
                const std::string& driver = "gpu.gpumux.io", const std::string& pool = "node-a",
                bool reserved = true) {
    json result = {{"request", "gpu"}, {"driver", driver}, {"pool", pool}, {"device", device}};
    json reserved_for = reserved ? ReservedFor(name) : json::array();
    // Capacity consumed: one share of a device others may share too (1.34+), with its shareID.
    if (!consumed.is_null()) {
      result["consumedCapacity"] = consumed;
      result["shareID"] = kShareId;
    }
    json allocation = {{"devices", {{"results", {result}}}}};
    if (!parameters.is_null())
      allocation["devices"]["config"] = {
          {{"source", "FromClaim"},
           {"requests", {"gpu"}},
           {"opaque", {{"driver", driver}, {"parameters", parameters}}}}};
    api_->PutClaim({{"apiVersion", "resource.k8s.io/v1"},
                    {"kind", "ResourceClaim"},
                    {"metadata", {{"name", name}, {"namespace", "default"}, {"uid", uid}}},
                    {"spec", {{"devices", {{"requests", {{{"name", "gpu"}}}}}}}},
                    {"status", {{"allocation", allocation}, {"reservedFor", reserved_for}}}});
  }

  std::unique_ptr<::k8s::io::kubelet::pkg::apis::dra::v1::DRAPlugin::Stub> Plugin() {
    return ::k8s::io::kubelet::pkg::apis::dra::v1::DRAPlugin::NewStub(
        grpc::CreateChannel("unix:" + (sockets_ / "plugins" / "dra.sock").string(),
                            grpc::InsecureChannelCredentials()));
  }
  ::k8s::io::kubelet::pkg::apis::dra::v1::NodePrepareResourceResponse Prepare(
      const std::string& name, const std::string& uid) {
    ::k8s::io::kubelet::pkg::apis::dra::v1::NodePrepareResourcesRequest request;
    auto* claim = request.add_claims();
    claim->set_namespace_("default");
    claim->set_name(name);
    claim->set_uid(uid);
    ::k8s::io::kubelet::pkg::apis::dra::v1::NodePrepareResourcesResponse response;
    grpc::ClientContext context;
    EXPECT_TRUE(Plugin()->NodePrepareResources(&context, request, &response).ok()) << Log();
    return response.claims().at(uid);
  }
  std::string Unprepare(const std::string& uid) {
    ::k8s::io::kubelet::pkg::apis::dra::v1::NodeUnprepareResourcesRequest request;
    auto* claim = request.add_claims();
    claim->set_namespace_("default");
    claim->set_name("any");
    claim->set_uid(uid);
    ::k8s::io::kubelet::pkg::apis::dra::v1::NodeUnprepareResourcesResponse response;
    grpc::ClientContext context;
    EXPECT_TRUE(Plugin()->NodeUnprepareResources(&context, request, &response).ok());
    return response.claims().at(uid).error();
  }
  json Cdi(const std::string& uid) {
    std::ifstream in(dir_ / "cdi" / ("gpumux.io-tenant_" + uid + ".json"));
    if (!in) return nullptr;
    return json::parse(std::string(std::istreambuf_iterator<char>(in), {}), nullptr, false);
  }
  // Runs the test client with the environment of the claim's CDI spec, as the runtime would.
  uint64_t FillAsCdi(const json& spec, const std::string& pod_uid = kPodUid, uid_t user = 0) {
    std::map<std::string, std::string> envs;
    for (const json& kv : spec["devices"][0]["containerEdits"]["env"]) {
      std::string text = kv;
      envs[text.substr(0, text.find('='))] = text.substr(text.find('=') + 1);
    }
    return FillWith(envs, pod_uid, false, user);
  }
};

TEST_F(DraTest, RegistersPublishesItsGpusAndPreparesAClaimAsATenantAtItsQuota) {
  ASSERT_NO_FATAL_FAILURE(StartDra(2));
  // The kubelet's plugin watcher finds the registration socket and asks.
  auto registration = ::pluginregistration::Registration::NewStub(
      grpc::CreateChannel("unix:" + (sockets_ / "registry" / "gpu.gpumux.io-reg.sock").string(),
                          grpc::InsecureChannelCredentials()));
  ::pluginregistration::PluginInfo info;
  grpc::ClientContext c1;
  ASSERT_TRUE(registration->GetInfo(&c1, {}, &info).ok()) << Log();
  EXPECT_EQ(info.type(), "DRAPlugin");
  EXPECT_EQ(info.name(), "gpu.gpumux.io");
  EXPECT_EQ(info.endpoint(), (sockets_ / "plugins" / "dra.sock").string());
  ASSERT_EQ(info.supported_versions_size(), 1);
  EXPECT_EQ(info.supported_versions(0), "v1.DRAPlugin");
  ::pluginregistration::RegistrationStatus registered;
  registered.set_plugin_registered(true);
  ::pluginregistration::RegistrationStatusResponse ack;
  grpc::ClientContext c2;
  EXPECT_TRUE(registration->NotifyRegistrationStatus(&c2, registered, &ack).ok());

  // Its ResourceSlice: one device per GPU, with memory and compute as capacity.
  json slice = Slice();
  EXPECT_EQ(slice["apiVersion"], "resource.k8s.io/v1");
  EXPECT_EQ(slice["spec"]["driver"], "gpu.gpumux.io");
  EXPECT_EQ(slice["spec"]["nodeName"], "node-a");
  EXPECT_EQ(slice["spec"]["pool"]["name"], "node-a");
  ASSERT_EQ(slice["spec"]["devices"].size(), 2u);
  json gpu0 = slice["spec"]["devices"][0];
  EXPECT_EQ(gpu0["name"], "gpu-0");
  EXPECT_EQ(gpu0["capacity"]["memory"]["value"], "80Gi");
  EXPECT_EQ(gpu0["capacity"]["compute"]["value"], "100");
  EXPECT_EQ(gpu0["attributes"]["mode"]["string"], "timeslice");

  // A claim with its parameters: a tenant at 3 GiB and 25%, started through its CDI spec.
  std::string uid = "c1a1c1a1-0000-4000-8000-000000000001";
  PutClaim("serve", uid, "gpu-1", {{"memory", "3Gi"}, {"compute", 25}, {"priority", "normal"}});
  auto prepared = Prepare("serve", uid);
  ASSERT_EQ(prepared.error(), "");
  ASSERT_EQ(prepared.devices_size(), 1);
  EXPECT_EQ(prepared.devices(0).pool_name(), "node-a");
  EXPECT_EQ(prepared.devices(0).device_name(), "gpu-1");
  EXPECT_EQ(prepared.devices(0).request_names(0), "gpu");
  EXPECT_FALSE(prepared.devices(0).has_share_id()) << "a device the claim has alone";
  ASSERT_EQ(prepared.devices(0).cdi_device_ids_size(), 1);
  EXPECT_EQ(prepared.devices(0).cdi_device_ids(0), "gpumux.io/tenant=" + uid);
  json spec = Cdi(uid);
  ASSERT_TRUE(spec.is_object()) << "the CDI spec is JSON";
  EXPECT_EQ(spec["cdiVersion"], "0.6.0");
  EXPECT_EQ(spec["kind"], "gpumux.io/tenant");
  ASSERT_EQ(spec["devices"].size(), 1u);
  EXPECT_EQ(spec["devices"][0]["name"], uid);
  json edits = spec["devices"][0]["containerEdits"];
  EXPECT_NE(edits["env"].dump().find("GPUMUX_TENANT=k8s-claim-" + uid), std::string::npos);
  for (const json& m : edits["mounts"]) {
    EXPECT_TRUE(m["hostPath"].is_string() && m["containerPath"].is_string()) << m;
    EXPECT_NE(m["options"].dump().find("bind"), std::string::npos) << m;
  }
  json tenant = Tenant("k8s-claim-" + uid);
  EXPECT_EQ(tenant["gpu"], 1);
  EXPECT_EQ(tenant["quota_bytes"].get<uint64_t>(), 3 * kGiB);
  EXPECT_EQ(tenant["compute_cap_percent"].get<double>(), 25.0);
  EXPECT_EQ(FillAsCdi(spec), 3 * kGiB);

  // Without parameters, the capacity the allocation consumed is the quota.
  std::string uid2 = "c1a1c1a1-0000-4000-8000-000000000002";
  PutClaim("eval", uid2, "gpu-1", nullptr, {{"memory", "5Gi"}});
  auto shared = Prepare("eval", uid2);
  ASSERT_EQ(shared.error(), "");
  ASSERT_EQ(shared.devices_size(), 1);
  EXPECT_EQ(shared.devices(0).share_id(), kShareId) << "the kubelet is told which share it is";
  EXPECT_EQ(Tenant("k8s-claim-" + uid2)["quota_bytes"].get<uint64_t>(), 5 * kGiB);
  EXPECT_EQ(FillAsCdi(Cdi(uid2)), 5 * kGiB);
  EXPECT_EQ(Tenant("k8s-claim-" + uid)["used_bytes"].get<uint64_t>(), 0u) << "the neighbour";

  // What gpumux cannot honour fails that claim alone, saying why, and admits nothing.
  std::string uid3 = "c1a1c1a1-0000-4000-8000-000000000003";
  PutClaim("bad", uid3, "gpu-0", {{"memory", "lots"}});
  auto bad = Prepare("bad", uid3);
  EXPECT_NE(bad.error().find("parameters.memory"), std::string::npos) << bad.error();
  EXPECT_TRUE(Tenant("k8s-claim-" + uid3).is_null());
  EXPECT_TRUE(Cdi(uid3).is_null());
  // A claim of another driver is none of its business.
  std::string uid4 = "c1a1c1a1-0000-4000-8000-000000000004";
  PutClaim("other", uid4, "gpu-0", nullptr, nullptr, "gpu.nvidia.com");
  auto other = Prepare("other", uid4);
  EXPECT_EQ(other.error(), "");
  EXPECT_EQ(other.devices_size(), 0);
  EXPECT_TRUE(Tenant("k8s-claim-" + uid4).is_null());

  // Unprepare removes the tenant and the CDI spec; again is no error.
  EXPECT_EQ(Unprepare(uid), "");
  EXPECT_TRUE(Tenant("k8s-claim-" + uid).is_null());
  EXPECT_TRUE(Cdi(uid).is_null());
  EXPECT_EQ(Unprepare(uid), "");
  EXPECT_FALSE(Tenant("k8s-claim-" + uid2).is_null());
}

// The driver keeps this node's allocated claims from a watch and prepares them without asking the
// API server; it asks for a claim it does not keep, or keeps reserved for no pod.
TEST_F(DraTest, PreparesTheClaimsItWatchesWithoutAskingTheApiServer) {
  StartNode(2);
  PutClaim("kept", "c1a1c1a1-0000-4000-8000-000000000011", "gpu-0", {{"memory", "1Gi"}});
  PutClaim("elsewhere", "c1a1c1a1-0000-4000-8000-000000000012", "gpu-0", nullptr, nullptr,
           "gpu.gpumux.io", "node-b");
  PutClaim("nvidia", "c1a1c1a1-0000-4000-8000-000000000013", "gpu-0", nullptr, nullptr,
           "gpu.nvidia.com");
  PutClaim("between", "c1a1c1a1-0000-4000-8000-000000000014", "gpu-1", {{"memory", "1Gi"}}, nullptr,
           "gpu.gpumux.io", "node-a", /*reserved=*/false);
  k8s::DraDriver driver({.agent_socket = socket_,
                         .node_name = "node-a",
                         .apiserver = api_->address(),
                         .cdi_dir = (dir_ / "cdi").string()});
  std::atomic<bool> stop{false};
  std::thread watch([&] { driver.WatchClaims(stop); });
  auto kept = [&](size_t n) {
    for (int i = 0; i < 250 && driver.claims_kept() != n; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return driver.claims_kept();
  };
  EXPECT_EQ(kept(2), 2u) << "this node's two gpumux claims, not another node's or driver's";

  ASSERT_EQ(driver.Prepare("default", "c1a1c1a1-0000-4000-8000-000000000011", "kept").size(), 1u);
  EXPECT_EQ(api_->claim_gets(), 0) << "prepared from the watch";
  EXPECT_EQ(Tenant("k8s-claim-c1a1c1a1-0000-4000-8000-000000000011")["quota_bytes"], kGiB);
  ASSERT_EQ(driver.Prepare("default", "c1a1c1a1-0000-4000-8000-000000000014", "between").size(),
            1u);
  EXPECT_EQ(api_->claim_gets(), 1) << "a claim reserved for no pod is read afresh";
  // A claim the watch has not brought yet is read from the API server.
  PutClaim("new", "c1a1c1a1-0000-4000-8000-000000000015", "gpu-1", {{"memory", "2Gi"}});
  ASSERT_EQ(driver.Prepare("default", "c1a1c1a1-0000-4000-8000-000000000015", "new").size(), 1u);
  EXPECT_LE(api_->claim_gets(), 2);
  EXPECT_EQ(Tenant("k8s-claim-c1a1c1a1-0000-4000-8000-000000000015")["quota_bytes"], 2 * kGiB);
  // A claim replaced under the same name is refused by its new UID, kept copy or not.
  EXPECT_THROW(driver.Prepare("default", "c1a1c1a1-0000-4000-8000-0000000000ff", "kept"), Error);

  // Unprepared, its kept copy is forgotten: the claim may be allocated again.
  EXPECT_EQ(kept(3), 3u);
  driver.Unprepare("c1a1c1a1-0000-4000-8000-000000000011");
  EXPECT_EQ(driver.claims_kept(), 2u);
  int gets = api_->claim_gets();
  ASSERT_EQ(driver.Prepare("default", "c1a1c1a1-0000-4000-8000-000000000011", "kept").size(), 1u);
  EXPECT_EQ(api_->claim_gets(), gets + 1);
  // Moved to another node, it leaves the kept set.
  PutClaim("new", "c1a1c1a1-0000-4000-8000-000000000015", "gpu-1", nullptr, nullptr,
           "gpu.gpumux.io", "node-b");
  EXPECT_EQ(kept(1), 1u);
  stop = true;
  watch.join();
}

// A claim allocated two whole GPUs (a tensor-parallel pod): one tenant over both, one CDI device
// that mounts both GPUs' ledgers and states, the same quota on each.
// A claim reserved for one pod and silent on its owner is owned by the user its pod's container
// runs as (not root, which would refuse a non-root container every byte); a claim that several
// pods share, bound to no pod's cgroup, stays root's unless its config names a uid; a config's uid
// is kept as given.
TEST_F(DraTest, AClaimOfOnePodIsOwnedByTheUserItsContainerRunsAs) {
  ASSERT_NO_FATAL_FAILURE(StartDra(1));
  OpenToEveryone();
  const uid_t nobody = 65534;
  std::string uid = "c1a1c1a1-0000-4000-8000-000000000021";
  PutClaim("serve", uid, "gpu-0", {{"memory", "3Gi"}});
  ASSERT_EQ(Prepare("serve", uid).error(), "");
  EXPECT_EQ(Tenant("k8s-claim-" + uid)["owner_uid"], "learn");
  EXPECT_EQ(FillAsCdi(Cdi(uid), "d0d0d0d0-0000-4000-8000-000000000022", nobody), 0u)
      << "another pod's process";
  EXPECT_EQ(FillAsCdi(Cdi(uid), kPodUid, nobody), 3 * kGiB);
  EXPECT_EQ(Tenant("k8s-claim-" + uid)["owner_uid"], nobody);
  EXPECT_EQ(FillAsCdi(Cdi(uid)), 0u) << "root in the pod is not its container's user";

  std::string shared = "c1a1c1a1-0000-4000-8000-000000000023";
  PutClaim("shared", shared, "gpu-0", {{"memory", "1Gi"}}, nullptr, "gpu.gpumux.io", "node-a",
           /*reserved=*/false);
  ASSERT_EQ(Prepare("shared", shared).error(), "");
  EXPECT_EQ(Tenant("k8s-claim-" + shared)["owner_uid"], 0);
  std::string given = "c1a1c1a1-0000-4000-8000-000000000024";
  PutClaim("given", given, "gpu-0", {{"memory", "1Gi"}, {"owner_uid", 1000}});
  ASSERT_EQ(Prepare("given", given).error(), "");
  EXPECT_EQ(Tenant("k8s-claim-" + given)["owner_uid"], 1000);
  EXPECT_EQ(FillAsCdi(Cdi(given), kPodUid, nobody), 0u) << "not uid 1000";
}

// gpumuxd in a container's cgroup namespace of its own (as a pod's containers run, privileged or
// not) reads other pods' groups as paths above its own ("/../pod<UID>"), which it cannot check; it
// joins the node's cgroup namespace at start and knows a pod's processes as before.
TEST_F(DraTest, GpumuxdInACgroupNamespaceOfItsOwnStillKnowsAPodsProcesses) {
  const std::string own = (cgroups_ / "gpumuxd").string();
  std::filesystem::create_directories(own);
  launcher_ = {"/bin/sh", "-c",
               "echo $$ > " + own + "/cgroup.procs && exec /usr/bin/unshare --cgroup \"$@\"", "sh"};
  // The node's namespace: the test's (this sandbox's process 1 may be unreadable even to root).
  agent_args_ = {"--cgroup-namespace", "/proc/" + std::to_string(getpid()) + "/ns/cgroup"};
  ASSERT_NO_FATAL_FAILURE(StartDra(1));
  std::string uid = "c1a1c1a1-0000-4000-8000-000000000031";
  PutClaim("serve", uid, "gpu-0", {{"memory", "2Gi"}});
  ASSERT_EQ(Prepare("serve", uid).error(), "");
  EXPECT_EQ(FillAsCdi(Cdi(uid)), 2 * kGiB) << Shell("cat " + (dir_ / "agent.log").string()).out;
}

TEST_F(DraTest, AClaimOfTwoGpusIsOneTenantOverBoth) {
  ASSERT_NO_FATAL_FAILURE(StartDra(2));
  std::string uid = "c1a1c1a1-0000-4000-8000-000000000021";
  // Written unreserved, then allocated both GPUs and reserved in one write, as a scheduler does:
  // the driver's cache never holds a reserved version with one GPU (rewritten after reservation,
  // a Prepare that read the cache first saw one device: a race no API server allows).
  PutClaim("tp", uid, "gpu-0", {{"memory", "2Gi"}}, nullptr, "gpu.gpumux.io", "node-a",
           /*reserved=*/false);
  json claim = api_->Claim("default", "tp");
  json second = claim["status"]["allocation"]["devices"]["results"][0];
  second["device"] = "gpu-1";
  second["request"] = "gpu-b";
  claim["status"]["allocation"]["devices"]["results"].push_back(second);
  claim["status"]["allocation"]["devices"]["config"][0]["requests"] = {"gpu", "gpu-b"};
  claim["status"]["reservedFor"] = ReservedFor("tp");
  api_->PutClaim(claim);
  auto prepared = Prepare("tp", uid);
  ASSERT_EQ(prepared.error(), "") << Log();
  ASSERT_EQ(prepared.devices_size(), 2);
  EXPECT_EQ(prepared.devices(1).device_name(), "gpu-1");
  EXPECT_EQ(prepared.devices(1).cdi_device_ids(0), "gpumux.io/tenant=" + uid)
      << "one CDI device starts the container as the tenant of both";
  json tenant = Tenant("k8s-claim-" + uid);
  EXPECT_EQ(tenant["gpus"], json::array({0, 1}));
  EXPECT_EQ(tenant["quota_bytes"].get<uint64_t>(), 2 * kGiB);
  std::string mounts = Cdi(uid)["devices"][0]["containerEdits"]["mounts"].dump();
  EXPECT_NE(mounts.find("gpu0.ledger"), std::string::npos) << mounts;
  EXPECT_NE(mounts.find("gpu1.ledger"), std::string::npos) << mounts;
  EXPECT_EQ(Unprepare(uid), "");
  EXPECT_TRUE(Tenant("k8s-claim-" + uid).is_null());
}

// A claim of two MIG instances, each allocated a different share of its memory: one tenant over
// both, held to what it consumed of each.
TEST_F(DraTest, AClaimOfTwoMigInstancesHoldsWhatItConsumedOfEach) {
  ASSERT_NO_FATAL_FAILURE(StartDra(1));
  Call("PUT", "/v1/gpus/0", {{"mode", "mig"}, {"layout", {"3g.40gb", "3g.40gb"}}}, 200);
  std::string uid = "c1a1c1a1-0000-4000-8000-000000000022";
  // Written unreserved, then given both instances and reserved in one write (as in
  // AClaimOfTwoGpusIsOneTenantOverBoth: a reserved version with one instance would let a Prepare
  // that read the driver's cache first see one device).
  PutClaim("mig-tp", uid, "gpu-0-mig-0", nullptr, {{"memory", "1Gi"}}, "gpu.gpumux.io", "node-a",
           /*reserved=*/false);
  json claim = api_->Claim("default", "mig-tp");
  json second = claim["status"]["allocation"]["devices"]["results"][0];
  second["device"] = "gpu-0-mig-1";
  second["request"] = "gpu-b";
  second["consumedCapacity"]["memory"] = "2Gi";
  claim["status"]["allocation"]["devices"]["results"].push_back(second);
  claim["status"]["reservedFor"] = ReservedFor("mig-tp");
  api_->PutClaim(claim);
  auto prepared = Prepare("mig-tp", uid);
  ASSERT_EQ(prepared.error(), "") << Log();
  json tenant = Tenant("k8s-claim-" + uid);
  EXPECT_EQ(tenant["quota_bytes"].get<uint64_t>(), kGiB) << tenant;
  std::map<std::string, std::string> envs;
  json spec = Cdi(uid);
  for (const json& kv : spec["devices"][0]["containerEdits"]["env"]) {
    std::string text = kv;
    envs[text.substr(0, text.find('='))] = text.substr(text.find('=') + 1);
  }
  json fill = RunInPod(envs, kPodUid,
                       std::string(GPUMUX_LLM_CLIENT) + " fill-each " + std::to_string(64 * kMiB));
  EXPECT_EQ(fill["allocated"], json::array({kGiB, 2 * kGiB})) << fill;
  EXPECT_EQ(Unprepare(uid), "");
}

TEST_F(DraTest, AMigInstanceIsADeviceOfItsOwnAndALostGpuLeavesTheSlice) {
  ASSERT_NO_FATAL_FAILURE(StartDra(2));
  Call("PUT", "/v1/gpus/0", {{"mode", "mig"}, {"layout", {"3g.40gb", "3g.40gb"}}}, 200);
  EXPECT_EQ(SliceDevices({"gpu-0-mig-0", "gpu-0-mig-1", "gpu-1"}),
            (std::set<std::string>{"gpu-0-mig-0", "gpu-0-mig-1", "gpu-1"}))
      << Log();
  json mig = Slice()["spec"]["devices"][1];
  EXPECT_EQ(mig["attributes"]["mode"]["string"], "mig");
  EXPECT_EQ(mig["attributes"]["profile"]["string"], "3g.40gb");
  EXPECT_FALSE(mig["capacity"].contains("compute")) << "an instance's slices are its compute";
  std::string uid = "c1a1c1a1-0000-4000-8000-000000000005";
  PutClaim("mig", uid, "gpu-0-mig-1", {{"memory", "2Gi"}});
  ASSERT_EQ(Prepare("mig", uid).error(), "");
  json tenant = Tenant("k8s-claim-" + uid);
  EXPECT_EQ(tenant["gpu"], 0);
  EXPECT_EQ(tenant["instance"], 1);
  EXPECT_EQ(FillAsCdi(Cdi(uid)), 2 * kGiB);
  // GPU 1 is lost: it is offered to no new claim.
  std::ofstream((dir_ / "run" / "sim-gpu1.state.lost").string()) << "Xid 79\n";
  EXPECT_EQ(SliceDevices({"gpu-0-mig-0", "gpu-0-mig-1"}),
            (std::set<std::string>{"gpu-0-mig-0", "gpu-0-mig-1"}));
}

// Dynamic MIG (issue 45): with --dynamic-mig a GPU in MIG mode is advertised as what it could still
// make, as partitionable devices. A 3g.40gb whose tenant the scheduler does not know of is not
// offered, nor anything overlapping it, and its compute is off the counter set. A claim allocated
// a 1g.10gb placement (as kube-scheduler's allocator would pick it: the pool complete, its counters
// left) gets the instance made when it is prepared and runs under its quota there; the scheduler
// then counts it. Unprepared and idle past the grace period, the instance is removed; the busy
// 3g.40gb never moves.
TEST_F(DraTest, AClaimOfAMigProfileNoInstanceOffersGetsOneMadeThatIsRemovedOnceIdle) {
  StartNode(1);
  Call("PUT", "/v1/gpus/0", {{"mode", "mig"}, {"layout", {"3g.40gb@0"}}}, 200);
  Call("POST", "/v1/tenants", {{"id", "busy"}, {"gpu", 0}, {"instance", 0}, {"memory", "4GiB"}},
       201);
  StartProgram(GPUMUX_K8S_DRA_DRIVER,
               {"--cdi-dir", (dir_ / "cdi").string(), "--plugin-dir",
                (sockets_ / "plugins").string(), "--registry-dir", (sockets_ / "registry").string(),
                "--dynamic-mig", "--mig-idle-grace", "1"});
  for (int i = 0; i < 250 && Pool().size() != 3; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::vector<json> pool = Pool();
  ASSERT_EQ(pool.size(), 3u) << "its devices, its counter sets, GPU 0's placements: " << Log();
  std::set<std::string> offered;
  json counters;
  for (const json& slice : pool) {
    for (const json& d : slice["spec"].value("devices", json::array())) offered.insert(d["name"]);
    if (slice["spec"].contains("sharedCounters"))
      counters = slice["spec"]["sharedCounters"][0]["counters"];
  }
  EXPECT_TRUE(offered.count("gpu-0-mig-1g-10gb-at-4")) << json(offered);
  EXPECT_TRUE(offered.count("gpu-0-mig-3g-40gb-at-4")) << json(offered);
  EXPECT_FALSE(offered.count("gpu-0-mig-3g-40gb-at-0")) << "the busy instance is not offered";
  EXPECT_FALSE(offered.count("gpu-0-mig-1g-10gb-at-2")) << "nor what overlaps it";
  EXPECT_FALSE(offered.count("gpu-0-mig-7g-80gb-at-0"));
  EXPECT_FALSE(offered.count("gpu-0")) << "the GPU itself is its instances";
  EXPECT_EQ(counters["compute-slices"]["value"], "4") << counters;
  EXPECT_EQ(counters["memory-slice-0"]["value"], "0") << counters;
  EXPECT_EQ(counters["memory-slice-4"]["value"], "1") << counters;

  std::string device = SchedulerPicks("1g.10gb", {});
  ASSERT_EQ(device.rfind("gpu-0-mig-1g-10gb-at-", 0), 0u) << device;
  std::string uid = "c1a1c1a1-0000-4000-8000-000000000031";
  PutClaim("small", uid, device, {{"memory", "6Gi"}});
  auto prepared = Prepare("small", uid);
  ASSERT_EQ(prepared.error(), "") << Log();
  json gpu = Call("GET", "/v1/gpus", json(), 200)["gpus"][0];
  ASSERT_EQ(gpu["instances"].size(), 2u) << gpu;
  EXPECT_EQ(gpu["instances"][0]["profile"], "3g.40gb");
  EXPECT_EQ(gpu["instances"][0]["start"], 0) << "the busy instance stays where it is";
  json made = gpu["instances"][1];
  EXPECT_EQ(made["profile"], "1g.10gb");
  EXPECT_EQ(device, "gpu-0-mig-1g-10gb-at-" + std::to_string(made["start"].get<int>()));
  json tenant = Tenant("k8s-claim-" + uid);
  EXPECT_EQ(tenant["instance"], 1) << tenant;
  EXPECT_EQ(tenant["quota_bytes"].get<uint64_t>(), 6 * kGiB);
  EXPECT_EQ(FillAsCdi(Cdi(uid)), 6 * kGiB)
      << "the program runs under its quota on the new instance";
  // The scheduler counts the claim's device: the next 1g.10gb is another placement.
  std::string next = SchedulerPicks("1g.10gb", {device});
  EXPECT_FALSE(next.empty());
  EXPECT_NE(next, device);
  // Held by its claim past the grace period, it stays.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(Call("GET", "/v1/gpus", json(), 200)["gpus"][0]["instances"].size(), 2u);

  EXPECT_EQ(Unprepare(uid), "");
  json after;
  for (int i = 0; i < 250; ++i) {
    after = Call("GET", "/v1/gpus", json(), 200)["gpus"][0];
    if (after["instances"].size() == 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(after["layout"], json({"3g.40gb@0"})) << "the idle instance removed: " << Log();
  EXPECT_FALSE(Tenant("busy").is_null());
  // Prepared again (allocated the same placement), the instance is made again.
  PutClaim("small", uid, device, {{"memory", "6Gi"}});
  ASSERT_EQ(Prepare("small", uid).error(), "") << Log();
  EXPECT_EQ(Call("GET", "/v1/gpus", json(), 200)["gpus"][0]["instances"].size(), 2u);
  EXPECT_EQ(Unprepare(uid), "");
}

// Dynamic MIG removes only the instances it made: an idle 1g.10gb an operator made is offered as it
// is but nothing that would replace it, and stays past the grace period; one the driver made for a
// claim is removed once idle, even by a driver killed and
// started again in between (it keeps a record under its plugin directory). A record that is not
// one is set aside, and what the driver cannot show it made it leaves.
TEST_F(DraTest, DynamicMigRemovesOnlyTheInstancesItMadeEvenAcrossARestart) {
  StartNode(1);
  Call("PUT", "/v1/gpus/0", {{"mode", "mig"}, {"layout", {"1g.10gb@6"}}}, 200);
  const std::filesystem::path plugins = sockets_ / "plugins";
  auto start_driver = [&] {
    std::filesystem::remove(plugins / "dra.sock");
    StartProgram(
        GPUMUX_K8S_DRA_DRIVER,
        {"--cdi-dir", (dir_ / "cdi").string(), "--plugin-dir", plugins.string(), "--registry-dir",
         (sockets_ / "registry").string(), "--dynamic-mig", "--mig-idle-grace", "1"});
    for (int i = 0; i < 250 && !std::filesystem::exists(plugins / "dra.sock"); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_TRUE(std::filesystem::exists(plugins / "dra.sock")) << Log();
  };
  auto instances = [&] {
    std::set<std::string> placed;
    json gpus = Call("GET", "/v1/gpus", json(), 200);
    for (const json& i : gpus["gpus"][0]["instances"])
      placed.insert(i["profile"].get<std::string>() + "@" + std::to_string(i["start"].get<int>()));
    return placed;
  };
  auto instances_after = [&](size_t count) {  // within 5 s
    for (int i = 0; i < 250 && instances().size() != count; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return instances();
  };
  ASSERT_NO_FATAL_FAILURE(start_driver());
  for (int i = 0; i < 250 && Pool().size() != 3; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::set<std::string> offered;
  for (const json& slice : Pool())
    for (const json& d : slice["spec"].value("devices", json::array())) offered.insert(d["name"]);
  EXPECT_TRUE(offered.count("gpu-0-mig-1g-10gb-at-6")) << "the operator's, to claim as it is";
  EXPECT_FALSE(offered.count("gpu-0-mig-1g-20gb-at-6")) << "not to replace: " << json(offered);
  EXPECT_TRUE(offered.count("gpu-0-mig-1g-10gb-at-4")) << json(offered);
  const std::string uid = "c1a1c1a1-0000-4000-8000-000000000032";
  PutClaim("small", uid, "gpu-0-mig-1g-10gb-at-4", {{"memory", "2Gi"}});
  ASSERT_EQ(Prepare("small", uid).error(), "") << Log();
  EXPECT_EQ(instances(), (std::set<std::string>{"1g.10gb@4", "1g.10gb@6"}));
  StopProgram(SIGKILL);
  ASSERT_NO_FATAL_FAILURE(start_driver());
  EXPECT_EQ(Unprepare(uid), "");
  EXPECT_EQ(instances_after(1), std::set<std::string>{"1g.10gb@6"})
      << "the instance made for the claim is removed, the operator's stays: " << Log();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(instances(), std::set<std::string>{"1g.10gb@6"}) << "idle past the grace: still there";

  // Made again, then its record is damaged while the driver is down: the instance stays.
  PutClaim("small", uid, "gpu-0-mig-1g-10gb-at-4", {{"memory", "2Gi"}});
  ASSERT_EQ(Prepare("small", uid).error(), "") << Log();
  StopProgram(SIGKILL);
  std::ofstream(plugins / "mig-instances-made.json") << "{\"made\": [4";
  ASSERT_NO_FATAL_FAILURE(start_driver());
  EXPECT_EQ(Unprepare(uid), "");
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  EXPECT_EQ(instances(), (std::set<std::string>{"1g.10gb@4", "1g.10gb@6"}))
      << "nothing removed that the driver cannot show it made: " << Log();
  EXPECT_TRUE(std::filesystem::exists(plugins / "mig-instances-made.json.bad"));
  EXPECT_NE(Log().find("set aside"), std::string::npos) << Log();
}

// The manifests in deploy/kubernetes/ run the image's programs with these command lines; each
// option they pass, and each subcommand, is one the built program takes.
TEST(KubernetesManifests, TheManifestsCommandLinesAreOnesTheProgramsTake) {
  std::map<std::string, std::string> programs = {
      {"/usr/bin/gpumux", GPUMUX_BINARY},
      {"/usr/bin/gpumuxd", GPUMUXD_BINARY},
      {"/usr/bin/gpumux-k8s-device-plugin", GPUMUX_K8S_DEVICE_PLUGIN},
      {"/usr/bin/gpumux-k8s-scheduler", GPUMUX_K8S_SCHEDULER},
      {"/usr/bin/gpumux-k8s-dra-driver", GPUMUX_K8S_DRA_DRIVER}};
  int checked = 0;
  for (const char* file : {"node-daemonset.yaml", "scheduler.yaml", "dra/dra-daemonset.yaml"}) {
    for (const YAML::Node& doc :
         YAML::LoadAllFromFile(std::string(GPUMUX_SOURCE_DIR) + "/deploy/kubernetes/" + file)) {
      if (!doc["spec"] || !doc["spec"]["template"]) continue;
      for (const char* list : {"initContainers", "containers"}) {
        for (const YAML::Node& c : doc["spec"]["template"]["spec"][list]) {
          if (c["image"].as<std::string>() != "gpumux") continue;  // kube-scheduler's own
          auto command = c["command"].as<std::vector<std::string>>();
          ASSERT_TRUE(programs.count(command[0])) << file << ": runs " << command[0];
          std::string program = programs[command[0]];
          size_t args = 1;
          if (command.size() > 1 && command[1].rfind("--", 0) != 0)  // `gpumux SUBCOMMAND`
            program += " " + command[1], args = 3;
          auto [code, help] = NodeTest::Sh(program + " --help");
          ASSERT_EQ(code, 0) << file << ": " << program << " --help: " << help;
          for (size_t i = args; i < command.size(); ++i) {
            if (command[i].rfind("--", 0) != 0) continue;
            EXPECT_NE(help.find(command[i] + " "), std::string::npos)
                << file << ": " << program << " takes no " << command[i];
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GE(checked, 20);
}

// `kubectl kustomize` (the kustomize built into kubectl) renders both ways of running gpumux — the
// device plugin's (deploy/kubernetes) and DRA's (deploy/kubernetes/dra) — with the project's image
// and version, and with the knobs changed as `kustomize edit set image` / `set namespace` change
// them: every gpumux container runs that image, nothing runs a program of the node or mounts its
// root, every object moves to the namespace (but the kube-system binding kube-scheduler needs),
// and the admission policy follows the extender's service account there.
class KustomizeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto [code, version] = NodeTest::Sh("kubectl version --client 2>&1");
    if (code != 0) GTEST_SKIP() << "kubectl is missing: the kustomizations are not rendered";
    size_t at = version.find("Kustomize Version: v");
    int major = at == std::string::npos ? 0 : std::atoi(version.c_str() + at + 20);
    if (major < 4)
      GTEST_SKIP() << "kubectl's kustomize is older than v4 (kubectl 1.21): " << version;
    dir_ = std::filesystem::path(GPUMUX_BUILD_DIR) / ("kustomize-" + std::to_string(getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::copy(std::string(GPUMUX_SOURCE_DIR) + "/deploy/kubernetes", dir_,
                          std::filesystem::copy_options::recursive);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // The rendered objects of the kustomization in `sub` (of the copy).
  std::vector<YAML::Node> Render(const std::string& sub) {
    auto [code, out] = NodeTest::Sh("kubectl kustomize " + (dir_ / sub).string() + " 2>&1");
    EXPECT_EQ(code, 0) << out;
    std::vector<YAML::Node> objects = YAML::LoadAll(out);
    EXPECT_GE(objects.size(), 5u) << out;
    return objects;
  }

  // Sets the knobs in the copy's kustomizations, as `kustomize edit set` would.
  void SetKnobs(const std::string& ns, const std::string& image, const std::string& tag) {
    for (const char* sub : {"kustomization.yaml", "dra/kustomization.yaml"}) {
      std::string path = (dir_ / sub).string(), text = ReadFile(path);
      for (auto [from, to] : std::vector<std::pair<std::string, std::string>>{
               {"namespace: gpumux-system", "namespace: " + ns},
               {"newName: localhost/gpumux", "newName: " + image},
               {std::string("newTag: \"") + GPUMUX_VERSION + "\"", "newTag: \"" + tag + "\""}}) {
        size_t at = text.find(from);
        ASSERT_NE(at, std::string::npos) << sub << " has no " << from;
        text.replace(at, from.size(), to);
      }
      std::ofstream(path) << text;
    }
  }

  static std::string ReadFile(const std::string& path) {
    std::ifstream in(path);
    return {std::istreambuf_iterator<char>(in), {}};
  }

  // Checks `objects` rendered with namespace `ns` and image `image`.
  static void ExpectRendered(const std::vector<YAML::Node>& objects, const std::string& ns,
                             const std::string& image, const std::string& where) {
    // Cluster-scoped; kustomize 5.5 gives the last three a namespace all the same
    // (kubernetes-sigs/kustomize#6051), which the API server drops for cluster-scoped objects.
    const std::set<std::string> cluster_scoped = {"Namespace",
                                                  "ClusterRole",
                                                  "ClusterRoleBinding",
                                                  "ValidatingAdmissionPolicy",
                                                  "ValidatingAdmissionPolicyBinding",
                                                  "DeviceClass"};
    int namespaces = 0, gpumux_containers = 0, dashboards = 0;
    for (const YAML::Node& o : objects) {
      std::string kind = o["kind"].as<std::string>(),
                  name = o["metadata"]["name"].as<std::string>();
      std::string what = where + ": " + kind + " " + name;
      if (kind == "Namespace") {
        ++namespaces;
        EXPECT_EQ(name, ns) << what;
      }
      if (!cluster_scoped.count(kind)) {
        std::string expected = name == "gpumux-scheduler-extension-apiserver" ? "kube-system" : ns;
        EXPECT_EQ(o["metadata"]["namespace"].as<std::string>(""), expected) << what;
      }
      for (const YAML::Node& subject : o["subjects"])
        if (subject["kind"].as<std::string>() == "ServiceAccount")
          EXPECT_EQ(subject["namespace"].as<std::string>(), ns) << what;
      if (kind == "ValidatingAdmissionPolicy")
        EXPECT_EQ(o["spec"]["variables"][0]["expression"].as<std::string>(),
                  "'system:serviceaccount:" + ns + ":gpumux-scheduler'")
            << what;
      if (kind == "ConfigMap" && name == "gpumux-grafana-dashboard") {
        ++dashboards;
        EXPECT_EQ(o["metadata"]["labels"]["grafana_dashboard"].as<std::string>(""), "1");
        EXPECT_NO_THROW(
            (void)nlohmann::json::parse(o["data"]["gpumux-pods.json"].as<std::string>()));
      }
      if (!o["spec"] || !o["spec"]["template"]) continue;
      const YAML::Node& spec = o["spec"]["template"]["spec"];
      for (const char* list : {"initContainers", "containers"}) {
        for (const YAML::Node& c : spec[list]) {
          std::string container = what + " " + c["name"].as<std::string>();
          std::string command = YAML::Dump(c["command"]);
          EXPECT_EQ(command.find("/host"), std::string::npos) << container << ": " << command;
          if (c["name"].as<std::string>() == "kube-scheduler") continue;
          ++gpumux_containers;
          EXPECT_EQ(c["image"].as<std::string>(), image) << container;
        }
      }
      for (const YAML::Node& v : spec["volumes"])
        if (v["hostPath"]) EXPECT_NE(v["hostPath"]["path"].as<std::string>(), "/") << what;
    }
    EXPECT_EQ(namespaces, 1) << where;
    EXPECT_EQ(dashboards, 1) << where;
    EXPECT_GE(gpumux_containers, 3) << where;
  }

  std::filesystem::path dir_;
};

TEST_F(KustomizeTest, BothWaysRenderWithTheProjectsImageAndNothingFromTheNode) {
  std::string image = std::string("localhost/gpumux:") + GPUMUX_VERSION;
  ExpectRendered(Render("."), "gpumux-system", image, "deploy/kubernetes");
  ExpectRendered(Render("dra"), "gpumux-system", image, "deploy/kubernetes/dra");
}

TEST_F(KustomizeTest, TheImageItsTagAndTheNamespaceAreKnobs) {
  SetKnobs("team-gpu", "registry.example.com/ml/gpumux", "9.9.9");
  std::string image = "registry.example.com/ml/gpumux:9.9.9";
  ExpectRendered(Render("."), "team-gpu", image, "deploy/kubernetes");
  ExpectRendered(Render("dra"), "team-gpu", image, "deploy/kubernetes/dra");
}

}  // namespace
}  // namespace gpumux::testing
