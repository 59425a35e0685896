#include "node/ledger/ledger.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "base/error_test_support.h"
#include "node/ledger/activity.h"

namespace gpumux::node {
namespace {

std::string FreshPath(const std::string& name) {
  auto dir =
      std::filesystem::temp_directory_path() / ("gpumux_ledger_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::filesystem::remove(dir / name);
  return (dir / name).string();
}

constexpr uint64_t kGiB = 1ull << 30;

TEST(Ledger, CreatesOpensAndRefusesForeignOrTruncatedFiles) {
  std::string path = FreshPath("a.ledger");
  {
    Ledger l = Ledger::CreateOrOpen(path, 80 * kGiB, "H100");
    l.AddTenant("t1", {kGiB});
  }
  Ledger again = Ledger::Open(path);
  EXPECT_EQ(again.capacity(), 80 * kGiB);
  EXPECT_TRUE(again.FindTenant("t1"));
  std::string foreign = FreshPath("foreign.ledger");
  std::ofstream(foreign) << std::string(sizeof(LedgerLayout), 'x');
  EXPECT_EQ(ErrorCodeOf([&] { Ledger::Open(foreign); }), ErrorCode::kBadInput);
  std::string truncated = FreshPath("short.ledger");
  std::ofstream(truncated) << "abc";
  try {
    Ledger::Open(truncated);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadInput);
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
  EXPECT_EQ(ErrorCodeOf([&] { Ledger::Open(FreshPath("missing.ledger")); }),
            ErrorCode::kUnavailable);
}

// /dev/shm/gpumux-UID is a name any user can take first: a folder that is not the user's alone, or
// a link at the ledger's path, is refused before anything is read or written there.
TEST(Ledger, AFolderAnotherUserCouldWriteOrOwnAndALinkAreRefused) {
  namespace fs = std::filesystem;
  fs::path dir = fs::path(FreshPath("taken")) / "gpumux-1000";
  fs::create_directories(dir);
  fs::permissions(dir, fs::perms::all);  // 0777: as another user would leave it for the victim
  std::string path = (dir / "gpu0.ledger").string();
  EXPECT_EQ(ErrorCodeOf([&] { Ledger::CreateOrOpen(path, 80 * kGiB, "H100"); }),
            ErrorCode::kUnavailable);
  EXPECT_FALSE(fs::exists(path)) << "nothing made in a folder others may write";
  fs::permissions(dir, fs::perms::owner_all);
  std::string mine = FreshPath("mine.txt");
  std::ofstream(mine).flush();  // an empty file of the user's, which a ledger would be written into
  fs::create_symlink(mine, path);
  EXPECT_EQ(ErrorCodeOf([&] { Ledger::CreateOrOpen(path, 80 * kGiB, "H100"); }),
            ErrorCode::kUnavailable);
  EXPECT_EQ(fs::file_size(mine), 0u) << "the ledger was written through the link";
  fs::remove(path);
  if (geteuid() == 0) {
    ASSERT_EQ(chown(dir.c_str(), 65534, 65534), 0);
    EXPECT_EQ(ErrorCodeOf([&] { Ledger::CreateOrOpen(path, 80 * kGiB, "H100"); }),
              ErrorCode::kUnavailable)
        << "a folder another user owns";
    ASSERT_EQ(chown(dir.c_str(), 0, 0), 0);
    // A sticky folder open to all (as /tmp is) takes the user's own ledger, not a file another
    // user placed there first.
    fs::permissions(dir, fs::perms::all | fs::perms::sticky_bit);
    std::ofstream(path).flush();
    ASSERT_EQ(chown(path.c_str(), 65534, 65534), 0);
    EXPECT_EQ(ErrorCodeOf([&] { Ledger::CreateOrOpen(path, 80 * kGiB, "H100"); }),
              ErrorCode::kUnavailable)
        << "a ledger file another user placed";
    fs::remove(path);
    EXPECT_EQ(Ledger::CreateOrOpen(path, 80 * kGiB, "H100").capacity(), 80 * kGiB)
        << "the user's own, in a sticky folder";
    fs::remove(path);
    fs::permissions(dir, fs::perms::owner_all);
  }
  Ledger l = Ledger::CreateOrOpen(path, 80 * kGiB, "H100");  // the user's own folder: fine
  EXPECT_EQ(l.capacity(), 80 * kGiB);
}

TEST(Ledger, ReservesUpToTheQuotaExactly) {
  Ledger l = Ledger::CreateOrOpen(FreshPath("b.ledger"), 80 * kGiB, "H100");
  int t = l.AddTenant("t", {3 * kGiB});
  int p = l.RegisterProcess(t);
  EXPECT_TRUE(l.TryReserve(p, 2 * kGiB));
  EXPECT_FALSE(l.TryReserve(p, kGiB + 1));
  EXPECT_TRUE(l.TryReserve(p, kGiB));
  EXPECT_EQ(l.TenantUsed(t), 3 * kGiB);
  l.Release(p, 2 * kGiB);
  EXPECT_EQ(l.TenantUsed(t), kGiB);
  EXPECT_EQ(l.Snapshot()[0].refused, 1u);
}

TEST(Ledger, AdoptedMemoryCountsPastTheQuotaAndHoldsReservationsUntilItIsFreed) {
  Ledger l = Ledger::CreateOrOpen(FreshPath("adopt.ledger"), 80 * kGiB, "H100");
  int t = l.AddTenant("t", {2 * kGiB});
  int p = l.RegisterProcess(t);
  l.Adopt(p, 3 * kGiB);  // what the driver says it holds: more than the quota
  EXPECT_EQ(l.TenantUsed(t), 3 * kGiB);
  EXPECT_EQ(l.ProcessUsed(p), 3 * kGiB);
  EXPECT_FALSE(l.TryReserve(p, 1)) << "over its quota, it is granted nothing";
  l.Release(p, 2 * kGiB);  // it frees what it held
  EXPECT_TRUE(l.TryReserve(p, kGiB));
  EXPECT_EQ(l.TenantUsed(t), 2 * kGiB);
  l.UnregisterProcess(p);
  EXPECT_EQ(l.TenantUsed(t), 0u) << "what it held leaves with it";
}

TEST(Ledger, StrictModeRefusesQuotasPastTheDevice) {
  Ledger l = Ledger::CreateOrOpen(FreshPath("c.ledger"), 10 * kGiB, "L4");
  l.AddTenant("a", {6 * kGiB}, true);
  EXPECT_EQ(ErrorCodeOf([&] { l.AddTenant("b", {5 * kGiB}, true); }), ErrorCode::kDoesNotFit);
  EXPECT_NO_THROW(l.AddTenant("b", {5 * kGiB}, false))
      << "oversubscription is allowed unless strict";
}

TEST(Ledger, ConcurrentReservationsNeverOvershoot) {
  Ledger l = Ledger::CreateOrOpen(FreshPath("d.ledger"), 80 * kGiB, "H100");
  const uint64_t quota = 1000;
  int t = l.AddTenant("t", {quota});
  int p = l.RegisterProcess(t);
  std::atomic<bool> over{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      for (int k = 0; k < 200000; ++k) {
        uint64_t bytes = 1 + (k * 7 + i) % 300;
        if (l.TryReserve(p, bytes)) {
          if (l.TenantUsed(t) > quota) over = true;
          l.Release(p, bytes);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_FALSE(over);
  EXPECT_EQ(l.TenantUsed(t), 0u);
}

TEST(Ledger, ReclaimsWhatAKilledProcessHeld) {
  std::string path = FreshPath("e.ledger");
  Ledger l = Ledger::CreateOrOpen(path, 80 * kGiB, "H100");
  int t = l.AddTenant("t", {10 * kGiB});
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t child = fork();
  if (child == 0) {
    Ledger mine = Ledger::Open(path);
    int p = mine.RegisterProcess(t);
    bool ok = mine.TryReserve(p, 4 * kGiB);
    char c = ok ? 'y' : 'n';
    (void)!write(fds[1], &c, 1);
    pause();
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(read(fds[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  EXPECT_EQ(l.TenantUsed(t), 4 * kGiB);
  EXPECT_EQ(l.ReclaimDead(), 0u) << "a live process keeps its memory";
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  EXPECT_EQ(l.ReclaimDead(), 4 * kGiB);
  EXPECT_EQ(l.TenantUsed(t), 0u);
  EXPECT_EQ(l.Snapshot()[0].reclaimed, 4 * kGiB);
  EXPECT_EQ(l.ReclaimDead(), 0u) << "reclaimed exactly once";
}

TEST(Ledger, AReusedPidIsNotMistakenForTheDeadProcess) {
  std::string path = FreshPath("f.ledger");
  Ledger l = Ledger::CreateOrOpen(path, 80 * kGiB, "H100");
  int t = l.AddTenant("t", {10 * kGiB});
  int p = l.RegisterProcess(t);  // this live process
  ASSERT_TRUE(l.TryReserve(p, kGiB));
  EXPECT_EQ(l.ReclaimDead(), 0u);
  // Rewrite the slot's start time through a second mapping: the recorded process is now one that
  // started at another time, i.e. a dead process whose pid was reused by this one.
  int fd = open(path.c_str(), O_RDWR);
  auto* layout = static_cast<LedgerLayout*>(
      mmap(nullptr, sizeof(LedgerLayout), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  ASSERT_NE(layout, MAP_FAILED);
  layout->processes[p].start_time += 1;
  EXPECT_EQ(l.ReclaimDead(), kGiB);
  EXPECT_EQ(l.TenantUsed(t), 0u);
  munmap(layout, sizeof(LedgerLayout));
  close(fd);
}

}  // namespace
}  // namespace gpumux::node

namespace gpumux::node {
namespace {

TEST(Ledger, ATenantsProcessTableFillsAtItsOwnBoundAndNotItsNeighbours) {
  std::string path = FreshPath("bound.ledger");
  Ledger l = Ledger::CreateOrOpen(path, 80 * kGiB, "H100");
  int greedy = l.AddTenant("greedy", {kGiB}), other = l.AddTenant("other", {kGiB});
  // This process stands for every registration (a live pid); the bound counts slots.
  for (int i = 0; i < kMaxProcessesPerTenant; ++i) l.RegisterProcess(greedy);
  EXPECT_EQ(ErrorCodeOf([&] { l.RegisterProcess(greedy); }), ErrorCode::kDoesNotFit);
  EXPECT_NO_THROW(l.RegisterProcess(other)) << "the neighbour's table is its own";
}

TEST(Ledger, AViewOpenedReadOnlyShowsWhatTheWriterSets) {
  std::string path = FreshPath("view.ledger");
  Ledger writer = Ledger::CreateOrOpen(path, 80 * kGiB, "H100");
  int t = writer.AddTenant("t", {2 * kGiB});
  Ledger view = Ledger::OpenReadOnly(path);
  EXPECT_FALSE(view.Gate(t));
  writer.SetGate(t, true);
  writer.SetTenantUsed(t, kGiB);
  EXPECT_TRUE(view.Gate(t));
  EXPECT_EQ(view.TenantUsed(t), kGiB);
  EXPECT_EQ(view.TenantQuota(t), 2 * kGiB);
  EXPECT_FALSE(view.Gate(kMaxTenants)) << "out of range reads as open, not as a fault";
}

TEST(Ledger, TenantComputeTickHoldsATenantOverItsCapWithoutAnyProcessOfIts) {
  std::string path = FreshPath("tenant_tick.ledger");
  Ledger l = Ledger::CreateOrOpen(path, 80 * kGiB, "H100");
  TenantLimits capped{kGiB, 200};  // 20%
  int t = l.AddTenant("capped", capped);
  uint64_t start = l.Snapshot()[0].added_ns;
  // 5 ms of GPU time in its first 5 ms: five times its 20%.
  EXPECT_TRUE(l.TenantComputeTick(t, start + 5'000'000, 5'000'000, true).hold);
  EXPECT_TRUE(l.TenantComputeTick(kMaxTenants, start, 0, true).hold) << "no such slot";
}

TEST(Activity, WhatATenantCountsIsReadGpuByGpu) {
  ActivityReader reader;
  {
    ActivityWriter writer(reader.Share());
    writer.Tick(0);
    writer.Tick(0);
    writer.Tick(1);
    writer.burst(1)->stamp_ns = 42;
    writer.CountHeld();
  }
  EXPECT_EQ(reader.Read(0).active_ticks, 2u);
  EXPECT_EQ(reader.Read(0).burst.stamp_ns, 0u) << "its bursts on its second GPU only";
  EXPECT_EQ(reader.Read(1).active_ticks, 1u);
  EXPECT_EQ(reader.Read(1).burst.stamp_ns, 42u);
  EXPECT_EQ(reader.Read(0).held, 1u);
  EXPECT_EQ(reader.Read(kMaxTenantGpus).active_ticks, 0u) << "no such GPU";
  EXPECT_EQ(reader.Read(-1).active_ticks, 0u);
}

// What a tenant's process holds is a memory file sealed at its size: it can write its counts, but
// not make it take more room (or less) or lift the seals, however it tries.
TEST(Activity, AProcessHoldingItCanNeitherGrowNorShrinkNorUnsealIt) {
  ActivityReader reader;
  int fd = reader.Share();
  ASSERT_GE(fd, 0);
  struct stat st;
  ASSERT_EQ(fstat(fd, &st), 0);
  EXPECT_EQ(size_t(st.st_size), sizeof(ActivityWords));
  EXPECT_GE(uint64_t(st.st_blocks) * 512, sizeof(ActivityWords)) << "allocated up front";
  EXPECT_NE(ftruncate(fd, 64 << 20), 0);
  EXPECT_NE(ftruncate(fd, 0), 0);
  EXPECT_NE(fallocate(fd, 0, 0, 64 << 20), 0);
  EXPECT_NE(fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 64 << 20), 0) << "no blocks past its size";
  EXPECT_NE(pwrite(fd, "x", 1, 64 << 20), 1) << "no write past its end";
  EXPECT_NE(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE), 0) << "its seals are sealed";
  ASSERT_EQ(fstat(fd, &st), 0);
  EXPECT_EQ(size_t(st.st_size), sizeof(ActivityWords));
  EXPECT_LE(uint64_t(st.st_blocks) * 512, uint64_t(sizeof(ActivityWords)) + 4096);
  const uint64_t ticks = 5;
  EXPECT_EQ(pwrite(fd, &ticks, sizeof(ticks), offsetof(ActivityWords, active_ticks)),
            ssize_t(sizeof(ticks)))
      << "its counts are its to write";
  EXPECT_EQ(reader.Read(0).active_ticks, 5u);
  close(fd);
}

// A restarted gpumuxd finds the file among the descriptors of a process that holds it; a file of
// the same name that is not sealed so, or not of its size, is not taken for it.
TEST(Activity, TheFileAProcessHoldsIsFoundAfterARestartAndNoLookAlikeIs) {
  int fake = memfd_create("gpumux-activity", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_GE(fake, 0);
  ASSERT_EQ(ftruncate(fake, sizeof(ActivityWords)), 0);  // the size, but growable
  EXPECT_EQ(ActivityReader::FoundIn(getpid()), nullptr) << "an unsealed look-alike";
  auto reader = std::make_unique<ActivityReader>();
  ActivityWriter writer(reader->Share());
  reader.reset();  // gpumuxd exits; the process keeps its file
  writer.Tick(0);
  std::unique_ptr<ActivityReader> found = ActivityReader::FoundIn(getpid());
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found->Read(0).active_ticks, 1u);
  writer.Tick(0);
  EXPECT_EQ(found->Read(0).active_ticks, 2u) << "the same file, not a copy";
  EXPECT_EQ(ActivityReader::FoundIn(999999999), nullptr) << "no such process";
  close(fake);
}

}  // namespace
}  // namespace gpumux::node
