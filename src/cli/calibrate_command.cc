// `gpumux calibrate`: measures a GPU with kernels of its own (node/calibration_probe.h) — its
// achieved bandwidth and math rate, launch and synchronisation gaps, and what 2, 3, … processes
// streaming at once get of it together, time-sliced or under MPS — and writes them to a
// calibration file (core/calibration.h) that `explain` and `plan` take with --calibration.
//
// With --gpu KIND it measures device 0 of the CUDA driver (CUDA_VISIBLE_DEVICES picks it), a GPU of
// that catalog kind, with the PTX kernels of node/calibration_kernels.cu; where an MPS control
// daemon runs (its pipe in CUDA_MPS_PIPE_DIRECTORY, default /tmp/nvidia-mps), every process is its
// client, so the co-runs measured are MPS ones. With --sim KIND it measures gpumux's simulated GPU
// of that kind, time-sliced and then MPS-like: it runs itself again with the simulated driver in
// its environment (a state file of its own for each mode, removed afterwards), as every process of
// the measurement must share one simulated device.
#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "base/error.h"
#include "cli/commands.h"
#include "core/calibration.h"
#include "core/catalog.h"
#include "node/calibration_probe.h"
#include "node/device.h"

namespace gpumux {
namespace {

struct CalibrateOptions {
  std::string gpu;  // a real GPU's catalog kind
  std::string sim;
  std::string out;  // default: the node's calibration dir (a real GPU), gpumux-calibration.json
  double seconds = 1;
  int processes = 4;
  std::vector<std::string> catalogs;
  // Run by the command itself, with the driver to measure in the environment:
  std::string measure_kind;  // measure, and write the file for this catalog kind
  std::string mps_into;      // measure only MPS co-runs, and add them to this file
  double load_seconds = 0;   // stream for this long (a co-runner of the measurement)
};

std::string UtcNow() {
  std::time_t now = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return text;
}

// Starts this program as `args`, with this process's environment; returns its pid.
pid_t Spawn(const std::vector<std::string>& args) {
  pid_t pid = fork();
  if (pid < 0) throw Internal("calibrate: fork failed");
  if (pid == 0) {
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv("/proc/self/exe", argv.data());
    _exit(127);
  }
  return pid;
}

int Wait(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Whether an MPS control daemon serves this user: then every CUDA process is its client.
bool MpsDaemonRuns() {
  const char* dir = std::getenv("CUDA_MPS_PIPE_DIRECTORY");
  return std::filesystem::exists(std::string(dir && *dir ? dir : "/tmp/nvidia-mps") + "/control");
}

// n processes streaming at once, for n from 2 to o.processes: what this one gets, times n, over
// `alone` (what it got alone).
std::map<int, double> CoRuns(node::CalibrationProbe& probe, const CalibrateOptions& o,
                             double alone) {
  std::map<int, double> usable;
  for (int n = 2; n <= o.processes; ++n) {
    std::vector<pid_t> loaders;
    for (int i = 1; i < n; ++i)
      loaders.push_back(
          Spawn({"gpumux", "calibrate", "--load", fmt::format("{}", 3 * o.seconds + 1)}));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // they have started streaming
    double mine = probe.Bandwidth(o.seconds);
    for (pid_t pid : loaders) kill(pid, SIGTERM);
    for (pid_t pid : loaders) Wait(pid);
    usable[n] = std::min(1.0, n * mine / alone);
  }
  return usable;
}

void PrintCoRuns(const std::map<int, double>& usable, const char* how) {
  for (auto [n, f] : usable)
    fmt::print("  {} processes {} get {:.1f}% of the GPU together\n", n, how, 100 * f);
}

// The measurement itself, on device 0 of the driver in the environment.
int Measure(const CalibrateOptions& o) {
  std::unique_ptr<node::CalibrationProbe> probe = node::CalibrationProbe::Open();
  if (!o.mps_into.empty()) {  // the simulated GPU's second pass, MPS-like
    GpuCalibration c = LoadCalibration(o.mps_into);
    c.mps_usable = CoRuns(*probe, o, probe->Bandwidth(o.seconds));
    SaveCalibration(c, o.mps_into);
    PrintCoRuns(c.mps_usable, "under MPS");
    return kExitOk;
  }
  GpuCalibration c;
  c.gpu = o.measure_kind;
  c.device_name = probe->DeviceName();
  c.driver = probe->DriverVersion();
  c.date = UtcNow();
  c.simulated = std::getenv("GPUMUX_SIM_STATE") != nullptr;
  c.bandwidth = probe->Bandwidth(o.seconds);
  c.flops = probe->Flops(o.seconds);
  c.launch_seconds = probe->LaunchSeconds(1000);
  c.sync_seconds = probe->SyncSeconds(200);
  bool mps = !c.simulated && MpsDaemonRuns();
  (mps ? c.mps_usable : c.timeslice_usable) = CoRuns(*probe, o, c.bandwidth);
  SaveCalibration(c, o.out);
  fmt::print("{}\n", DescribeCalibration(c, o.out));
  fmt::print("  bandwidth {:.3g} GB/s, math {:.3g} TFLOP/s, launch {:.1f} us, sync {:.1f} us\n",
             c.bandwidth / 1e9, c.flops / 1e12, c.launch_seconds * 1e6, c.sync_seconds * 1e6);
  PrintCoRuns(c.timeslice_usable, "time-sliced");
  PrintCoRuns(c.mps_usable, "under MPS (a control daemon runs)");
  return kExitOk;
}

int RunCalibrate(const CalibrateOptions& o) {
  if (o.load_seconds > 0) {  // a co-runner: stream until told to stop
    node::CalibrationProbe::Open()->Bandwidth(o.load_seconds);
    return kExitOk;
  }
  if (!o.measure_kind.empty() || !o.mps_into.empty()) return Measure(o);
  if (o.sim.empty() == o.gpu.empty())
    throw BadInput(
        "give the catalog kind of the GPU to measure: --gpu KIND for the real GPU "
        "(device 0 of CUDA_VISIBLE_DEVICES), or --sim KIND for a simulated one");
  Catalog catalog = Catalog::LoadBundled();
  for (const std::string& path : o.catalogs) catalog.AddFile(path);
  if (!o.gpu.empty()) {  // the real GPU, measured in this process
    CalibrateOptions measure = o;
    measure.measure_kind = catalog.FindGpu(o.gpu).name;
    if (measure.out.empty()) {  // the node's own, which explain, plan and gpumuxd then find
      std::error_code error;
      std::filesystem::create_directories(CalibrationDir(), error);
      measure.out = CalibrationDir() + "/" + measure.measure_kind + ".json";
    }
    return Measure(measure);
  }
  // Never the node's calibration: it is simulated.
  const std::string out = o.out.empty() ? "gpumux-calibration.json" : o.out;
  const GpuKind& kind = catalog.FindGpu(o.sim);
  char dir_template[] = "/tmp/gpumux-calibrate-XXXXXX";
  if (!mkdtemp(dir_template)) throw Unavailable("calibrate: cannot make a temporary folder");
  std::string dir = dir_template;
  node::Device device = node::SimulatedDevice(kind, 0);
  // One pass per sharing mode, each on a simulated device of its own.
  auto pass = [&](const char* mode, std::vector<std::string> args) {
    for (const auto& [k, v] : node::SimulatedGpuEnvironment(
             device, fmt::format("{}/sim-{}.state", dir, mode), node::RuntimeLibraryDir(),
             std::getenv("LD_LIBRARY_PATH") ? std::getenv("LD_LIBRARY_PATH") : ""))
      setenv(k.c_str(), v.c_str(), 1);
    setenv("GPUMUX_SIM_MODE", mode, 1);
    args.insert(args.end(), {"--seconds", fmt::format("{}", o.seconds), "--processes",
                             std::to_string(o.processes)});
    return Wait(Spawn(args));
  };
  int code = pass("timeslice", {"gpumux", "calibrate", "--measure", kind.name, "--out", out});
  if (code == kExitOk && o.processes >= 2)
    code = pass("mps", {"gpumux", "calibrate", "--mps-into", out});
  std::filesystem::remove_all(dir);
  return code;
}

}  // namespace

Command AddCalibrateCommand(CLI::App& app) {
  auto o = std::make_shared<CalibrateOptions>();
  CLI::App* sub = app.add_subcommand(
      "calibrate",
      "Measure a GPU (bandwidth, math, launch and sync gaps, time-sliced and MPS co-runs) into a "
      "calibration file for explain and plan");
  sub->add_option("--gpu", o->gpu,
                  "measure the real GPU (device 0 of CUDA_VISIBLE_DEVICES), of this catalog kind");
  sub->add_option("--sim", o->sim, "measure the simulated GPU of this catalog kind");
  sub->add_option("--out", o->out,
                  "the calibration file to write (default: with --gpu the node's, "
                  "$GPUMUX_CALIBRATION_DIR or /var/lib/gpumux/calibrations, KIND.json, which "
                  "explain, plan and gpumuxd use; with --sim gpumux-calibration.json)");
  sub->add_option("--seconds", o->seconds, "how long each measurement runs")
      ->check(CLI::Range(0.05, 60.0))
      ->capture_default_str();
  sub->add_option("--processes", o->processes, "measure co-runs of 2 up to this many processes")
      ->check(CLI::Range(1, 8))
      ->capture_default_str();
  sub->add_option("--catalog", o->catalogs, "extra catalog file with your own GPU kinds");
  sub->add_option("--measure", o->measure_kind)->group("");  // the measuring process
  sub->add_option("--mps-into", o->mps_into)->group("");     // the simulated GPU's MPS pass
  sub->add_option("--load", o->load_seconds)->group("");     // a co-runner
  return {sub, [o] { return RunCalibrate(*o); }};
}

}  // namespace gpumux
