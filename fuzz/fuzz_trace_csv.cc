// The openb trace CSVs `gpumux fleet simulate` reads: the node list and the pod list.
#include <cstdint>

#include "fleet/trace.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string path = gpumux::fuzz::InputFile(data, size, ".csv");
  gpumux::fuzz::RefusesOnlyWithError([&] { gpumux::fleet::LoadNodes(path); });
  gpumux::fuzz::RefusesOnlyWithError([&] { gpumux::fleet::LoadPods(path); });
  return 0;
}
