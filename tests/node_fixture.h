// The fixture of the node runtime's end-to-end tests: each test gets its own runtime directory
// (ledger and simulated device state) and starts tenants with the built `gpumux run --sim H100`.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>

#include "node/ledger/ledger.h"
#include "shell.h"

namespace gpumux::testing {

inline constexpr uint64_t kMiB = 1ull << 20, kGiB = 1ull << 30;

// Writes layout version `version` into the header of the ledger at `path`, as a gpumux of that
// version would have left the file.
inline void SetLedgerVersion(const std::string& path, uint32_t version) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(offsetof(node::LedgerHeader, version));
  f.write(reinterpret_cast<const char*>(&version), sizeof(version));
}

class NodeTest : public ::testing::Test {
 public:
  // The shell command that runs `command` as `tenant` with `limits` ("--mem 1GiB --compute 30%").
  static std::string Launch(const std::string& tenant, const std::string& limits,
                            const std::string& command) {
    return std::string(GPUMUX_BINARY) + " run --sim H100 --tenant " + tenant + " " + limits +
           " -- " + command;
  }

  // Runs a shell command, returns (exit code, stdout); stderr is dropped.
  static std::pair<int, std::string> Sh(const std::string& cmd) {
    ShellResult r = Shell(cmd + " 2>/dev/null");
    return {r.exit_code, r.out};
  }

 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("gpumux_node_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    setenv("GPUMUX_RUNTIME_DIR", dir_.c_str(), 1);
    // In the sanitizer build (debug preset) the shim is preloaded ahead of the ASan runtime, which
    // ASan refuses by default; the order is fine for these test programs. No effect elsewhere.
    setenv("ASAN_OPTIONS", "verify_asan_link_order=0", 0);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path dir_;
};

}  // namespace gpumux::testing
