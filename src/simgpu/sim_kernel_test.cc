#include "simgpu/sim_kernel.h"

#include <gtest/gtest.h>

namespace gpumux::sim {
namespace {

TEST(SimKernel, ParsesKernelsOfAModuleImage) {
  std::string error;
  auto k = ParseModuleImage(
      "# comment\ngpumux-sim-module 1\nkernel decode bytes=26e9 flops=2.6e10\n\nkernel empty "
      "bytes=0 flops=0\n",
      &error);
  ASSERT_TRUE(k) << error;
  ASSERT_EQ(k->size(), 2u);
  EXPECT_EQ((*k)[0].name, "decode");
  EXPECT_DOUBLE_EQ((*k)[0].bytes, 26e9);
  EXPECT_DOUBLE_EQ((*k)[0].flops, 2.6e10);
}

TEST(SimKernel, RefusesMalformedImagesSayingWhere) {
  std::string error;
  EXPECT_FALSE(
      ParseModuleImage("\x7f"
                       "ELF...",
                       &error));
  EXPECT_NE(error.find("line 1"), std::string::npos) << error;
  EXPECT_FALSE(ParseModuleImage("gpumux-sim-module 1\nkernel k bytes=-1 flops=0\n", &error));
  EXPECT_NE(error.find("line 2"), std::string::npos) << error;
  EXPECT_FALSE(ParseModuleImage("gpumux-sim-module 1\nkernel k bytes=1 flops=1 extra\n", &error));
  EXPECT_FALSE(ParseModuleImage(
      "gpumux-sim-module 1\nkernel k bytes=1 flops=1\nkernel k bytes=2 flops=2\n", &error));
  EXPECT_NE(error.find("twice"), std::string::npos) << error;
  EXPECT_FALSE(ParseModuleImage("", &error));
}

TEST(SimKernel, RunsForItsRooflineTime) {
  // H100-like: 3.35 TB/s, 989 TFLOP/s. A 13B bf16 decode step moves 26 GB: 7.76 ms,
  // bandwidth-bound.
  EXPECT_EQ(KernelDurationNs({"decode", 26e9, 26e9}, 3.35e12, 989e12), 7761194u);
  // A GEMM of 989 TFLOP takes one second whatever its few bytes.
  EXPECT_EQ(KernelDurationNs({"gemm", 1e6, 989e12}, 3.35e12, 989e12), 1000000000u);
}

}  // namespace
}  // namespace gpumux::sim
