// A ledger file whose bytes may be anything (one user's own ledger under `gpumux run`, a file
// gpumuxd finds at start): opened, read as `gpumux status`, gpumuxd and a tenant's view read it,
// and worked on as the reclaimer, the governors and gpumuxd's compute tick work on it. Every index
// read from the file must be checked before use. Also a tenant's activity file (whatever bytes the
// tenant wrote there), read as gpumuxd reads it.
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "fuzz_support.h"
#include "node/ledger/activity.h"
#include "node/ledger/ledger.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string path = gpumux::fuzz::InputFile(data, size, ".ledger");
  gpumux::fuzz::RefusesOnlyWithError([&] {
    gpumux::node::Ledger ledger = gpumux::node::Ledger::Open(path);
    ledger.Snapshot();
    ledger.gpu_name();
    ledger.Intact();
    ledger.FindTenant("a");
    ledger.ReclaimDead();
    for (int process : {0, 1, gpumux::node::kMaxProcesses - 1}) {
      int tenant = ledger.ProcessTenant(process);
      ledger.TenantUsed(tenant);
      ledger.TenantQuota(tenant);
      ledger.ComputeTick(process, 1'000'000'000, 1000, true);
      ledger.CountHeld(process);
      if (ledger.ReserveUpTo(process, 4096, 1)) ledger.Release(process, 1);
    }
    for (int tenant : {0, 1, gpumux::node::kMaxTenants - 1}) {
      ledger.TenantComputeTick(tenant, 1'000'000'000, 1000, true);
      ledger.SetGate(tenant, true);
      ledger.TenantId(tenant);
    }
    std::vector<std::pair<pid_t, int>> pids;
    ledger.ProcessTenants(&pids);
    ledger.Snapshot();
    gpumux::node::Ledger view = gpumux::node::Ledger::OpenReadOnly(path);
    view.Gate(0);
    ledger.CopyProcessesFrom(view);  // a view made from an authority whatever it holds
  });
  gpumux::fuzz::RefusesOnlyWithError([&] {
    gpumux::node::ActivityReader activity;
    int fd = activity.Share();  // as a tenant's process holds it: it writes what it likes
    (void)!pwrite(fd, data, std::min(size, sizeof(gpumux::node::ActivityWords)), 0);
    close(fd);
    for (int gpu = -1; gpu <= gpumux::node::kMaxTenantGpus; ++gpu) activity.Read(gpu);
  });
  return 0;
}
