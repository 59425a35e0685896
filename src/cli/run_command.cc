// `gpumux run`: start a command as a tenant of a shared GPU with a memory quota and a compute
// share, under the shim; `gpumux status`: show each tenant's limits, usage and processes from the
// GPU's ledger.
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "base/clock.h"
#include "base/comma_list.h"
#include "base/error.h"
#include "base/process.h"
#include "cli/commands.h"
#include "cli/report.h"
#include "core/catalog.h"
#include "core/units.h"
#include "node/agent/agent_client.h"
#include "node/agent/share_backend.h"
#include "node/device.h"
#include "node/ledger/ledger.h"

namespace gpumux {
namespace {

struct RunOptions {
  std::string gpus = "0";  // "0", or "0,1" for a tenant of several GPUs
  std::string mem;         // one quota for each GPU, or one per GPU ("10GiB,20GiB")
  std::string compute;
  unsigned weight = 1;
  std::string priority = "normal";
  std::string sim;
  std::string tenant;
  bool strict = false;
  std::vector<std::string> catalogs;
  std::vector<std::string> command;
};

struct StatusOptions {
  int gpu = 0;
  bool json = false;
  std::string agent;    // gpumuxd socket; empty: read the ledger directly
  double interval = 1;  // top: seconds between refreshes
  int count = 0;        // top: refreshes before exiting (0: until interrupted)
};

std::string EnvOr(const char* var) {
  const char* v = std::getenv(var);
  return v ? v : "";
}

// GPU `device`'s ledger at `path` for `gpumux run`: opened, or made anew when the file there cannot
// be used (left by another gpumux version, of another GPU, cut short) and no process maps it any
// more, so that upgrading gpumux needs no file removed by hand. Throws Error (bad input) naming a
// process that still uses such a file. Two runs that find one stale file agree: whoever holds its
// lock first replaces it, the other opens the replacement.
node::Ledger OpenRunLedger(const std::string& path, const node::Device& device) {
  for (int attempt = 0;; ++attempt) {
    struct stat tried;  // the file this attempt finds unusable, unless another run replaces it
    const bool existed = stat(path.c_str(), &tried) == 0;
    std::string problem;
    if (std::optional<node::Ledger> ledger = node::OpenDeviceLedger(path, device, &problem))
      return std::move(*ledger);
    if (attempt > 2) throw BadInput(problem);
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;  // replaced meanwhile: open what is there now
    flock(fd, LOCK_EX);
    // Still the file this attempt found unusable (another run may have made it anew meanwhile:
    // then it is tried again, not taken for a stale one).
    struct stat held, named;
    const bool same = existed && fstat(fd, &held) == 0 && stat(path.c_str(), &named) == 0 &&
                      held.st_dev == named.st_dev && held.st_ino == named.st_ino &&
                      held.st_dev == tried.st_dev && held.st_ino == tried.st_ino;
    if (same) {
      if (std::optional<pid_t> user = ProcessMapping(path)) {
        close(fd);
        throw BadInput(fmt::format(
            "{}; process {} still uses it (a tenant of another gpumux?): wait until it exits, or "
            "run with GPUMUX_RUNTIME_DIR set to another directory",
            problem, *user));
      }
      fmt::print(stderr, "gpumux: {}; no process uses it: made anew\n", problem);
      unlink(path.c_str());
    }
    close(fd);  // unlocks: a run waiting on it finds the file replaced, and opens the new one
  }
}

pid_t g_child = 0;
void Forward(int sig) {
  if (g_child > 0) kill(g_child, sig);
}

// Removes the tenant if none of its processes is left (another `gpumux run` may share it).
void RemoveIfIdle(node::Ledger& ledger, int tenant, const std::string& id) {
  ledger.ReclaimDead();
  for (const node::TenantUsage& u : ledger.Snapshot()) {
    if (u.slot == tenant && u.id == id && u.processes.empty()) ledger.RemoveTenant(tenant);
  }
}

// "0,1" → {0, 1}: distinct GPU indices. Throws Error (bad input) naming `flag`.
std::vector<int> ParseGpuList(const std::string& text, const std::string& flag) {
  std::vector<int> gpus;
  for (const std::string& item : SplitCommas(text)) {
    char* end = nullptr;
    long n = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end || n < 0 || n > 1023)
      throw BadInput(
          fmt::format("{}: expected GPU indices such as 0 or 0,1, got '{}'", flag, text));
    if (std::find(gpus.begin(), gpus.end(), int(n)) != gpus.end())
      throw BadInput(fmt::format("{}: GPU {} is named twice in '{}'", flag, n, text));
    gpus.push_back(int(n));
  }
  return gpus;
}

int RunTenant(const RunOptions& o) {
  if (o.command.empty()) throw BadInput("give the command to run after --");
  std::vector<int> indices = ParseGpuList(o.gpus, "--gpu");
  std::vector<std::string> mems = SplitCommas(o.mem);
  if (mems.size() != 1 && mems.size() != indices.size())
    throw BadInput(
        fmt::format("--mem: give one quota for every GPU or one for each of the {} "
                    "GPUs of --gpu {}, not {}",
                    indices.size(), o.gpus, mems.size()));
  std::string sim = o.sim;
  if (sim.empty() && std::getenv("GPUMUX_SIM")) sim = std::getenv("GPUMUX_SIM");
  std::optional<Catalog> catalog;
  if (!sim.empty()) {
    catalog = Catalog::LoadBundled();
    for (const std::string& path : o.catalogs) catalog->AddFile(path);
  }
  node::TenantLimits shared;
  shared.weight = o.weight;
  try {
    if (!o.compute.empty()) shared.cap_permille = node::ParseComputeCap(o.compute);
    shared.priority = node::ParsePriority(o.priority);
  } catch (const Error& e) {
    throw Error(e.code(), std::string("--") + e.what());
  }
  std::string id =
      o.tenant.empty()
          ? fmt::format("{}-{}", std::filesystem::path(o.command[0]).filename().string(), getpid())
          : o.tenant;
  // Each GPU: the device, the tenant's limits there (its quota), and its ledger.
  std::vector<node::Device> devices;
  std::vector<node::TenantLimits> limits;
  for (size_t i = 0; i < indices.size(); ++i) {
    devices.push_back(catalog ? node::SimulatedDevice(catalog->FindGpu(sim), indices[i])
                              : node::RealDevice(indices[i]));
    node::TenantLimits l = shared;
    try {  // the parsers name the value and what they expected; the flag goes in front
      l.memory = uint64_t(ParseBytes(mems[mems.size() == 1 ? 0 : i]));
    } catch (const Error& e) {
      throw e.Within("--mem");
    }
    if (l.memory == 0) throw BadInput("--mem must be more than 0 bytes");
    if (l.memory > devices[i].memory) {
      throw BadInput(fmt::format("--mem {} is more than GPU {}'s {} ({})",
                                 FormatBytes(double(l.memory)), indices[i],
                                 FormatBytes(double(devices[i].memory)), devices[i].name));
    }
    node::CheckTenant(id, l);  // before any ledger is made
    limits.push_back(l);
  }
  std::vector<std::string> paths;
  std::vector<node::Ledger> ledgers;
  std::vector<int> slots;
  // Admitted on every GPU or on none; when its last process is gone it leaves each it was admitted
  // on.
  auto leave = [&] {
    for (size_t i = 0; i < slots.size(); ++i) RemoveIfIdle(ledgers[i], slots[i], id);
  };
  try {
    for (size_t i = 0; i < devices.size(); ++i) {
      const node::Device& device = devices[i];
      paths.push_back(node::LedgerPath(device.index));
      ledgers.push_back(OpenRunLedger(paths[i], device));
      node::Ledger& ledger = ledgers[i];
      ledger.ReclaimDead();
      slots.push_back(ledger.AddTenant(id, limits[i], o.strict));
    }
  } catch (const Error&) {
    leave();
    throw;
  }

  std::vector<std::pair<std::string, std::string>> env = node::TenantEnvironment(
      devices, paths, id, node::RuntimeLibraryDir(), EnvOr("LD_PRELOAD"), EnvOr("LD_LIBRARY_PATH"));
  agent::AddMpsClientPriority(shared, &env);  // what the driver offers too, under MPS
  g_child = fork();
  if (g_child < 0) throw Internal(fmt::format("cannot start '{}': fork failed", o.command[0]));
  if (g_child == 0) {
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> argv;
    for (const std::string& a : o.command) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    fmt::print(stderr, "gpumux: cannot run '{}': {}\n", o.command[0], std::strerror(errno));
    _exit(127);
  }
  signal(SIGINT, Forward);
  signal(SIGTERM, Forward);
  int status = 0;
  while (waitpid(g_child, &status, 0) < 0 && errno == EINTR) {
  }
  leave();
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

// The tenant's GPU time over its life so far, as a fraction of wall time.
double GpuTimeShare(const node::TenantUsage& u) {
  uint64_t now = NowNs();
  return now > u.added_ns ? double(u.gpu_ns) / double(now - u.added_ns) : 0.0;
}

// The tenants gpumuxd admitted (all of them for an operator, one's own otherwise).
int ShowAgentStatus(const StatusOptions& o) {
  nlohmann::json j = agent::AgentClient(o.agent).Tenants();
  if (o.json) {
    fmt::print("{}\n", j.dump(2));
    return kExitOk;
  }
  // A line per GPU first, as nvidia-smi users expect: its mode, memory granted of its total (in
  // MiB, as nvidia-smi gives it), tenants, health.
  const nlohmann::json gpus = agent::AgentClient(o.agent).Gpus();
  for (const auto& g : gpus.value("gpus", nlohmann::json::array())) {
    int index = g.value("index", -1);
    uint64_t granted = 0;
    int tenants = 0;
    for (const auto& t : j["tenants"]) {
      nlohmann::json places =
          t.value("per_gpu", nlohmann::json::array({{{"gpu", t.value("gpu", 0)},
                                                      {"used_bytes", t.value("used_bytes", 0ull)}}}));
      for (const auto& p : places) {
        if (p.value("gpu", -1) != index) continue;
        granted += p.value("used_bytes", 0ull);
        ++tenants;
      }
    }
    std::string mode = g.value("mode", "");
    if (g.contains("instances")) mode += fmt::format(" ({} instances)", g["instances"].size());
    fmt::print("GPU {}: {}, {}, {}MiB / {}MiB granted, {} tenant{}, {}\n", index,
               g.value("name", ""), mode, granted >> 20, g.value("memory_bytes", 0ull) >> 20,
               tenants, tenants == 1 ? "" : "s", g.value("healthy", true) ? "healthy" : "UNHEALTHY");
  }
  std::vector<std::vector<std::string>> rows = {{"tenant", "gpu", "quota", "used", "refused",
                                                 "compute", "gpu time", "held", "processes",
                                                 "source"}};
  for (const auto& t : j["tenants"]) {
    double cap = t.value("compute_cap_percent", 100.0);
    // "0", or "0,1" for a tenant over several GPUs.
    std::string gpus =
        JoinCommas(t.value("gpus", nlohmann::json::array({t.value("gpu", 0)})),
                   [](const nlohmann::json& g) { return std::to_string(g.get<int>()); });
    rows.push_back({t.value("id", ""), gpus, FormatBytesAsGiven(t.value("quota_bytes", 0ull)),
                    FormatBytes(t.value("used_bytes", 0.0)),
                    std::to_string(t.value("refused_allocations", 0)),
                    fmt::format("{}{} w{}", cap < 100 ? fmt::format("{:g}% ", cap) : "",
                                t.value("priority", ""), t.value("weight", 1)),
                    fmt::format("{:.2f}s", t.value("gpu_time_s", 0.0)),
                    std::to_string(t.value("held_launches", 0)),
                    std::to_string(t.value("processes", nlohmann::json::array()).size()),
                    t.value("source", "")});
  }
  fmt::print("{}", FormatTable(rows));
  for (const auto& t : j["tenants"])
    if (t.contains("rhythm"))
      fmt::print("{}: {}\n", t.value("id", ""), agent::DescribeRhythm(t["rhythm"]));
  return kExitOk;
}

int ShowStatus(const StatusOptions& o) {
  if (!o.agent.empty()) return ShowAgentStatus(o);
  std::string path = node::LedgerPath(o.gpu);
  if (!std::filesystem::exists(path)) {
    if (o.json) {
      fmt::print(
          "{}\n",
          nlohmann::json{{"gpu", o.gpu}, {"ledger", path}, {"tenants", nlohmann::json::array()}}
              .dump(2));
    } else {
      fmt::print("GPU {}: no ledger at {}: nothing runs under gpumux there\n", o.gpu, path);
    }
    return kExitOk;
  }
  node::Ledger ledger = node::Ledger::Open(path);
  ledger.ReclaimDead();
  std::vector<node::TenantUsage> tenants = ledger.Snapshot();
  if (o.json) {
    nlohmann::json j = {{"gpu", o.gpu},
                        {"ledger", path},
                        {"device", ledger.gpu_name()},
                        {"capacity_bytes", ledger.capacity()},
                        {"tenants", nlohmann::json::array()}};
    for (const node::TenantUsage& u : tenants) {
      nlohmann::json procs = nlohmann::json::array();
      for (auto [pid, bytes] : u.processes) procs.push_back({{"pid", pid}, {"used_bytes", bytes}});
      j["tenants"].push_back({{"id", u.id},
                              {"quota_bytes", u.quota},
                              {"used_bytes", u.used},
                              {"refused_allocations", u.refused},
                              {"reclaimed_bytes", u.reclaimed},
                              {"compute_cap_percent", u.cap_permille / 10.0},
                              {"weight", u.weight},
                              {"priority", node::PriorityName(u.priority)},
                              {"gpu_time_s", u.gpu_ns / 1e9},
                              {"gpu_time_share", GpuTimeShare(u)},
                              {"held_launches", u.held},
                              {"processes", procs}});
      if (u.rhythm) j["tenants"].back()["rhythm"] = agent::RhythmJson(*u.rhythm);
    }
    fmt::print("{}\n", j.dump(2));
    return kExitOk;
  }
  fmt::print("GPU {}: {}, {} ({})\n", o.gpu, ledger.gpu_name(),
             FormatBytes(double(ledger.capacity())), path);
  std::vector<std::vector<std::string>> rows = {{"tenant", "quota", "used", "refused", "reclaimed",
                                                 "compute", "gpu time", "held", "processes"}};
  for (const node::TenantUsage& u : tenants) {
    std::string procs;
    for (auto [pid, bytes] : u.processes)
      procs += fmt::format("{}{}:{}", procs.empty() ? "" : " ", pid, FormatBytes(double(bytes)));
    std::string compute = fmt::format(
        "{}{} w{}",
        u.cap_permille < node::kNoCap ? fmt::format("{:g}% ", u.cap_permille / 10.0) : "",
        node::PriorityName(u.priority), u.weight);
    rows.push_back({u.id, FormatBytesAsGiven(u.quota), FormatBytes(double(u.used)),
                    std::to_string(u.refused), FormatBytes(double(u.reclaimed)), compute,
                    fmt::format("{:.2f}s ({:.1f}%)", u.gpu_ns / 1e9, 100 * GpuTimeShare(u)),
                    std::to_string(u.held), procs.empty() ? "-" : procs});
  }
  fmt::print("{}", FormatTable(rows));
  for (const node::TenantUsage& u : tenants)
    if (u.rhythm) fmt::print("{}: {}\n", u.id, agent::DescribeRhythm(agent::RhythmJson(*u.rhythm)));
  return kExitOk;
}

}  // namespace

Command AddRunCommand(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* sub = app.add_subcommand("run",
                                     "Run a command as a tenant of a shared GPU, with a memory "
                                     "quota and a compute share enforced by the shim");
  sub->add_option("--gpu", o->gpus,
                  "GPU index, or several (0,1) for a tenant that spans GPUs (tensor parallelism): "
                  "the program sees them as devices 0, 1, …")
      ->capture_default_str();
  sub->add_option("--mem", o->mem,
                  "memory quota on each GPU, e.g. 24GiB; or one per GPU of --gpu (10GiB,20GiB)")
      ->required();
  sub->add_option("--compute", o->compute, "cap on GPU time, e.g. 40% (default: none)");
  sub->add_option("--weight", o->weight,
                  "share of GPU time when tenants contend, relative to others' weights")
      ->capture_default_str();
  sub->add_option("--priority", o->priority,
                  "high (launches never wait), normal, or low/best-effort; a tenant yields while "
                  "one of higher priority has work in flight (low: also a below-normal MPS client)")
      ->capture_default_str();
  sub->add_option("--sim", o->sim,
                  "run on the simulated GPU of this catalog kind (or set GPUMUX_SIM)");
  sub->add_option(
      "--tenant", o->tenant,
      "tenant id (default: command name and launcher pid); runs with the same id share the quota");
  sub->add_flag(
      "--strict", o->strict,
      "refuse if the GPU's memory quotas would sum past its memory or its compute caps past 100%");
  sub->add_option("--catalog", o->catalogs, "extra catalog file with your own GPU kinds");
  sub->add_option("command", o->command, "the command and its arguments, after --")->required();
  return {sub, [o] { return RunTenant(*o); }};
}

// `gpumux top`: status, refreshed in place.
int ShowTop(const StatusOptions& o) {
  for (int i = 0; o.count == 0 || i < o.count; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::duration<double>(o.interval));
    fmt::print("\033[H\033[2J");
    ShowStatus(o);
    std::fflush(stdout);
  }
  return kExitOk;
}

Command AddTopCommand(CLI::App& app) {
  auto o = std::make_shared<StatusOptions>();
  CLI::App* sub = app.add_subcommand("top", "gpumux status, refreshed every --interval seconds");
  sub->add_option("--gpu", o->gpu, "GPU index (without --agent)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  sub->add_option("--agent", o->agent,
                  "ask gpumuxd at this socket (e.g. /run/gpumux/gpumuxd.sock)");
  sub->add_option("--interval", o->interval, "seconds between refreshes")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--count", o->count, "refreshes before exiting (0: until interrupted)")
      ->check(CLI::NonNegativeNumber);
  return {sub, [o] { return ShowTop(*o); }};
}

Command AddStatusCommand(CLI::App& app) {
  auto o = std::make_shared<StatusOptions>();
  CLI::App* sub = app.add_subcommand("status", "Each tenant's quota, usage and processes on a GPU");
  sub->add_option("--gpu", o->gpu, "GPU index")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  sub->add_flag("--json", o->json, "print one JSON object");
  sub->add_option(
      "--agent", o->agent,
      "ask gpumuxd at this socket (e.g. /run/gpumux/gpumuxd.sock) instead of reading the ledger");
  return {sub, [o] { return ShowStatus(*o); }};
}

}  // namespace gpumux
