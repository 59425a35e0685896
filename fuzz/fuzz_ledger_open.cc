// A ledger file whose bytes anyone could have written (under gpumuxd the shared ledger is mode
// 0666): opened, read as `gpumux status` and gpumuxd read it, and worked on as gpumuxd's reclaimer
// and a tenant's governor work on it. Every index read from the file must be checked before use.
#include <sys/types.h>

#include <cstdint>

#include "fuzz_support.h"
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
    ledger.Snapshot();
  });
  return 0;
}
