// A catalog file (`--catalog FILE`): GPU kinds, MIG geometry, models.
#include <cstdint>

#include "core/catalog.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string path = gpumux::fuzz::InputFile(data, size, ".yaml");
  gpumux::fuzz::RefusesOnlyWithError([&] {
    gpumux::Catalog catalog;
    catalog.AddFile(path);
  });
  return 0;
}
