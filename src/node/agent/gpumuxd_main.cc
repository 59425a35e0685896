// gpumuxd: the node agent. Owns the node's GPUs' ledgers, admits tenants through its API on a Unix
// socket, keeps them in SQLite, reclaims dead processes' memory and checks what tenants hold on
// their GPUs against their quotas twice a second, measures GPU time and sets every tenant's launch
// gate once a millisecond, and serves Prometheus metrics. One per runtime directory and socket (a
// lock; a second exits 2). See agent.h for the API and README "gpumuxd" for installing it.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <thread>

#include "base/cgroup.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/instance_lock.h"
#include "core/catalog.h"
#include "core/units.h"
#include "node/agent/agent.h"
#include "service/http_server.h"
#include "service/log.h"
#include "node/tenant_libraries.h"

namespace {

// Every connection is a file: lift the soft limit to the hard one (the unit sets LimitNOFILE).
void RaiseOpenFileLimit() {
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("gpumuxd: the gpumux node agent");
  std::string socket = "/run/gpumux/gpumuxd.sock", state = "/var/lib/gpumux/state.db",
              runtime_dir = "/run/gpumux";
  std::string sim, metrics_listen, operator_group, shard_size = "1GiB", tenant_socket;
  std::string context_allowance = "1GiB", tenant_context_allowance = "4GiB", over_quota = "kill";
  std::string cgroup_namespace = "/proc/1/ns/cgroup";
  std::string tenant_libraries = gpumux::node::RuntimeLibraryDir();
  std::vector<std::string> catalogs, calibrations;
  int sim_gpus = 1;
  app.add_option("--socket", socket, "API socket")->capture_default_str();
  app.add_option("--tenant-socket", tenant_socket,
                 "the tenants' socket, for memory grants, never an operator's (default: "
                 "RUNTIME_DIR/tenant.sock)");
  app.add_option("--state", state, "SQLite database of admitted tenants")->capture_default_str();
  app.add_option("--runtime-dir", runtime_dir, "where the GPUs' ledgers live (tenants map them)")
      ->capture_default_str();
  app.add_option("--sim", sim,
                 "manage simulated GPUs of this catalog kind instead of the real ones");
  app.add_option("--gpus", sim_gpus, "how many simulated GPUs (with --sim)")->capture_default_str();
  app.add_option("--metrics-listen", metrics_listen, "also serve /metrics on this HOST:PORT");
  app.add_option("--operator-group", operator_group,
                 "group whose members may change tenants (root always may)");
  app.add_option("--shard-size", shard_size, "memory per Slurm shard")->capture_default_str();
  app.add_option("--context-allowance", context_allowance,
                 "what a tenant's process may hold on its GPU beyond the memory gpumuxd granted it "
                 "(its CUDA context and modules) before its tenant counts as over its quota")
      ->capture_default_str();
  app.add_option("--tenant-context-allowance", tenant_context_allowance,
                 "what all of a tenant's processes on a GPU may hold beyond the memory gpumuxd "
                 "granted them together, however many they are")
      ->capture_default_str();
  app.add_option("--over-quota", over_quota,
                 "what to do with a process that holds GPU memory past its tenant's quota around "
                 "the shim: kill it, or only log it")
      ->check(CLI::IsMember({"kill", "log"}))
      ->capture_default_str();
  app.add_option("--cgroup-namespace", cgroup_namespace,
                 "the cgroup namespace (a /proc/PID/ns/cgroup file) in which gpumuxd reads the "
                 "groups of tenants' processes, joined at start when it is not its own: the "
                 "node's, where pods' groups are whole paths")
      ->capture_default_str();
  app.add_option("--tenant-libraries", tenant_libraries,
                 "the folder of the shim (and simgpu/) that tenants load, as they see it: a node "
                 "folder that `gpumux install-shim` filled, where gpumuxd runs from an image")
      ->capture_default_str();
  app.add_option("--catalog", catalogs, "extra catalog file with your own GPU kinds");
  app.add_option("--calibration", calibrations,
                 "a `gpumux calibrate` file of this node's GPUs, served with them in GET /v1/gpus "
                 "for planners (one per kind of GPU; default: those of its GPUs in "
                 "$GPUMUX_CALIBRATION_DIR or /var/lib/gpumux/calibrations)");
  CLI11_PARSE(app, argc, argv);

  using gpumux::service::Log;
  try {
    std::filesystem::create_directories(runtime_dir);
    std::filesystem::create_directories(std::filesystem::path(socket).parent_path());
    gpumux::LockInstance(runtime_dir + "/gpumuxd.lock", runtime_dir, "gpumuxd");
    gpumux::LockInstance(socket + ".lock", socket, "gpumuxd");
    RaiseOpenFileLimit();
    // A tenant bound to a pod's control group knows its processes by /proc/PID/cgroup, which reads
    // paths relative to the reader's own group in a container's cgroup namespace. Before any
    // thread starts: each thread has its own.
    if (geteuid() == 0) {
      std::string why;
      if (!gpumux::JoinCgroupNamespace(cgroup_namespace, &why))
        Log("warn",
            "reading processes' control groups in gpumuxd's own cgroup namespace: tenants bound "
            "to a group outside it will refuse their processes",
            {{"reason", why}});
    }
    gpumux::agent::AgentConfig config;
    config.runtime_dir = runtime_dir;
    config.state_path = state;
    config.operator_group = operator_group;
    config.socket_path = std::filesystem::absolute(socket).string();
    if (tenant_socket.empty()) tenant_socket = runtime_dir + "/tenant.sock";
    config.tenant_socket_path = std::filesystem::absolute(tenant_socket).string();
    if (!gpumux::node::HoldsTenantLibraries(tenant_libraries))
      throw gpumux::BadInput("--tenant-libraries " + tenant_libraries +
                             ": no libgpumux.so there (`gpumux install-shim " + tenant_libraries +
                             "` puts it there)");
    config.bin_dir = std::filesystem::absolute(tenant_libraries).string();
    config.shard_bytes = uint64_t(gpumux::ParseBytes(shard_size));
    if (config.shard_bytes == 0) throw gpumux::BadInput("--shard-size must be more than 0 bytes");
    config.context_allowance = {uint64_t(gpumux::ParseBytes(context_allowance)),
                                uint64_t(gpumux::ParseBytes(tenant_context_allowance))};
    config.kill_over_quota = over_quota == "kill";
    if (!sim.empty()) {
      gpumux::Catalog catalog = gpumux::Catalog::LoadBundled();
      for (const std::string& path : catalogs) catalog.AddFile(path);
      const gpumux::GpuKind& kind = catalog.FindGpu(sim);
      for (int i = 0; i < sim_gpus; ++i)
        config.gpus.push_back(gpumux::node::SimulatedDevice(kind, i));
    } else {
      int n = gpumux::node::RealDeviceCount();
      for (int i = 0; i < n; ++i) config.gpus.push_back(gpumux::node::RealDevice(i));
    }
    for (const std::string& path : calibrations)
      config.calibrations.push_back({path, gpumux::LoadCalibration(path)});
    if (calibrations.empty()) {  // the node's own, those of GPUs it has
      for (gpumux::CalibrationFile& c :
           gpumux::LoadCalibrationDir(gpumux::CalibrationDir(), /*simulated_too=*/true)) {
        if (std::any_of(config.gpus.begin(), config.gpus.end(),
                        [&](const auto& d) { return gpumux::agent::MeasuredOn(c.figures, d); })) {
          config.calibrations.push_back(std::move(c));
        } else {
          Log("info", "calibration of a GPU this node does not have: not used",
              {{"file", c.path}, {"device", c.figures.device_name}});
        }
      }
    }
    std::filesystem::create_directories(std::filesystem::path(state).parent_path());
    std::filesystem::create_directories(std::filesystem::path(socket).parent_path());
    gpumux::agent::Agent agent(config, sim.empty()
                                           ? gpumux::agent::MakeNvidiaBackend(runtime_dir)
                                           : gpumux::agent::MakeSimulatedBackend(runtime_dir));
    gpumux::service::HttpServer server;
    server.ListenUnix(socket);
    std::filesystem::create_directories(std::filesystem::path(tenant_socket).parent_path());
    server.ListenUnix(tenant_socket, /*tenant_socket=*/true);
    if (!metrics_listen.empty()) server.ListenTcp(metrics_listen);
    server.StopOnTerminationSignals();
    std::atomic<bool> done{false};
    // Nothing in a file may stop these threads: what they cannot do they log and retry.
    std::thread reclaimer([&] {
      while (!done.load()) {
        try {
          agent.Reclaim();
        } catch (const std::exception& e) {
          Log("error", "reclaim failed; retrying", {{"reason", e.what()}});
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
      }
    });
    std::thread governor([&] {
      while (!done.load()) {
        uint64_t next = gpumux::NowNs() + 1'000'000;
        try {
          agent.ComputeTick();
        } catch (const std::exception& e) {
          Log("error", "compute tick failed; retrying", {{"reason", e.what()}});
          next += 999'000'000;
        }
        gpumux::SleepUntilNs(next);
      }
    });
    Log("info", "gpumuxd started",
        {{"socket", socket},
         {"tenant_socket", tenant_socket},
         {"gpus", std::to_string(config.gpus.size())},
         {"tenants", std::to_string(agent.tenant_count())},
         {"state", state},
         {"metrics", metrics_listen.empty()
                         ? socket
                         : metrics_listen.substr(0, metrics_listen.rfind(':') + 1) +
                               std::to_string(server.tcp_port())}});
    server.Serve([&](const gpumux::service::HttpRequest& r) { return agent.Handle(r); });
    done = true;
    reclaimer.join();
    governor.join();
    Log("info", "gpumuxd stopped");
    return 0;
  } catch (const std::exception& e) {
    Log("error", e.what());
    return 2;
  }
}
