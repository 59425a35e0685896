// What every fuzz harness shares: the input as a file (for loaders that take a path), and the rule
// that a loader may refuse input only with gpumux::Error; anything else it throws is a finding.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "base/error.h"

namespace gpumux::fuzz {

// Writes the input to a file of this process's own and returns its path.
inline std::string InputFile(const uint8_t* data, size_t size, const char* suffix) {
  std::string path = "/tmp/gpumux_fuzz_" + std::to_string(getpid()) + suffix;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  return path;
}

// Runs `f`; Error is a clean refusal, any other exception aborts (the fuzzer reports it).
template <class F>
void RefusesOnlyWithError(F&& f) {
  try {
    f();
  } catch (const Error&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "escaped exception (not gpumux::Error): %s\n", e.what());
    std::abort();
  }
}

}  // namespace gpumux::fuzz
