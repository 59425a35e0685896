// Kernels of the simulated GPU: what a module image declares and how long a kernel runs.
//
// A simulated module image is text (the simulator cannot run real machine code):
//
//   gpumux-sim-module 1
//   # name  bytes moved  FLOPs
//   kernel decode_step bytes=26e9 flops=26e9
//
// and a kernel runs for its roofline time, max(bytes / bandwidth, flops / peak FLOP/s). Launch
// overhead and occupancy are not modelled; the grid size does not change the work (the image states
// the work of one launch).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpumux::sim {

struct KernelSpec {
  std::string name;
  double bytes = 0;
  double flops = 0;
};

// Parses a module image; on a malformed one returns nullopt and sets `error` to what and where.
std::optional<std::vector<KernelSpec>> ParseModuleImage(const std::string& image,
                                                        std::string* error);

// Nanoseconds `k` occupies a device of `bandwidth` bytes/s and `flops` FLOP/s.
uint64_t KernelDurationNs(const KernelSpec& k, double bandwidth, double flops);

}  // namespace gpumux::sim
