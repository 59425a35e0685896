// The Kubernetes integration's two hot calls, each against its baseline in the same run:
//   Allocate: the device plugin's Allocate over gRPC (find the pod through the API server, admit
//     it in gpumuxd, answer the container's environment), p50 and p99 of 1,000, against gpumuxd's
//     POST /v1/tenants alone (the admission it wraps). The node holds 100 pods at a time (the
//     kubelet's default pod limit is 110), on gpumuxd with 16 simulated H100s.
//   Filter + prioritize of one pod over 1,000 nodes x 8 GPUs (kube-scheduler's ExtenderArgs with
//     NodeNames, parsed from JSON), against the same decision in `gpumux fleet simulate`: the
//     simulator's per-pod loop (Cluster::Fits and Policy::Score over every node) on the same
//     nodes.
//   The watched cluster: 5,000 nodes x 8 GPUs and 150,000 placed pods on a test API server. Time
//     to first sync (the paginated list, which every resync period cost before the informers) and
//     the heap it leaves, watch events per second (OnPod, as the informer delivers them; the ratio
//     of one list to the same pods as events), then filter + prioritize of one pod over all 5,000
//     nodes through Handle (bodies parsed, answers written), p50, p99 and slowest of 1,000, each
//     pod then placed and an old one gone (so every call finds the cluster changed), against
//     scoring every node anew (the baseline, what each prioritize did before scores were kept).
//     The same over 20,000 nodes and 600,000 pods.
// Run: ./build/release/bench/gpumux_kubernetes_bench
#include <benchmark/benchmark.h>
#include <malloc.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <random>
#include <thread>

#include "base/error.h"
#include "fleet/cluster.h"
#include "fleet/fragmentation.h"
#include "fleet/policy.h"
#include "integrations/kubernetes/device_plugin.h"
#include "integrations/kubernetes/device_plugin_server.h"
#include "integrations/kubernetes/extender.h"
#include "kubernetes_fixture.h"
#include "percentile.h"
#include "service/http_client.h"

namespace gpumux {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
using bench::Percentile;

void BM_Allocate(benchmark::State& state) {
  auto dir = std::filesystem::temp_directory_path() / ("gkb" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "kubelet");
  std::string socket = (dir / "agent.sock").string();
  pid_t agent = fork();
  if (agent == 0) {
    freopen("/dev/null", "w", stderr);
    std::string state_db = (dir / "state.db").string(), run = (dir / "run").string();
    execl(GPUMUXD_BINARY, "gpumuxd", "--sim", "H100", "--gpus", "16", "--socket", socket.c_str(),
          "--state", state_db.c_str(), "--runtime-dir", run.c_str(), nullptr);
    _exit(127);
  }
  for (int i = 0; i < 200; ++i) {
    try {
      if (service::CallUnix(socket, "GET", "/v1/health").first == 200) break;
    } catch (const Error&) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::vector<double> allocate_us, admit_us;
  {
    testing::FakeApiServer api((dir / "api.sock").string());
    api.AddNode("node-a");
    testing::FakeKubelet kubelet(dir / "kubelet");
    kubelet.Start();
    k8s::DevicePlugin plugin(
        {socket, (dir / "kubelet").string(), "node-a", api.address(), (dir / "state").string()});
    plugin.Refresh();
    k8s::DevicePluginServer server(&plugin);
    server.Start();
    auto stub = kubelet.Plugin(k8s::kMemoryResource);
    int pod_number = 0;
    for (auto _ : state) {
      for (int round = 0; round < 10; ++round) {
        std::vector<std::string> names;
        for (int i = 0; i < 100; ++i, ++pod_number) {
          char uid[40];
          std::snprintf(uid, sizeof(uid), "00000000-0000-4000-8000-%012d", pod_number);
          json pod = testing::PendingPod("p" + std::to_string(pod_number), uid,
                                         {{{k8s::kMemoryResource, 1}}});
          pod["spec"]["nodeName"] = "node-a";
          pod["metadata"]["annotations"][k8s::kAssignedAnnotation] = std::to_string(i % 16);
          api.AddPod(pod);
          names.push_back("p" + std::to_string(pod_number));
        }
        for (int i = 0; i < 100; ++i) {
          ::v1beta1::AllocateRequest request;
          request.add_container_requests()->add_devices_ids("gpu" + std::to_string(i % 16) +
                                                            "-gib" + std::to_string(i / 16));
          ::v1beta1::AllocateResponse response;
          grpc::ClientContext context;
          auto t0 = Clock::now();
          grpc::Status status = stub->Allocate(&context, request, &response);
          allocate_us.push_back(
              std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
          if (!status.ok()) state.SkipWithError(status.error_message().c_str());
        }
        // The baseline: the admission alone, straight to gpumuxd.
        for (int i = 0; i < 100; ++i) {
          json admit = {{"id", "baseline-" + std::to_string(i)},
                        {"gpu", i % 16},
                        {"memory", "1GiB"},
                        {"owner_uid", 0}};
          auto t0 = Clock::now();
          service::CallUnix(socket, "POST", "/v1/tenants", admit.dump());
          admit_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
        }
        for (int i = 0; i < 100; ++i)
          service::CallUnix(socket, "DELETE", "/v1/tenants/baseline-" + std::to_string(i));
        for (const auto& name : names) api.DeletePod(name);
        plugin.RemoveTenantsOfGonePods();
      }
    }
    server.Stop();
  }
  kill(agent, SIGTERM);
  waitpid(agent, nullptr, 0);
  std::filesystem::remove_all(dir);
  state.counters["allocates"] = double(allocate_us.size());
  state.counters["allocate_p50_us"] = Percentile(allocate_us, 0.5);
  state.counters["allocate_p99_us"] = Percentile(allocate_us, 0.99);
  state.counters["admit_p50_us"] = Percentile(admit_us, 0.5);
  state.counters["admit_p99_us"] = Percentile(admit_us, 0.99);
  state.counters["p50_ratio"] = Percentile(allocate_us, 0.5) / Percentile(admit_us, 0.5);
}
BENCHMARK(BM_Allocate)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();

// 1,000 nodes of 8 x 80 GiB GPUs, used at random by earlier pods (same seed for both sides).
struct Fleet {
  k8s::Extender extender{{}, nullptr};
  std::vector<k8s::NodeGpus> nodes;
  json args;
  Fleet() {
    std::mt19937 rng(7);
    json names = json::array();
    for (int n = 0; n < 1000; ++n) {
      std::vector<k8s::Slot> slots;
      for (int g = 0; g < 8; ++g) {
        k8s::Slot s{{g, -1}, 80};
        int pods = int(rng() % 3);
        for (int p = 0; p < pods; ++p) {
          k8s::PodRequest r;
          r.containers.push_back({"c", 0, int(4 + rng() % 20), 0, 0, -1});
          s.Count(r, +1);
        }
        slots.push_back(s);
      }
      nodes.emplace_back(slots);
      std::string name = "node-" + std::to_string(n);
      extender.SetNode(name, nodes.back());
      names.push_back(name);
    }
    json pod = testing::PendingPod("p", "11111111-0000-4000-8000-000000000000",
                                   {{{k8s::kMemoryResource, 20}, {k8s::kComputeResource, 25}}});
    args = {{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", names}};
  }
};

void BM_ExtenderFilterAndPrioritize(benchmark::State& state) {
  static Fleet fleet;
  std::string body = fleet.args.dump();
  for (auto _ : state) {
    k8s::ExtenderArgs args = k8s::ExtenderArgs::Parse(body);
    args.node_names = fleet.extender.Filter(args).node_names;
    benchmark::DoNotOptimize(fleet.extender.Prioritize(std::move(args)));
  }
}
BENCHMARK(BM_ExtenderFilterAndPrioritize)->Unit(benchmark::kMillisecond);

void BM_SimulatorPlacesOnePod(benchmark::State& state) {
  static Fleet fleet;
  std::vector<fleet::NodeSpec> specs(1000, {"", 1ll << 40, 1ll << 40, 8, "gpumux"});
  fleet::Cluster cluster(specs);
  for (int n = 0; n < 1000; ++n)
    for (int g = 0; g < 8; ++g)
      if (int used = fleet.nodes[n].slots()[g].used_memory_gib)
        cluster.Place(n, {0, 0, 1, std::min(999, used * 1000 / 80)}, g);
  std::vector<fleet::PodSpec> recent = {{"", 0, 0, 1, 250, {}}};
  auto targets = fleet::TargetWorkloads::FromPods(cluster, recent);
  auto policy = fleet::MakePolicy("gpumux", targets);
  fleet::Shape shape{0, 0, 1, 250};
  for (auto _ : state) {
    double best = -1e300;
    for (int n = 0; n < cluster.size(); ++n)
      if (cluster.Fits(n, shape)) best = std::max(best, policy->Score(cluster, n, shape).score);
    benchmark::DoNotOptimize(best);
  }
}
BENCHMARK(BM_SimulatorPlacesOnePod)->Unit(benchmark::kMillisecond);

// A watched cluster: `nodes` nodes of 8 x 80 GiB GPUs (their names, and the gpumux.io/gpus
// annotation they all carry), and 30 running pods of 1-4 GiB on each, placed at random (same seed
// for every run).
struct WatchedCluster {
  json names = json::array();
  std::string gpus;
  std::vector<json> pods;
  explicit WatchedCluster(int nodes) {
    for (int n = 0; n < nodes; ++n) names.push_back("node-" + std::to_string(n));
    std::vector<k8s::Slot> slots;
    for (int g = 0; g < 8; ++g) slots.push_back({{g, -1}, 80});
    gpus = k8s::NodeGpus(slots).Annotation();
    std::mt19937 rng(11);
    for (int i = 0; i < nodes * 30; ++i) {
      json pod = testing::PendingPod("p" + std::to_string(i),
                                     "00000000-0000-4000-8000-" + std::to_string(100000000000 + i),
                                     {{{k8s::kMemoryResource, int(1 + rng() % 4)}}});
      pod["metadata"]["annotations"][k8s::kAssignedAnnotation] = std::to_string(rng() % 8);
      pod["spec"]["nodeName"] = "node-" + std::to_string(i % nodes);
      pod["status"]["phase"] = "Running";
      pods.push_back(std::move(pod));
    }
  }
};

// As kube-scheduler calls the extender, `calls` times: POST filter with every node's name, then
// POST prioritize with the names that passed (each answer as text, parsing and writing included);
// then, as the watch would show it after the bind, the pod placed on the best node, and the
// oldest running pod gone, so that every call finds a changed node and the target workload moves.
// Sets the counters: p50, p99 and the slowest call, and the time to score every node anew (what
// each prioritize cost before the scores were kept: ChooseSlots over the same nodes), in the same
// run.
void MeasureFilterAndPrioritize(k8s::Extender& extender, const json& names,
                                const std::vector<json>& running, int calls,
                                benchmark::State& state) {
  std::vector<double> ms, filter_ms, prioritize_ms;
  for (int i = 0; i < calls; ++i) {
    json pod = testing::PendingPod("new" + std::to_string(i),
                                   "11111111-0000-4000-8000-" + std::to_string(100000000000 + i),
                                   {{{k8s::kMemoryResource, 20}, {k8s::kComputeResource, 25}}});
    std::string body = json{{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", names}}.dump();
    auto t = Clock::now();
    service::HttpResponse filtered = extender.Handle({"POST", "/scheduler/filter", body});
    filter_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t).count());
    json passed = json::parse(filtered.body)["NodeNames"];
    if (filtered.status != 200 || passed.size() != names.size())
      state.SkipWithError("filter refused nodes that have room");
    std::string next = json{{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", passed}}.dump();
    auto t2 = Clock::now();
    service::HttpResponse scores = extender.Handle({"POST", "/scheduler/prioritize", next});
    prioritize_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t2).count());
    ms.push_back(filter_ms.back() + prioritize_ms.back());
    json list = json::parse(scores.body);
    if (scores.status != 200 || list.size() != passed.size()) {
      state.SkipWithError("prioritize answered an error");
      return;
    }
    auto best = std::max_element(list.begin(), list.end(), [](const json& a, const json& b) {
      return a["Score"].get<int>() < b["Score"].get<int>();
    });
    std::string host = (*best)["Host"];
    k8s::NodeGpus node = extender.NodeState(host);
    k8s::PodRequest request = k8s::ParsePod(pod);
    for (const k8s::Slot& slot : node.slots()) {
      if (!slot.Fits(request)) continue;
      pod["metadata"]["annotations"][k8s::kAssignedAnnotation] = slot.id.ToString();
      break;
    }
    pod["spec"]["nodeName"] = host;
    pod["status"]["phase"] = "Running";
    extender.OnPod(pod);
    extender.OnPodGone(running[size_t(i)]);
  }
  // The baseline: every node scored anew, as each prioritize did before (no JSON).
  std::vector<k8s::NodeGpus> nodes;
  for (const json& name : names) nodes.push_back(extender.NodeState(name));
  std::vector<const k8s::NodeGpus*> pointers;
  for (const auto& n : nodes) pointers.push_back(&n);
  k8s::PodRequest request = k8s::ParsePod(
      testing::PendingPod("new", "11111111-0000-4000-8000-000000000000",
                          {{{k8s::kMemoryResource, 20}, {k8s::kComputeResource, 25}}}));
  std::vector<int> recent(1000, 13);
  std::vector<double> scan_ms;
  for (int i = 0; i < 20; ++i) {
    auto t = Clock::now();
    benchmark::DoNotOptimize(k8s::ChooseSlots(pointers, request, "gpumux", recent));
    scan_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t).count());
  }
  state.counters["filter_p50_ms"] = Percentile(filter_ms, 0.5);
  state.counters["prioritize_p50_ms"] = Percentile(prioritize_ms, 0.5);
  state.counters["filter_prioritize_p50_ms"] = Percentile(ms, 0.5);
  state.counters["filter_prioritize_p99_ms"] = Percentile(ms, 0.99);
  state.counters["filter_prioritize_max_ms"] = Percentile(ms, 1.0);
  state.counters["score_every_node_p50_ms"] = Percentile(scan_ms, 0.5);
}

void BM_ExtenderOverAWatchedClusterOf150000Pods(benchmark::State& state) {
  auto dir = std::filesystem::temp_directory_path() / ("gkw" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const WatchedCluster cluster(5000);
  const json& names = cluster.names;
  const std::vector<json>& pods = cluster.pods;
  for (auto _ : state) {
    // First sync: the extender lists the cluster through an API server (pages of 500, answers
    // chunked), as it starts. Before the informers, every resync period cost this list.
    auto api = std::make_unique<testing::FakeApiServer>((dir / "api.sock").string());
    for (const json& name : names) api->AddNode(name, {{k8s::kNodeGpusAnnotation, cluster.gpus}});
    for (const json& pod : pods) api->AddPod(pod);
    k8s::KubeApi kube(api->address());
    size_t heap_before = mallinfo2().uordblks;
    auto start = Clock::now();
    k8s::Extender extender({}, &kube);
    extender.Resync();
    double first_sync_s = std::chrono::duration<double>(Clock::now() - start).count();
    double model_mib = double(mallinfo2().uordblks - heap_before) / (1 << 20);
    api.reset();  // the cluster's objects are the API server's memory, not the extender's
    // Then each change arrives as a watch event: the same pods again, as MODIFIED events.
    start = Clock::now();
    for (const json& pod : pods) extender.OnPod(pod);
    double events_s = std::chrono::duration<double>(Clock::now() - start).count();
    MeasureFilterAndPrioritize(extender, names, pods, 1000, state);
    state.counters["first_sync_s"] = first_sync_s;
    state.counters["model_MiB"] = model_mib;
    state.counters["events_per_s"] = double(pods.size()) / events_s;
    // What a list per resync period costs against what the watch costs for the same changes.
    state.counters["list_vs_watch_ratio"] = first_sync_s / events_s;
  }
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_ExtenderOverAWatchedClusterOf150000Pods)->Iterations(1)->Unit(benchmark::kSecond);

// The same calls over 20,000 nodes (600,000 pods), the cluster learnt from watch events.
void BM_ExtenderOver20000Nodes(benchmark::State& state) {
  const WatchedCluster cluster(20000);
  for (auto _ : state) {
    k8s::Extender extender({}, nullptr);
    for (const json& name : cluster.names)
      extender.OnNode(
          {{"metadata",
            {{"name", name}, {"annotations", {{k8s::kNodeGpusAnnotation, cluster.gpus}}}}}});
    for (const json& pod : cluster.pods) extender.OnPod(pod);
    MeasureFilterAndPrioritize(extender, cluster.names, cluster.pods, 1000, state);
  }
}
BENCHMARK(BM_ExtenderOver20000Nodes)->Iterations(1)->Unit(benchmark::kSecond);

}  // namespace
}  // namespace gpumux

BENCHMARK_MAIN();
