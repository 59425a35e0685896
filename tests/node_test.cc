// The node runtime end to end on the simulated GPU: `gpumux run` starts tenant programs under the
// shim; the quota holds however the program reaches the driver, across processes and threads, and
// a killed tenant's memory goes back to the pool.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "node/ledger/ledger.h"
#include "node_fixture.h"

namespace {

using gpumux::testing::kGiB;
using gpumux::testing::kMiB;
using gpumux::testing::NodeTest;
const std::string kClient = GPUMUX_ALLOC_CLIENT;
const std::string kGpumux = GPUMUX_BINARY;

// `gpumux run` of the allocation client with a memory quota.
std::string RunAlloc(const std::string& tenant, const std::string& mem,
                     const std::string& client_args) {
  return NodeTest::Launch(tenant, "--mem " + mem, kClient + " " + client_args);
}

TEST_F(NodeTest, RefusedAtExactlyTheQuotaHoweverTheDriverIsReached) {
  for (const char* binding : {"direct", "dlopen", "procaddr"}) {
    auto [code, out] =
        Sh(RunAlloc(std::string("t-") + binding, "1GiB",
                    std::string(binding) + " fill " + std::to_string(64 * kMiB) + " 0"));
    ASSERT_EQ(code, 0) << binding << ": " << out;
    auto j = nlohmann::json::parse(out);
    EXPECT_EQ(j["allocated"].get<uint64_t>(), kGiB) << binding;
    EXPECT_EQ(j["last_error"].get<int>(), 2) << binding << ": CUDA_ERROR_OUT_OF_MEMORY";
    EXPECT_EQ(j["total"].get<uint64_t>(), kGiB)
        << binding << ": cuMemGetInfo shows the quota as the device";
    EXPECT_EQ(j["free"].get<uint64_t>(), 0u) << binding;
  }
}

TEST_F(NodeTest, EveryAllocationPathCountsAndNvmlShowsOnlyTheTenant) {
  // A neighbour holds 2 GiB meanwhile: NVML inside the tenant must not show its process or memory.
  FILE* neighbour = popen(
      (RunAlloc("neighbour", "2GiB", "direct fill " + std::to_string(kGiB) + " 3") + " 2>/dev/null")
          .c_str(),
      "r");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  auto [code, out] = Sh(RunAlloc("mixed", "1GiB", "direct mixed " + std::to_string(64 * kMiB)));
  pclose(neighbour);
  ASSERT_EQ(code, 0) << out;
  auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["allocated"].get<uint64_t>(), kGiB)
      << "plain, async, pool, managed, VMM, 2D/3D/mipmapped array allocations all count";
  EXPECT_EQ(j["last_error"].get<int>(), 2);
  EXPECT_EQ(j["nvml_held"]["total"].get<uint64_t>(), kGiB);
  EXPECT_EQ(j["nvml_held"]["used"].get<uint64_t>(), kGiB);
  EXPECT_EQ(j["nvml_held"]["processes"].get<int>(), 1) << "the neighbour's process is hidden";
  EXPECT_EQ(j["nvml_freed"]["used"].get<uint64_t>(), 0u)
      << "every free path returns the reservation";
}

TEST_F(NodeTest, OneTenantOverQuotaLeavesItsNeighbourUntouched) {
  // Both run at once on one simulated H100; the small one is refused at 1 GiB, the other gets 3.
  FILE* a = popen(
      (RunAlloc("small", "1GiB", "direct fill " + std::to_string(128 * kMiB) + " 1") + " 2>&1")
          .c_str(),
      "r");
  FILE* b = popen(
      (RunAlloc("big", "3GiB", "direct fill " + std::to_string(128 * kMiB) + " 1") + " 2>/dev/null")
          .c_str(),
      "r");
  std::array<char, 4096> buf;
  std::string out_a, out_b;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), a)) > 0) out_a.append(buf.data(), n);
  while ((n = fread(buf.data(), 1, buf.size(), b)) > 0) out_b.append(buf.data(), n);
  EXPECT_EQ(WEXITSTATUS(pclose(a)), 0);
  EXPECT_EQ(WEXITSTATUS(pclose(b)), 0);
  EXPECT_NE(out_a.find("gpumux: tenant 'small' refused cuMemAlloc of 134217728 bytes: 1073741824 "
                       "of its 1073741824-byte quota in use"),
            std::string::npos)
      << out_a;
  auto ja = nlohmann::json::parse(out_a.substr(out_a.find('{')));
  auto jb = nlohmann::json::parse(out_b);
  EXPECT_EQ(ja["allocated"].get<uint64_t>(), kGiB);
  EXPECT_EQ(jb["allocated"].get<uint64_t>(), 3 * kGiB);
  // Both exited: their tenants are gone from the ledger.
  auto [code, status] = Sh(kGpumux + " status --json");
  EXPECT_TRUE(nlohmann::json::parse(status)["tenants"].empty()) << status;
}

TEST_F(NodeTest, AKilledTenantsMemoryReturnsWithinASecond) {
  pid_t launcher = fork();
  if (launcher == 0) {
    std::string cmd =
        RunAlloc("crashy", "2GiB", "direct fill " + std::to_string(256 * kMiB) + " 60") +
        " >/dev/null 2>&1";
    execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
    _exit(127);
  }
  std::string path = gpumux::node::LedgerPath(0);
  pid_t client = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!client && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (!std::filesystem::exists(path)) continue;
    for (const auto& u : gpumux::node::Ledger::Open(path).Snapshot()) {
      if (u.id == "crashy" && u.used == 2 * kGiB && !u.processes.empty())
        client = u.processes[0].first;
    }
  }
  ASSERT_GT(client, 0) << "the tenant never held its 2 GiB";
  gpumux::node::Ledger ledger = gpumux::node::Ledger::Open(path);
  auto killed = std::chrono::steady_clock::now();
  kill(client, SIGKILL);
  bool returned = false;
  while (!returned && std::chrono::steady_clock::now() - killed < std::chrono::seconds(1)) {
    returned = true;
    for (const auto& u : ledger.Snapshot()) {
      if (u.id == "crashy" && u.used > 0) returned = false;
    }
    if (!returned) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(returned) << "2 GiB still held 1 s after SIGKILL";
  int status = 0;
  waitpid(launcher, &status, 0);
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGKILL) << "gpumux run reports the signal";
}

TEST_F(NodeTest, EightProcessesOfEightThreadsNeverOvershootAndEndAtZero) {
  // The tenant is registered here and its processes started with the shim's environment directly,
  // so the ledger can be sampled throughout and read after they all exit.
  std::string path = gpumux::node::LedgerPath(0);
  const uint64_t quota = 512 * kMiB;
  gpumux::node::Ledger ledger =
      gpumux::node::Ledger::CreateOrOpen(path, 80 * kGiB, "H100 (race test)");
  int tenant = ledger.AddTenant("racy", {quota});
  std::string env = "LD_PRELOAD=" + std::string(GPUMUX_SHIM) +
                    " LD_LIBRARY_PATH=" + std::string(GPUMUX_SIM_DIR) + " GPUMUX_LEDGER=" + path +
                    " GPUMUX_TENANT=racy GPUMUX_SIM_MEMORY=" + std::to_string(80 * kGiB) +
                    " GPUMUX_SIM_STATE=" + (dir_ / "sim.state").string();
  std::string cmd = "for i in 1 2 3 4 5 6 7 8; do env " + env + " " + kClient +
                    " direct race 8 10 " + std::to_string(96 * kMiB) + " & done; wait";
  std::atomic<bool> done{false};
  std::thread runner([&] {
    Sh(cmd);
    done = true;
  });
  uint64_t max_seen = 0, samples = 0;
  while (!done) {
    max_seen = std::max(max_seen, ledger.TenantUsed(tenant));
    ++samples;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  runner.join();
  EXPECT_GT(samples, 1000u);
  EXPECT_LE(max_seen, quota);
  EXPECT_GT(max_seen, quota / 2) << "the processes did press against the quota";
  EXPECT_EQ(ledger.TenantUsed(tenant), 0u) << "every reservation was released";
  EXPECT_GT(ledger.Snapshot()[0].refused, 0u);
}

// After an upgrade of gpumux the ledger an older one left cannot be read: `gpumux run` makes it
// anew once no process uses it, and until then refuses, naming the process.
TEST_F(NodeTest, ALedgerOfAnotherVersionIsMadeAnewOnceNoProcessUsesIt) {
  const std::string path = (dir_ / "gpu0.ledger").string();
  { gpumux::node::Ledger::CreateOrOpen(path, 80 * kGiB, "NVIDIA H100 80GB HBM3"); }
  gpumux::testing::SetLedgerVersion(path, gpumux::node::kLedgerVersion - 1);
  // A tenant of the older gpumux still maps it: here, this process.
  int fd = open(path.c_str(), O_RDONLY);
  void* mapped = mmap(nullptr, 4096, PROT_READ, MAP_SHARED, fd, 0);
  ASSERT_NE(mapped, MAP_FAILED);
  gpumux::testing::ShellResult busy =
      gpumux::testing::Shell(kGpumux + " run --sim H100 --mem 1GiB -- true 2>&1");
  EXPECT_EQ(busy.exit_code, 2) << busy.out;
  EXPECT_NE(busy.out.find("process " + std::to_string(getpid()) + " still uses it"),
            std::string::npos)
      << busy.out;
  munmap(mapped, 4096);
  close(fd);
  gpumux::testing::ShellResult run =
      gpumux::testing::Shell(kGpumux + " run --sim H100 --mem 1GiB -- true 2>&1");
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_NE(run.out.find("no process uses it: made anew"), std::string::npos) << run.out;
  EXPECT_NO_THROW(gpumux::node::Ledger::Open(path)) << "this version's ledger now";
}

// Runs started together over one stale ledger agree: one makes it anew, the others open that one.
TEST_F(NodeTest, RunsThatFindOneStaleLedgerTogetherAllStart) {
  const std::string path = (dir_ / "gpu0.ledger").string();
  { gpumux::node::Ledger::CreateOrOpen(path, 80 * kGiB, "NVIDIA H100 80GB HBM3"); }
  gpumux::testing::SetLedgerVersion(path, gpumux::node::kLedgerVersion - 1);
  std::string runs, pids;
  for (int i = 0; i < 4; ++i) {
    runs += kGpumux + " run --sim H100 --mem 1GiB --tenant t" + std::to_string(i) +
            " -- sleep 0.3 2>&1 & p" + std::to_string(i) + "=$!; ";
    pids += " $p" + std::to_string(i);
  }
  gpumux::testing::ShellResult r =
      gpumux::testing::Shell("fails=0; " + runs + "for p in" + pids +
                             "; do wait $p || fails=$((fails+1)); done; " + "echo fails=$fails");
  EXPECT_NE(r.out.find("fails=0"), std::string::npos) << r.out;
  size_t anew = 0;
  for (size_t at = r.out.find("made anew"); at != std::string::npos;
       at = r.out.find("made anew", at + 1))
    ++anew;
  EXPECT_EQ(anew, 1u) << r.out;
}

TEST_F(NodeTest, BadInputIsRefusedBeforeAnythingStarts) {
  auto [code1, out1] = Sh(kGpumux + " run --sim H1000 --mem 1GiB -- true 2>&1");
  EXPECT_EQ(code1, 2);
  auto [code2, out2] = Sh(kGpumux + " run --sim L4 --mem 30GiB -- true");
  EXPECT_EQ(code2, 2) << "quota over the L4's 24 GiB";
  auto [code3, out3] = Sh(kGpumux + " run --sim L4 --mem lots -- true");
  EXPECT_EQ(code3, 2);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "gpu0.ledger"))
      << "nothing was created for refused input";
}

}  // namespace
