// Tenants that span GPUs, and programs that handle GPU memory as LLM engines do
// (tests/node/llm_client.cc), under `gpumux run --gpu 0,1` on simulated H100s: each is held to its
// quota on each GPU, is charged on the GPU it allocates on and nowhere else, is charged once for
// memory two of its processes share, and holds nothing once it has exited.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "node_fixture.h"

namespace {

using gpumux::testing::kGiB;
using gpumux::testing::kMiB;
using gpumux::testing::NodeTest;
using nlohmann::json;
const std::string kClient = GPUMUX_LLM_CLIENT;
const std::string kGpumux = GPUMUX_BINARY;

class LlmEngineTest : public NodeTest {
 protected:
  // Runs `command` (a shell command line; $C is the client) as tenant `tenant` of GPUs `gpus` with
  // quotas `mem`; returns the JSON lines it printed, in order. Expects exit 0.
  std::vector<json> Run(const std::string& tenant, const std::string& gpus, const std::string& mem,
                        const std::string& command) {
    auto [code, out] = Sh(kGpumux + " run --sim H100 --tenant " + tenant + " --gpu " + gpus +
                          " --mem " + mem + " -- env C=" + kClient + " sh -c '" + command + "'");
    EXPECT_EQ(code, 0) << command << "\n" << out;
    std::vector<json> lines;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) lines.push_back(json::parse(line, nullptr, false));
    return lines;
  }
  // The tenants `gpumux status` shows on GPU `gpu`.
  size_t TenantsOn(int gpu) {
    auto [code, out] = Sh(kGpumux + " status --json --gpu " + std::to_string(gpu));
    EXPECT_EQ(code, 0);
    return json::parse(out)["tenants"].size();
  }
};

TEST_F(LlmEngineTest, ATwoGpuTenantIsHeldToItsQuotaOnEachAndChargedNothingOnTheOther) {
  auto out = Run("tp2", "0,1", "1GiB,2GiB", "$C fill-each " + std::to_string(64 * kMiB));
  ASSERT_EQ(out.size(), 1u);
  json j = out[0];
  EXPECT_EQ(j["allocated"], json::array({kGiB, 2 * kGiB})) << j;
  EXPECT_EQ(j["used_after_each_fill"][0], json::array({kGiB, 0}))
      << "filling GPU 0 charges nothing on GPU 1";
  EXPECT_EQ(j["used_after_each_fill"][1], json::array({kGiB, 2 * kGiB}));
  EXPECT_EQ(j["used_at_end"], json::array({0, 0}));
  EXPECT_EQ(TenantsOn(0), 0u) << "the tenant leaves both GPUs when it exits";
  EXPECT_EQ(TenantsOn(1), 0u);
}

TEST_F(LlmEngineTest, TwoVllmWorkersSizeTheirKvCacheFromTheirQuotaAndRunToCompletion) {
  // Tensor parallelism 2: one worker per GPU, each sizing from cuMemGetInfo × 0.9.
  auto out =
      Run("vllm", "0,1", "4GiB", "$C vllm 0 0.9 & $C vllm 1 0.9; a=$?; wait $!; exit $((a + $?))");
  ASSERT_EQ(out.size(), 2u);
  for (const json& j : out) {
    ASSERT_FALSE(j.contains("error")) << j;
    EXPECT_EQ(j["total"], 4 * kGiB) << "cuMemGetInfo's total is the quota on its own GPU";
    EXPECT_GT(j["kv"].get<uint64_t>(), 2 * kGiB) << j;
    EXPECT_LE(j["peak"].get<uint64_t>(), 4 * kGiB) << j;
    EXPECT_EQ(j["used_at_end"], 0) << j;
  }
}

TEST_F(LlmEngineTest, SglangSizesFromNvmlsTotalOfItsGpu) {
  auto out = Run("sglang", "0,1", "2GiB,6GiB", "$C sglang 1 0.85");
  ASSERT_EQ(out.size(), 1u);
  ASSERT_FALSE(out[0].contains("error")) << out[0];
  EXPECT_EQ(out[0]["nvml_total"], 6 * kGiB) << "NVML's device 1 shows the quota there";
  EXPECT_LE(out[0]["peak"].get<uint64_t>(), 6 * kGiB);
  EXPECT_EQ(out[0]["used_at_end"], 0);
}

TEST_F(LlmEngineTest, ExpandableSegmentsGrowToTheQuotaShrinkAndGrowAgainAndHostMemoryIsFree) {
  auto out = Run("expand", "0,1", "1GiB", "$C expandable 1 " + std::to_string(64 * kMiB));
  ASSERT_EQ(out.size(), 1u);
  json j = out[0];
  ASSERT_FALSE(j.contains("error")) << j;
  EXPECT_EQ(j["grown"], kGiB) << "refused at exactly the quota";
  EXPECT_EQ(j["kept"].get<uint64_t>() + j["grown_again"].get<uint64_t>(), kGiB);
  EXPECT_EQ(j["used_with_host_memory"], kGiB) << "host-located cuMemCreate is not charged";
  EXPECT_EQ(j["used_at_end"], 0);
}

TEST_F(LlmEngineTest, TensorParallelRanksShareMemoryThatIsChargedOnceToItsMaker) {
  std::string sock = (dir_ / "tp.sock").string();
  auto out = Run("tp", "0,1", "2GiB",
                 "$C tp-export " + sock + " " + std::to_string(512 * kMiB) + " & $C tp-import " +
                     sock + "; a=$?; wait $!; exit $((a + $?))");
  ASSERT_EQ(out.size(), 2u);
  json rank1 = out[0]["rank"] == 1 ? out[0] : out[1];
  json rank0 = out[0]["rank"] == 0 ? out[0] : out[1];
  ASSERT_FALSE(rank1.contains("error")) << rank1;
  ASSERT_FALSE(rank0.contains("error")) << rank0;
  EXPECT_EQ(rank1["used_while_open"], json::array({kGiB, 0}))
      << "the IPC buffer and the shared segment count once, on GPU 0; opening them on GPU 1 "
         "charges nothing";
  EXPECT_EQ(rank0["used_while_shared"], json::array({kGiB, 0}));
  EXPECT_EQ(rank0["used_at_end"], json::array({0, 0}));
}

TEST_F(LlmEngineTest, RunRefusesGpuAndQuotaListsThatDoNotMatch) {
  for (const char* args :
       {"--gpu 0,1 --mem 1GiB,2GiB,3GiB", "--gpu 0,0 --mem 1GiB", "--gpu 0,x --mem 1GiB",
        "--gpu 0,1 --mem 1GiB,900GiB", "--gpu '' --mem 1GiB"}) {
    auto [code, out] = Sh(kGpumux + " run --sim H100 " + args + " -- true");
    EXPECT_NE(code, 0) << args;
  }
}

TEST_F(LlmEngineTest, AnAdmissionRefusedOnOneGpuLeavesNothingOnTheOthers) {
  // GPU 1 is nearly all held; a strict two-GPU tenant fits GPU 0 but not GPU 1.
  FILE* holder = popen(
      (kGpumux + " run --sim H100 --tenant holder --gpu 1 --mem 75GiB -- sleep 3").c_str(), "r");
  for (int i = 0; i < 100 && TenantsOn(1) == 0; ++i) usleep(20'000);
  ASSERT_EQ(TenantsOn(1), 1u);
  auto [code, out] =
      Sh(kGpumux + " run --sim H100 --strict --tenant tp --gpu 0,1 --mem 10GiB -- true");
  EXPECT_NE(code, 0) << out;
  EXPECT_EQ(TenantsOn(0), 0u) << "admitted on every GPU or on none";
  EXPECT_EQ(TenantsOn(1), 1u) << "the holder alone";
  pclose(holder);
}

}  // namespace
