// The simulated driver's contexts, as the real driver keeps them: per thread, and required for
// allocations, modules, streams, events, launches and copies (a client that forgets one fails here
// as it would on a GPU).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "abi/driver_api.h"

namespace {

using gpumux::cuda::kErrorInvalidContext;

class SimDriverTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    state_ = std::filesystem::temp_directory_path() /
             ("gpumux_sim_driver_" + std::to_string(getpid()) + ".state");
    setenv("GPUMUX_SIM_MEMORY", std::to_string(1ull << 30).c_str(), 1);
    setenv("GPUMUX_SIM_STATE", state_.c_str(), 1);
    ASSERT_EQ(cuInit(0), 0);
  }
  static void TearDownTestSuite() { std::filesystem::remove(state_); }
  static inline std::filesystem::path state_;
};

TEST_F(SimDriverTest, AnAllocationNeedsACurrentContextOnTheCallingThread) {
  CUdeviceptr p = 0;
  EXPECT_EQ(cuMemAlloc_v2(&p, 1 << 20), kErrorInvalidContext) << "no context yet";
  CUdevice dev;
  CUcontext ctx;
  ASSERT_EQ(cuDeviceGet(&dev, 0), 0);
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx, dev), 0);
  EXPECT_EQ(cuMemAlloc_v2(&p, 1 << 20), kErrorInvalidContext) << "retained is not current";
  ASSERT_EQ(cuCtxSetCurrent(ctx), 0);
  ASSERT_EQ(cuMemAlloc_v2(&p, 1 << 20), 0);
  EXPECT_EQ(cuMemFree_v2(p), 0);
  // Another thread has no current context until it sets one.
  CUresult other = 0;
  CUcontext seen = ctx;
  std::thread([&] {
    CUdeviceptr q = 0;
    cuCtxGetCurrent(&seen);
    other = cuMemAlloc_v2(&q, 1 << 20);
  }).join();
  EXPECT_EQ(seen, nullptr);
  EXPECT_EQ(other, kErrorInvalidContext);
}

TEST_F(SimDriverTest, ModulesStreamsEventsLaunchesAndCopiesNeedACurrentContextToo) {
  const char image[] = "gpumux-sim-module 1\nkernel k bytes=1024 flops=1024\n";
  CUdevice dev;
  CUcontext ctx;
  ASSERT_EQ(cuDeviceGet(&dev, 0), 0);
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx, dev), 0);
  ASSERT_EQ(cuCtxSetCurrent(ctx), 0);
  CUmodule module;
  CUfunction f;
  ASSERT_EQ(cuModuleLoadData(&module, image), 0);
  ASSERT_EQ(cuModuleGetFunction(&f, module, "k"), 0);
  ASSERT_EQ(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr), 0);
  ASSERT_EQ(cuCtxSynchronize(), 0);
  // A thread that never made a context current: every call that needs one is refused.
  CUresult load, stream, event, launch, copy;
  std::thread([&] {
    CUmodule m;
    CUstream s;
    CUevent e;
    char byte = 0;
    load = cuModuleLoadData(&m, image);
    stream = cuStreamCreate(&s, 0);
    event = cuEventCreate(&e, 0);
    launch = cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr);
    copy = cuMemcpyHtoD_v2(0, &byte, 1);
  }).join();
  EXPECT_EQ(load, kErrorInvalidContext);
  EXPECT_EQ(stream, kErrorInvalidContext);
  EXPECT_EQ(event, kErrorInvalidContext);
  EXPECT_EQ(launch, kErrorInvalidContext);
  EXPECT_EQ(copy, kErrorInvalidContext);
  EXPECT_EQ(cuModuleUnload(module), 0);
}

}  // namespace
