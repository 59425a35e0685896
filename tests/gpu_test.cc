// The runtime on a real NVIDIA GPU (ctest label `gpu`): the memory quota through a driver-API
// program and through PyTorch, a compute cap through PyTorch, NVML as gpumuxd reads it, and gpumuxd
// admitting a tenant there. Each test skips, saying why, where there is no GPU (or no PyTorch).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "abi/nvml_api.h"
#include "agent_fixture.h"
#include "base/clock.h"
#include "node/device.h"
#include "node/mig_control.h"
#include "node/nvml_library.h"
#include "shell.h"

namespace {

constexpr uint64_t kMiB = 1ull << 20, kGiB = 1ull << 30;

// Why this machine cannot run the GPU tests, or "" if it can.
std::string NoGpuReason() {
  void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  if (!nvml) return "no NVIDIA driver (libnvidia-ml.so.1 not found)";
  auto init = reinterpret_cast<decltype(&nvmlInit_v2)>(dlsym(nvml, "nvmlInit_v2"));
  auto count =
      reinterpret_cast<decltype(&nvmlDeviceGetCount_v2)>(dlsym(nvml, "nvmlDeviceGetCount_v2"));
  unsigned n = 0;
  if (!init || !count || init() != 0 || count(&n) != 0 || n == 0) return "NVML reports no GPU";
  if (!dlopen("libcuda.so.1", RTLD_NOW)) return "no CUDA driver (libcuda.so.1 not found)";
  return "";
}

std::pair<int, std::string> Sh(const std::string& cmd) {
  gpumux::testing::ShellResult r = gpumux::testing::Shell(cmd);
  return {r.exit_code, r.out};
}

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why = NoGpuReason();
    if (!why.empty()) GTEST_SKIP() << "needs an NVIDIA GPU: " << why;
    dir_ = std::filesystem::temp_directory_path() / ("gpumux_gpu_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    setenv("GPUMUX_RUNTIME_DIR", dir_.c_str(), 1);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Whether PyTorch with CUDA can be imported.
  static bool HasTorch() {
    return Sh("python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null").first == 0;
  }
  // Writes `text` to DIR/name and returns its path.
  std::string Script(const std::string& name, const char* text) {
    std::string path = (dir_ / name).string();
    FILE* f = std::fopen(path.c_str(), "w");
    std::fputs(text, f);
    std::fclose(f);
    return path;
  }

  std::filesystem::path dir_;
};

TEST_F(GpuTest, DriverApiProgramIsRefusedAtItsQuota) {
  for (const char* binding : {"direct", "dlopen", "procaddr"}) {
    auto [code, out] = Sh(std::string(GPUMUX_BINARY) + " run --gpu 0 --mem 1GiB --tenant gpu-" +
                          binding + " -- " + GPUMUX_ALLOC_CLIENT + " " + binding + " fill " +
                          std::to_string(64 * kMiB) + " 0 2>/dev/null");
    ASSERT_EQ(code, 0) << binding << ": " << out;
    auto j = nlohmann::json::parse(out);
    EXPECT_EQ(j["allocated"].get<uint64_t>(), kGiB) << binding;
    EXPECT_EQ(j["last_error"].get<int>(), 2) << binding;
    EXPECT_EQ(j["total"].get<uint64_t>(), kGiB) << binding;
  }
}

TEST_F(GpuTest, PyTorchSeesTheQuotaAndIsRefusedPastIt) {
  if (!HasTorch()) GTEST_SKIP() << "PyTorch with CUDA is not installed";
  std::string path = Script("quota.py",
                            "import torch, json\n"
                            "free, total = torch.cuda.mem_get_info()\n"
                            "oom = False\n"
                            "try:\n"
                            "    x = torch.empty(3 << 30, dtype=torch.uint8, device='cuda')\n"
                            "except torch.cuda.OutOfMemoryError:\n"
                            "    oom = True\n"
                            "print(json.dumps({'total': total, 'oom': oom}))\n");
  auto [code, out] = Sh(std::string(GPUMUX_BINARY) + " run --gpu 0 --mem 2GiB -- python3 " + path +
                        " 2>/dev/null");
  ASSERT_EQ(code, 0) << out;
  auto j = nlohmann::json::parse(out.substr(out.find('{')));
  EXPECT_EQ(j["total"].get<uint64_t>(), 2 * kGiB) << "torch.cuda.mem_get_info() shows the quota";
  EXPECT_TRUE(j["oom"].get<bool>())
      << "3 GiB past a 2 GiB quota raises OutOfMemoryError in this process only";
}

// Busy bf16 matmuls for 8 s, counted over the last 5 s (after NVML's per-process samples, about
// every 1/6 s, have let the governor settle). GPU time = matmuls x their solo duration, measured by
// CUDA events in the uncapped run (events in the capped run would also time the host-side hold).
constexpr const char* kBusyMatmuls =
    "import torch, time, json\n"
    "a = torch.randn(4096, 4096, device='cuda', dtype=torch.bfloat16)\n"
    "start = time.time(); measured_from = start + 3; count = 0; gpu_ms = 0.0\n"
    "while time.time() < start + 8:\n"
    "    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)\n"
    "    s.record(); b = a @ a; e.record(); e.synchronize()\n"
    "    if time.time() > measured_from: count += 1; gpu_ms += s.elapsed_time(e)\n"
    "print(json.dumps({'count': count, 'mean_ms': gpu_ms / max(count, 1), 'wall_s': time.time() "
    "- measured_from}))\n";

// The GPU share of a kBusyMatmuls run `r` whose matmuls take `solo_ms` alone.
double GpuShare(const nlohmann::json& r, double solo_ms) {
  return r["count"].get<double>() * solo_ms / 1000 / r["wall_s"].get<double>();
}

TEST_F(GpuTest, PyTorchIsHeldToItsComputeCap) {
  if (!HasTorch()) GTEST_SKIP() << "PyTorch with CUDA is not installed";
  std::string path = Script("busy.py", kBusyMatmuls);
  auto run = [&](const std::string& limits) {
    auto [code, out] = Sh(std::string(GPUMUX_BINARY) + " run --gpu 0 --mem 4GiB " + limits +
                          " -- python3 " + path + " 2>/dev/null");
    EXPECT_EQ(code, 0) << out;
    return nlohmann::json::parse(out.substr(out.find('{')));
  };
  nlohmann::json alone = run(""), capped = run("--compute 30%");
  double solo_ms = alone["mean_ms"].get<double>();
  std::printf("gpumux run: uncapped share %.3f, --compute 30%% share %.3f\n",
              GpuShare(alone, solo_ms), GpuShare(capped, solo_ms));
  EXPECT_GT(GpuShare(alone, solo_ms), 0.6) << "uncapped, the loop keeps the GPU busy: " << alone;
  EXPECT_NEAR(GpuShare(capped, solo_ms), 0.30, 0.10)
      << "uncapped " << alone << ", capped " << capped;
}

// NVML as gpumuxd reads it (our declarations of its structures against the real library): the GPU's
// name, memory and UUID, and, only where an administrator has MIG mode on already, the MIG geometry
// the driver lists. Reads only: the test never changes MIG mode or instances.
TEST_F(GpuTest, NvmlDescribesTheGpuAndItsMigGeometryAsGpumuxdReadsThem) {
  gpumux::node::Device gpu = gpumux::node::RealDevice(0);
  EXPECT_FALSE(gpu.name.empty());
  EXPECT_GT(gpu.memory, 4 * kGiB) << gpu.name;
  EXPECT_EQ(gpu.uuid.rfind("GPU-", 0), 0u) << gpu.uuid;
  const gpumux::node::NvmlLibrary& nvml = gpumux::node::Nvml();
  unsigned current = 0, pending = 0;
  if (!nvml.has_mig() || nvml.get_mig_mode(nvml.Gpu(0), &current, &pending) != 0 || current != 1) {
    GTEST_SKIP() << gpu.name << " (" << gpu.uuid
                 << "): MIG mode is off; its geometry is read only where it is on";
  }
  gpumux::MigGeometry geo = gpumux::node::ReadMigGeometry(0);
  EXPECT_GE(geo.slots, 4);
  EXPECT_GE(geo.compute_slices, 4);
  for (const gpumux::MigProfile& p : geo.profiles) {
    EXPECT_NE(p.name.find('g'), std::string::npos) << p.name;
    EXPECT_GT(p.memory_bytes, 1e9) << p.name;
    EXPECT_FALSE(p.placement_starts.empty()) << p.name;
  }
}

// `gpumux calibrate` on the real GPU: the PTX kernels JIT-compile and measure figures a GPU of its
// kind can reach (bandwidth and tensor-core math below the catalog's peaks, above a third of them).
TEST_F(GpuTest, CalibrateMeasuresTheRealGpu) {
  gpumux::node::Device gpu = gpumux::node::RealDevice(0);
  std::string kind;
  for (const char* k : {"H200", "H100", "A100", "L40S", "L4", "A10"})
    if (kind.empty() && gpu.name.find(k) != std::string::npos) kind = k;
  if (kind.empty()) GTEST_SKIP() << gpu.name << ": no catalog kind to compare with";
  std::string file = (dir_ / "calibration.json").string();
  auto [code, out] = Sh(std::string(GPUMUX_BINARY) + " calibrate --gpu " + kind +
                        " --seconds 0.3 --processes 2 --out " + file + " 2>&1");
  ASSERT_EQ(code, 0) << out;
  std::ifstream in(file);
  nlohmann::json c = nlohmann::json::parse(in);
  std::cout << "[ calibrate ] " << gpu.name << ": " << c.dump() << "\n";
  auto [catalog_code, catalog_out] =
      Sh(std::string(GPUMUX_BINARY) + " explain --gpu " + kind + " --params 1e9 --json");
  ASSERT_EQ(catalog_code, 0) << catalog_out;
  double peak_bandwidth =
      nlohmann::json::parse(catalog_out)["bandwidth_bytes_per_second"].get<double>() /
      nlohmann::json::parse(catalog_out)["bandwidth_fraction"].get<double>();
  double bandwidth = c["bandwidth_bytes_per_second"].get<double>();
  EXPECT_GT(bandwidth, peak_bandwidth / 3) << out;
  EXPECT_LT(bandwidth, peak_bandwidth * 1.02) << out;
  EXPECT_GT(c["flops_per_second"].get<double>(), 50e12) << "tensor-core bf16 math: " << out;
  EXPECT_LT(c["launch_seconds"].get<double>(), 100e-6) << out;
  // Co-runs are time-sliced, or MPS ones where a control daemon runs.
  const char* corun = c["mps_usable"].contains("2") ? "mps_usable" : "timeslice_usable";
  EXPECT_GT(c[corun]["2"].get<double>(), 0.5) << out;
}

// gpumuxd on the real GPU (its NVIDIA backend, not the simulator): it lists the GPU as NVML shows
// it, admits a tenant, and the driver-API client started with the environment it answers takes its
// memory as grants over the tenants' socket and is refused at exactly its quota.
class GpuAgentTest : public gpumux::testing::AgentTest {
 protected:
  void SetUp() override {
    AgentTest::SetUp();
    std::string why = NoGpuReason();
    if (!why.empty()) GTEST_SKIP() << "needs an NVIDIA GPU: " << why;
  }
};

TEST_F(GpuAgentTest, GpumuxdAdmitsATenantOnTheRealGpu) {
  StartRealAgent({});
  nlohmann::json gpus = Call("GET", "/v1/gpus", nullptr, 200)["gpus"];
  ASSERT_FALSE(gpus.empty());
  EXPECT_FALSE(gpus[0]["simulated"].get<bool>()) << gpus;
  EXPECT_TRUE(gpus[0]["healthy"].get<bool>()) << gpus;
  EXPECT_EQ(gpus[0]["uuid"].get<std::string>().rfind("GPU-", 0), 0u) << gpus;
  nlohmann::json admitted =
      Call("POST", "/v1/tenants", {{"id", "gpu-agent"}, {"gpu", 0}, {"memory", "2GiB"}}, 201);
  auto [code, out] =
      Sh(Env(admitted) + GPUMUX_ALLOC_CLIENT + " direct fill " + std::to_string(64 * kMiB) + " 0");
  ASSERT_EQ(code, 0) << out;
  auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["allocated"].get<uint64_t>(), 2 * kGiB) << out;
  EXPECT_EQ(j["last_error"].get<int>(), 2) << out;
  EXPECT_EQ(j["total"].get<uint64_t>(), 2 * kGiB) << out;
  EXPECT_GE(Call("GET", "/v1/tenants/gpu-agent", nullptr, 200)["refused_allocations"].get<int>(),
            1);
}

// An upgrade to a gpumuxd of another ledger layout while a tenant runs: what the tenant's process
// holds is adopted from NVML's running processes (the figure includes its CUDA context).
TEST_F(GpuAgentTest, ALedgerMadeAnewAdoptsWhatARealProcessHolds) {
  StartRealAgent({});
  nlohmann::json admitted =
      Call("POST", "/v1/tenants", {{"id", "kept"}, {"gpu", 0}, {"memory", "2GiB"}}, 201);
  FILE* client = popen((Env(admitted) + GPUMUX_ALLOC_CLIENT + " direct fill " +
                        std::to_string(256 * kMiB) + " 8 2>/dev/null")
                           .c_str(),
                       "r");
  // A real driver takes a moment to make the program's context.
  ASSERT_EQ(AwaitUsage("kept", 2 * kGiB, 5)["used_bytes"].get<uint64_t>(), 2 * kGiB);
  StopAgent(SIGKILL);
  for (const char* ledger : {"/run/gpu0.ledger", "/run/private/gpu0.ledger"})
    gpumux::testing::SetLedgerVersion(dir_.string() + ledger, gpumux::node::kLedgerVersion + 1);
  StartRealAgent({});
  nlohmann::json after = Call("GET", "/v1/tenants/kept", nullptr, 200);
  EXPECT_GE(after["used_bytes"].get<uint64_t>(), 2 * kGiB) << after;
  EXPECT_LE(after["used_bytes"].get<uint64_t>(), 3 * kGiB) << "its context is not that large";
  EXPECT_EQ(after["processes"].size(), 1u) << after;
  char buf[512] = {0};
  fread(buf, 1, sizeof(buf) - 1, client);
  EXPECT_EQ(WEXITSTATUS(pclose(client)), 0) << buf;
}

// On a real GPU the driver counts each process's CUDA context too. A program at its quota through
// the shim stays within its quota and the context allowance (1 GiB), and is left alone; one of
// another tenant with the shim unset that takes what the GPU has left is killed. Prints what the
// context took (device_bytes less used_bytes): the figure --context-allowance must cover.
TEST_F(GpuAgentTest, OnARealGpuAProgramAtItsQuotaIsLeftAloneAndOneAroundTheShimIsKilled) {
  StartRealAgent({});
  nlohmann::json kept =
      Call("POST", "/v1/tenants", {{"id", "kept"}, {"gpu", 0}, {"memory", "2GiB"}}, 201);
  FILE* client = popen((Env(kept) + GPUMUX_ALLOC_CLIENT + " direct fill " +
                        std::to_string(256 * kMiB) + " 6 2>/dev/null")
                           .c_str(),
                       "r");
  ASSERT_EQ(AwaitUsage("kept", 2 * kGiB, 5)["used_bytes"].get<uint64_t>(), 2 * kGiB);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // three checks
  nlohmann::json t = Call("GET", "/v1/tenants/kept", nullptr, 200);
  ASSERT_TRUE(t.contains("device_bytes")) << "NVML lists the process: " << t;
  const uint64_t device = t["device_bytes"].get<uint64_t>(), used = t["used_bytes"].get<uint64_t>();
  const uint64_t context = device > used ? device - used : 0;
  std::printf("a CUDA context beside 2 GiB allocated: %.0f MiB (device_bytes %llu)\n",
              double(context) / double(kMiB), static_cast<unsigned long long>(device));
  EXPECT_LE(context, kGiB) << "the default allowance covers it: " << t;
  EXPECT_EQ(t["memory_kills"].get<uint64_t>(), 0u) << t;
  nlohmann::json around =
      Call("POST", "/v1/tenants", {{"id", "around"}, {"gpu", 0}, {"memory", "1GiB"}}, 201);
  uint64_t started_ns = gpumux::NowNs();
  auto [code, out] = Sh(Env(around) + "LD_PRELOAD= " + GPUMUX_ALLOC_CLIENT + " direct fill " +
                        std::to_string(4 * kGiB) + " 20 >/dev/null 2>&1; echo exit=$?");
  double seconds = double(gpumux::NowNs() - started_ns) / 1e9;
  EXPECT_NE(out.find("exit=137"), std::string::npos) << out << " after " << seconds << " s";
  std::printf("a program around the shim killed after %.2f s\n", seconds);
  EXPECT_EQ(Call("GET", "/v1/tenants/around", nullptr, 200)["memory_kills"].get<uint64_t>(), 1u);
  char buf[512] = {0};
  fread(buf, 1, sizeof(buf) - 1, client);
  EXPECT_EQ(WEXITSTATUS(pclose(client)), 0) << "the program at its quota ran on: " << buf;
}

// On a driver of release 615 or later with cgroup v2 (issue 42): a pod's program around the shim is
// refused by the driver at its group's limit (the quota plus a tenant's 4 GiB context allowance)
// and runs on, where the test above sees one killed. Prints what the driver let it take.
TEST_F(GpuAgentTest, OnAnR615DriverAProgramAroundTheShimIsRefusedByTheDriverNotKilled) {
  StartRealAgent({});
  nlohmann::json gpu = Call("GET", "/v1/gpus", nullptr, 200)["gpus"][0];
  if (gpu["memory_enforcement"] != "driver")
    GTEST_SKIP() << "the driver limits no cgroup's memory here (R615+ and cgroup v2 needed): "
                 << gpu["memory_enforcement"];
  const std::string pod = "pod" + std::to_string(getpid());
  std::filesystem::path group = gpumux::testing::MakeV2Group(pod);
  if (group.empty()) GTEST_SKIP() << "no writable cgroup v2 hierarchy";
  nlohmann::json t = Call("POST", "/v1/tenants",
                          {{"id", "pod"}, {"gpu", 0}, {"memory", 2 * kGiB}, {"cgroup", pod}}, 201);
  const std::string in_group = gpumux::testing::InGroup(group);
  FILE* under = popen((in_group + Env(t) + GPUMUX_ALLOC_CLIENT + " direct fill " +
                       std::to_string(256 * kMiB) + " 8 2>/dev/null")
                          .c_str(),
                      "r");
  ASSERT_EQ(AwaitUsage("pod", 2 * kGiB, 5)["used_bytes"].get<uint64_t>(), 2 * kGiB);
  nlohmann::json held = Call("GET", "/v1/tenants/pod", nullptr, 200);
  ASSERT_EQ(held.value("driver_limit_bytes", uint64_t(0)), 6 * kGiB) << held;
  auto [code, out] = Sh(in_group + Env(t) + "LD_PRELOAD= GPUMUX_TENANT=pod " + GPUMUX_ALLOC_CLIENT +
                        " direct fill " + std::to_string(256 * kMiB) + " 2 2>/dev/null");
  EXPECT_EQ(code, 0) << "not killed: " << out;
  nlohmann::json around = nlohmann::json::parse(out);
  std::printf(
      "around the shim in a 6 GiB group holding 2 GiB: took %.0f MiB, cuMemGetInfo total "
      "%.0f MiB\n",
      double(around["allocated"].get<uint64_t>()) / double(kMiB),
      double(around["total"].get<uint64_t>()) / double(kMiB));
  EXPECT_LE(around["allocated"].get<uint64_t>(), 4 * kGiB) << out;
  EXPECT_EQ(around["last_error"].get<int>(), 2) << "CUDA_ERROR_OUT_OF_MEMORY: " << out;
  EXPECT_EQ(Call("GET", "/v1/tenants/pod", nullptr, 200)["memory_kills"].get<uint64_t>(), 0u);
  EXPECT_EQ(WEXITSTATUS(pclose(under)), 0);
  Call("DELETE", "/v1/tenants/pod", nullptr, 200);
  gpumux::testing::RemoveV2Group(group);
}

// Under gpumuxd the compute cap is measured and enforced by gpumuxd itself (its NVML meter reads
// every process's samples; the tenant's shim only follows the gate).
TEST_F(GpuAgentTest, GpumuxdHoldsAPyTorchTenantToItsComputeCap) {
  if (Sh("python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null").first != 0)
    GTEST_SKIP() << "PyTorch with CUDA is not installed";
  StartRealAgent({});
  std::string path = (dir_ / "busy.py").string();
  FILE* f = std::fopen(path.c_str(), "w");
  std::fputs(kBusyMatmuls, f);
  std::fclose(f);
  auto run = [&](const std::string& id, const nlohmann::json& limits) {
    nlohmann::json admit = {{"id", id}, {"gpu", 0}, {"memory", "4GiB"}};
    admit.update(limits);
    nlohmann::json admitted = Call("POST", "/v1/tenants", admit, 201);
    auto [code, out] = Sh(Env(admitted) + "python3 " + path + " 2>/dev/null");
    EXPECT_EQ(code, 0) << out;
    return nlohmann::json::parse(out.substr(out.find('{')));
  };
  nlohmann::json alone = run("uncapped", nlohmann::json::object()),
                 capped = run("capped", {{"compute", "30%"}});
  double solo_ms = alone["mean_ms"].get<double>();
  nlohmann::json tenant = Call("GET", "/v1/tenants/capped", nullptr, 200);
  std::printf("gpumuxd: uncapped share %.3f, 30%% cap share %.3f, gpu_time_s %.2f\n",
              GpuShare(alone, solo_ms), GpuShare(capped, solo_ms),
              tenant["gpu_time_s"].get<double>());
  EXPECT_GT(GpuShare(alone, solo_ms), 0.6) << "uncapped, not held: " << alone;
  EXPECT_NEAR(GpuShare(capped, solo_ms), 0.30, 0.10)
      << "uncapped " << alone << ", capped " << capped;
  EXPECT_GT(tenant["gpu_time_s"].get<double>(), 1.0) << "gpumuxd measured its GPU time: " << tenant;
}

}  // namespace
