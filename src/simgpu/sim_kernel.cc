#include "simgpu/sim_kernel.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace gpumux::sim {
namespace {

constexpr const char* kHeader = "gpumux-sim-module 1";

// Reads "key=number" into `value`; false if the word is not that key or the number is bad.
bool ReadField(const std::string& word, const std::string& key, double* value) {
  if (word.rfind(key + "=", 0) != 0) return false;
  std::string number = word.substr(key.size() + 1);
  char* end = nullptr;
  double v = std::strtod(number.c_str(), &end);
  if (number.empty() || *end != 0 || !std::isfinite(v) || v < 0) return false;
  *value = v;
  return true;
}

}  // namespace

std::optional<std::vector<KernelSpec>> ParseModuleImage(const std::string& image,
                                                        std::string* error) {
  std::istringstream in(image);
  std::string line;
  int number = 0;
  auto fail = [&](const std::string& why) {
    *error = "module image line " + std::to_string(number) + ": " + why;
    return std::nullopt;
  };
  std::vector<KernelSpec> kernels;
  bool header = false;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty() || line[0] == '#') continue;
    if (!header) {
      if (line != kHeader)
        return fail(std::string("expected '") + kHeader + "' (not a simulated module)");
      header = true;
      continue;
    }
    std::istringstream words(line);
    std::string kind, name, a, b, extra;
    words >> kind >> name >> a >> b;
    KernelSpec k{name};
    if (kind != "kernel" || name.empty()) return fail("expected 'kernel NAME bytes=N flops=N'");
    if (!(ReadField(a, "bytes", &k.bytes) && ReadField(b, "flops", &k.flops)) || (words >> extra)) {
      return fail("kernel '" + name + "': expected 'bytes=N flops=N' with non-negative numbers");
    }
    for (const KernelSpec& other : kernels) {
      if (other.name == name) return fail("kernel '" + name + "' declared twice");
    }
    kernels.push_back(k);
  }
  if (!header) return fail("empty image");
  return kernels;
}

uint64_t KernelDurationNs(const KernelSpec& k, double bandwidth, double flops) {
  double seconds =
      std::max(bandwidth > 0 ? k.bytes / bandwidth : 0.0, flops > 0 ? k.flops / flops : 0.0);
  return uint64_t(std::llround(seconds * 1e9));
}

}  // namespace gpumux::sim
