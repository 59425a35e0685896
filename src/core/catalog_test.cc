#include "core/catalog.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "base/error.h"

namespace gpumux {
namespace {

// Writes `text` to a fresh file under this process's temp dir and returns its path (ctest runs
// the tests of this file as processes side by side: one folder each).
std::string WriteFile(const std::string& name, const std::string& text) {
  auto dir = std::filesystem::temp_directory_path() /
             ("gpumux_catalog_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto path = (dir / name).string();
  std::ofstream(path) << text;
  return path;
}

// Expects AddFile to throw Error (bad input) whose message holds every one of `needles`.
void ExpectRefused(const std::string& text, std::initializer_list<std::string> needles) {
  std::string path = WriteFile("bad.yaml", text);
  Catalog c;
  try {
    c.AddFile(path);
    FAIL() << "accepted a bad catalog:\n" << text;
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    for (const std::string& n : needles)
      EXPECT_NE(msg.find(n), std::string::npos) << "missing '" << n << "' in: " << msg;
  }
}

const char* kGoodGpu = R"(gpus:
  - name: Test-GPU
    memory: 16 GiB
    memory_bandwidth: 1 TB/s
    tflops: {bf16: 100, fp16: 100, fp8: null, tf32: 50}
    sms: 40
    tdp_watts: 200
    mig:
      slots: 4
      compute_slices: 4
      sms: 40
      profiles:
        - {name: 1g.4gb, id: 1, compute_slices: 1, memory_slices: 1, memory: 4 GiB, sms: 10, max_instances: 4, placements: "{0,1,2,3}:1"}
)";

TEST(Catalog, BundledHasEveryRequiredKindAndModel) {
  Catalog c = Catalog::LoadBundled();
  for (const char* name : {"A100-40GB", "A100-80GB", "A30", "H100-SXM5-80GB", "H100-PCIe",
                           "H100-NVL", "H200-141GB", "GH200", "B200", "L4", "L40S"}) {
    EXPECT_NO_THROW(c.FindGpu(name)) << name;
  }
  for (const char* name : {"Llama-2-7B", "Llama-2-13B", "Llama-2-70B", "Llama-3-8B", "Llama-3-70B",
                           "Mistral-7B", "Qwen2.5-7B", "Qwen2.5-14B", "Qwen2.5-72B"}) {
    EXPECT_NO_THROW(c.FindModel(name)) << name;
  }
}

TEST(Catalog, BundledFiguresMatchTheReference) {
  Catalog c = Catalog::LoadBundled();
  const GpuKind& h100 = c.FindGpu("H100-SXM5-80GB");
  EXPECT_DOUBLE_EQ(h100.bandwidth, 3.35e12);
  EXPECT_DOUBLE_EQ(h100.tflops_bf16, 989.4);
  EXPECT_EQ(h100.sms, 132);
  ASSERT_TRUE(h100.mig);
  EXPECT_EQ(h100.mig->slots, 8);
  EXPECT_EQ(h100.mig->profiles.size(), 7u);
  const GpuKind& a30 = c.FindGpu("A30");
  EXPECT_EQ(a30.mig->slots, 4);
  EXPECT_FALSE(c.FindGpu("L4").mig);
  EXPECT_EQ(c.FindGpu("A100-40GB").tflops_fp8, 0) << "A100 has no FP8";
  EXPECT_DOUBLE_EQ(c.FindGpu("A100-80GB").boost_clock_hz, kReferenceSmClockHz);
  for (const GpuKind& gpu : c.gpus()) EXPECT_GT(gpu.boost_clock_hz, 0) << gpu.name;
}

TEST(Catalog, LookupIgnoresCaseSeparatorsAndTakesAliases) {
  Catalog c = Catalog::LoadBundled();
  EXPECT_EQ(c.FindGpu("h100-sxm5-80gb").name, "H100-SXM5-80GB");
  EXPECT_EQ(c.FindGpu("H100_SXM5_80GB").name, "H100-SXM5-80GB");
  EXPECT_EQ(c.FindGpu("h200").name, "H200-141GB");
  EXPECT_EQ(c.FindModel("llama-2-13b").name, "Llama-2-13B");
  // Engines by the names their users type: a binding or a CLI runs its class's kernels.
  EXPECT_EQ(c.FindEngine("Ollama").name, "llama.cpp");
  EXPECT_EQ(c.FindEngine("llama-cpp-python").ClassName(), "llama.cpp");
  EXPECT_EQ(c.FindEngine("torchchat").ClassName(), "compiled");
  EXPECT_EQ(c.FindEngine("text-generation-inference").name, "compiled");
  EXPECT_EQ(c.FindEngine("hf").name, "eager");
}

TEST(Catalog, UnknownNameSuggestsTheNearest) {
  Catalog c = Catalog::LoadBundled();
  try {
    c.FindGpu("H100-SMX5");
    FAIL();
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("unknown GPU kind 'H100-SMX5'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("nearest known: H100"), std::string::npos) << msg;
  }
  try {
    c.FindModel("Lama-2-13B");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nearest known: Llama-2-13B"), std::string::npos)
        << e.what();
  }
}

TEST(Catalog, UserFileAddsKindsAndCannotReplaceBundledOnes) {
  Catalog c = Catalog::LoadBundled();
  c.AddFile(WriteFile("mine.yaml", kGoodGpu));
  EXPECT_EQ(c.FindGpu("test-gpu").sms, 40);
  std::string clash = kGoodGpu;
  clash.replace(clash.find("Test-GPU"), 8, "h100");
  Catalog d = Catalog::LoadBundled();
  try {
    d.AddFile(WriteFile("clash.yaml", clash));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("already taken by GPU 'H100-SXM5-80GB'"),
              std::string::npos)
        << e.what();
  }
}

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  auto pos = text.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  return text.replace(pos, from.size(), to);
}

TEST(Catalog, RefusesBadFilesNamingFileLineAndField) {
  ExpectRefused(Replace(kGoodGpu, "    sms: 40\n    tdp", "    tdp"), {":2:", "'sms'", "missing"});
  ExpectRefused(Replace(kGoodGpu, "tdp_watts: 200", "tdp_watts: 200\n    colour: red"),
                {":8:", "unknown field 'colour'"});
  ExpectRefused(Replace(kGoodGpu, "memory: 16 GiB", "memory: 16 gigs"), {":3:", "'memory'", "GiB"});
  ExpectRefused(Replace(kGoodGpu, "1 TB/s", "1 TB"), {"'memory_bandwidth'"});
  ExpectRefused(Replace(kGoodGpu, "{0,1,2,3}:1", "{0,1,2,4}:1"),
                {":13:", "'placements'", "ends past the 4-slot grid"});
  ExpectRefused(Replace(kGoodGpu, "memory: 4 GiB", "memory: 17 GiB"),
                {"'memory'", "more than the GPU's"});
  ExpectRefused(Replace(kGoodGpu, "{0,1,2,3}:1", "{0,1,2,3}:2"), {"differs from memory_slices"});
  ExpectRefused(Replace(kGoodGpu, "fp8: null, ", ""), {"'fp8'", "missing"});
  ExpectRefused(
      Replace(kGoodGpu, "    sms: 40\n    tdp", "    sms: 40\n    boost_clock: 1410\n    tdp"),
      {":7:", "'boost_clock'", "MHz"});
  ExpectRefused(
      Replace(kGoodGpu, "    sms: 40\n    tdp", "    sms: 40\n    boost_clock: 14 GHz\n    tdp"),
      {"'boost_clock'", "between 100 MHz and 10 GHz"});
  ExpectRefused("gpus: [\n", {"not valid YAML"});
  ExpectRefused("widgets: []\n", {"unknown field 'widgets'"});
}

const char* kGoodEngine = R"(engines:
  - name: test-engine
    efficiency: {16bit: 0.8, fp8: 0.7, int8: 0.7, int4: 0.6}
    step_overhead_ms: 1
    allreduce_us: 20
    dequant_bytes_per_sm_cycle: {int4: 6}
)";

TEST(Catalog, ReadsAnEnginesUnpackingRateAndRefusesABadOne) {
  Catalog c;
  c.AddFile(WriteFile("engine.yaml", kGoodEngine));
  const EngineProfile& e = c.FindEngine("test-engine");
  EXPECT_DOUBLE_EQ(e.dequant_bytes_per_sm_cycle_int4, 6);
  EXPECT_DOUBLE_EQ(e.dequant_bytes_per_sm_cycle_int8, 0) << "not stated: no limit";
  ExpectRefused(Replace(kGoodEngine, "{int4: 6}", "{int4: 0}"), {":6:", "'int4'", "(0, 1000]"});
  ExpectRefused(Replace(kGoodEngine, "{int4: 6}", "{int2: 6}"), {"unknown field 'int2'"});
}

// A negative number is refused once, with its file and line named once (it was wrapped twice).
TEST(Catalog, RefusesANegativeNumberNamingItsPlaceOnce) {
  std::string path = WriteFile("negative.yaml",
                               Replace(kGoodEngine, "step_overhead_ms: 1", "step_overhead_ms: -1"));
  Catalog c;
  try {
    c.AddFile(path);
    FAIL() << "accepted a negative step overhead";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(path + ":4: engine 'test-engine': field 'step_overhead_ms': -1 is negative"),
              std::string::npos)
        << msg;
    EXPECT_EQ(msg.find(path), msg.rfind(path)) << "the place named twice: " << msg;
  }
}

TEST(Catalog, ReadsAnEnginesPerHeadAttentionAndRefusesARateWithoutIt) {
  Catalog c;
  c.AddFile(WriteFile("engine.yaml", Replace(kGoodEngine, "    allreduce_us: 20\n",
                                             "    allreduce_us: 20\n    attention: per-head\n"
                                             "    attention_bytes_per_sm_cycle: 9\n")));
  const EngineProfile& e = c.FindEngine("test-engine");
  EXPECT_TRUE(e.attention_per_head);
  EXPECT_DOUBLE_EQ(e.attention_bytes_per_sm_cycle, 9);
  Catalog plain;
  plain.AddFile(WriteFile("engine.yaml", kGoodEngine));
  EXPECT_FALSE(plain.FindEngine("test-engine").attention_per_head) << "not stated: split";
  ExpectRefused(Replace(kGoodEngine, "    allreduce_us: 20\n",
                        "    allreduce_us: 20\n    attention: tiled\n"),
                {":6:", "'attention'", "'tiled' is not per-head or split"});
  ExpectRefused(Replace(kGoodEngine, "    allreduce_us: 20\n",
                        "    allreduce_us: 20\n    attention_bytes_per_sm_cycle: 9\n"),
                {"'attention_bytes_per_sm_cycle'", "only an engine with `attention: per-head`"});
}

// An engine that runs a class's kernels from a loop of its own has that class's constants, its
// own host overhead and error band; it must name a class read before it.
TEST(Catalog, AnEngineThatRunsAClassTakesItsConstantsAndAddsItsLoop) {
  const std::string wrapper = std::string(kGoodEngine) + R"(  - name: test-binding
    aliases: [tb]
    runs: test-engine
    host_overhead_ms: 2.5
    error: {median: 0.2, worst: 0.4}
)";
  Catalog c;
  c.AddFile(WriteFile("engine.yaml", wrapper));
  const EngineProfile& e = c.FindEngine("tb");
  EXPECT_EQ(e.name, "test-binding");
  EXPECT_EQ(e.runs, "test-engine");
  EXPECT_EQ(e.ClassName(), "test-engine");
  EXPECT_DOUBLE_EQ(e.efficiency_16bit, 0.8);
  EXPECT_DOUBLE_EQ(e.step_overhead_seconds, 1e-3);
  EXPECT_DOUBLE_EQ(e.dequant_bytes_per_sm_cycle_int4, 6);
  EXPECT_DOUBLE_EQ(e.host_overhead_seconds, 2.5e-3);
  EXPECT_DOUBLE_EQ(e.error_median, 0.2);
  EXPECT_EQ(c.FindEngine("test-engine").host_overhead_seconds, 0);
  ExpectRefused(Replace(wrapper, "runs: test-engine", "runs: nothing"),
                {"engine 'test-binding'", "runs 'nothing', which is not a class read before it"});
  ExpectRefused(Replace(wrapper, "    host_overhead_ms: 2.5\n",
                        "    host_overhead_ms: 2.5\n    step_overhead_ms: 1\n"),
                {"unknown field 'step_overhead_ms'"});
  ExpectRefused(Replace(wrapper, "host_overhead_ms: 2.5", "host_overhead_ms: 200"),
                {"'host_overhead_ms'", "[0, 100]"});
}

TEST(Catalog, RefusesAModelWhoseShapeDisagreesWithItsParamCount) {
  const char* model = R"(models:
  - {name: Tiny, params: 6.74e9, layers: 32, hidden: 4096, heads: 32, kv_heads: 32, head_dim: 128, intermediate: 11008, vocab: 32000, tied_embeddings: false}
  - {name: Typo, params: 6.74e9, layers: 23, hidden: 4096, heads: 32, kv_heads: 32, head_dim: 128, intermediate: 11008, vocab: 32000, tied_embeddings: false}
)";
  ExpectRefused(model, {":3:", "model 'Typo'", "'params'", "more than 2% apart"});
}

TEST(ModelShape, ParamCountsMatchThePublishedOnes) {
  Catalog c = Catalog::LoadBundled();
  // Published counts (reference table §4.3), to three significant figures.
  std::pair<const char*, double> expected[] = {{"Llama-2-7B", 6.74e9},   {"Llama-2-13B", 13.02e9},
                                               {"Llama-3-8B", 8.03e9},   {"Llama-3-70B", 70.55e9},
                                               {"Mistral-7B", 7.24e9},   {"Qwen2.5-7B", 7.62e9},
                                               {"Qwen2.5-14B", 14.77e9}, {"Qwen2.5-72B", 72.71e9}};
  for (auto [name, params] : expected) {
    EXPECT_NEAR(c.FindModel(name).Params(), params, 0.005 * params) << name;
  }
  // KV cache per token in bf16: Llama-2-13B 800 KiB, Llama-3-8B 128 KiB.
  EXPECT_DOUBLE_EQ(c.FindModel("Llama-2-13B").KvElementsPerToken() * 2, 800 * 1024);
  EXPECT_DOUBLE_EQ(c.FindModel("Llama-3-8B").KvElementsPerToken() * 2, 128 * 1024);
}

}  // namespace
}  // namespace gpumux
