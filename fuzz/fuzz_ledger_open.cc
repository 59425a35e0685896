// Opening a ledger file whose bytes anyone could have written, and reading it as `gpumux status`
// and gpumuxd do.
#include <cstdint>

#include "fuzz_support.h"
#include "node/ledger/ledger.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string path = gpumux::fuzz::InputFile(data, size, ".ledger");
  gpumux::fuzz::RefusesOnlyWithError([&] {
    gpumux::node::Ledger ledger = gpumux::node::Ledger::Open(path);
    ledger.Snapshot();
    ledger.gpu_name();
  });
  return 0;
}
