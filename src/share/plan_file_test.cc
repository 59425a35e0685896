#include "share/plan_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "core/workload.h"
#include "share/plan_file_test_support.h"
#include "share/tenant.h"

namespace gpumux {
namespace {

std::string WriteFile(const std::string& text) { return WritePlanFile("plan_file_test", text); }

const char* kPlan = R"(fleet:
  - {gpu: h100, count: 8, price_per_hour: 3.1}
strategies: [mps, timeslice]
tenants:
  - name: chat
    count: 2
    workload: {kind: llm-decode, model: Llama-2-13B, context: 4096, efficiency: 0.7}
    slo: {min_tokens_per_second: 40}
  - name: etl
    workload: {kind: generic, memory: 10 GB, bandwidth: 500 GB/s, compute: 20 TFLOPS}
)";

TEST(PlanFile, LoadsFleetTenantsAndAppliesTheDefaultSloVisibly) {
  Catalog catalog = Catalog::LoadBundled();
  PlanFile f = LoadPlanFile(WriteFile(kPlan), catalog);
  ASSERT_EQ(f.input.fleet.size(), 1u);
  EXPECT_EQ(f.input.fleet[0].gpu->name, "H100-SXM5-80GB");
  EXPECT_DOUBLE_EQ(f.input.fleet[0].price_per_hour, 3.1);
  EXPECT_FALSE(f.input.allowed.Allows(ShareMode::kMig));
  ASSERT_EQ(f.input.classes.size(), 2u);
  EXPECT_EQ(f.input.classes[0].count, 2);
  EXPECT_DOUBLE_EQ(*f.input.classes[0].tenant.slo.min_rate, 40);
  EXPECT_DOUBLE_EQ(*f.input.classes[1].tenant.slo.max_slowdown, kDefaultMaxSlowdown);
  ASSERT_EQ(f.notes.size(), 1u);
  EXPECT_NE(f.notes[0].find("etl: no SLO given"), std::string::npos);
}

// kPlan with its first `from` replaced by `to`.
std::string PlanWith(const std::string& from, const std::string& to) {
  std::string text = kPlan;
  text.replace(text.find(from), from.size(), to);
  return text;
}

void ExpectRefused(const std::string& from, const std::string& to,
                   std::initializer_list<std::string> needles) {
  std::string text = PlanWith(from, to);
  std::string path = WriteFile(text);
  Catalog catalog = Catalog::LoadBundled();
  try {
    LoadPlanFile(path, catalog);
    FAIL() << "accepted:\n" << text;
  } catch (const Error& e) {
    std::string msg = e.what();
    for (const std::string& n : needles)
      EXPECT_NE(msg.find(n), std::string::npos) << "missing '" << n << "' in " << msg;
  }
}

TEST(PlanFile, RefusesBadInputWithFileLineAndField) {
  ExpectRefused("gpu: h100", "gpu: h1000",
                {"plan.yaml:2:", "unknown GPU kind 'h1000'", "nearest known"});
  ExpectRefused("model: Llama-2-13B", "model: Llama-2-31B", {"plan.yaml:7:", "unknown model"});
  ExpectRefused("bandwidth: 500 GB/s", "bandwidth: 500 GB",
                {"plan.yaml:10:", "'bandwidth'", "TB/s"});
  ExpectRefused("count: 2", "count: -2", {"plan.yaml:6:", "'count'"});
  ExpectRefused("efficiency: 0.7", "efficiency: 1.7", {"'efficiency'", "(0, 1]"});
  ExpectRefused("strategies: [mps, timeslice]", "strategies: [mps, magic]",
                {"'magic' is not one of"});
  ExpectRefused("min_tokens_per_second: 40", "min_token_per_second: 40",
                {"unknown field 'min_token_per_second'"});
  ExpectRefused("name: etl", "name: chat",
                {"plan.yaml:9:", "'chat' is already used at", "plan.yaml:5"});
  ExpectRefused("kind: llm-decode", "kind: llm-train", {"'llm-train' is not one of"});
  ExpectRefused("context: 4096,", "context: 4096, params: 13e9,",
                {"exactly one of 'model' and 'params'"});
}

TEST(PlanFile, ATensorParallelWorkloadIsOneGpusPartAndItsDegreeIsChecked) {
  Catalog catalog = Catalog::LoadBundled();
  PlanFile plan =
      LoadPlanFile(WriteFile(PlanWith("context: 4096", "context: 4096, tp: 2")), catalog);
  const Workload& part = plan.input.classes[0].tenant.work;
  EXPECT_EQ(part.tensor_parallel, 2);
  EXPECT_NEAR(part.weight_bytes, 26.03e9 / 2, 0.02e9);
  ExpectRefused("context: 4096,", "context: 4096, tp: 3,", {"'tp'", "not 1, 2, 4 or 8"});
  ExpectRefused("context: 4096,", "context: 4096, tp: 16,", {"'tp'"});
  ExpectRefused("compute: 20 TFLOPS", "compute: 20 TFLOPS, tp: 2", {"unknown field 'tp'"});
}

TEST(PlanFile, AStepOverheadIsReadInMilliseconds) {
  Catalog catalog = Catalog::LoadBundled();
  PlanFile plan = LoadPlanFile(
      WriteFile(PlanWith("context: 4096", "context: 4096, step_overhead_ms: 1.5")), catalog);
  EXPECT_DOUBLE_EQ(plan.input.classes[0].tenant.work.step_overhead_seconds, 1.5e-3);
  ExpectRefused("context: 4096,", "context: 4096, step_overhead_ms: -1,", {"'step_overhead_ms'"});
}

TEST(PlanFile, BundledExamplesLoad) {
  Catalog catalog = Catalog::LoadBundled();
  for (const char* name :
       {"p5-48xlarge.yaml", "mixed-inference-fleet.yaml", "tensor-parallel.yaml"}) {
    std::string path = std::string(GPUMUX_SOURCE_DIR) + "/examples/" + name;
    EXPECT_NO_THROW(LoadPlanFile(path, catalog)) << path;
  }
}

}  // namespace
}  // namespace gpumux

namespace gpumux {
namespace {

// A workload that names its engine takes the engine's measured constants and error band; an SLO
// then counts as met only with that margin (or the one it states).
TEST(PlanFile, AnEngineGivesItsConstantsAndAnSloIsMetOnlyWithMarginForTheModelsError) {
  Catalog catalog = Catalog::LoadBundled();
  const EngineProfile& vllm = catalog.FindEngine("vllm");
  ASSERT_GT(vllm.error_median, 0);
  PlanFile f = LoadPlanFile(
      WriteFile(PlanWith("context: 4096, efficiency: 0.7}", "context: 4096, engine: vllm}")),
      catalog);
  const Tenant& chat = f.input.classes[0].tenant;
  EXPECT_DOUBLE_EQ(chat.work.bandwidth_efficiency, vllm.efficiency_16bit);
  EXPECT_DOUBLE_EQ(chat.work.clocked_overhead_seconds,
                   vllm.StepOverheadSeconds(catalog.FindModel("Llama-2-13B").layers));
  EXPECT_GT(vllm.layer_overhead_seconds, 0) << "the fitted class pays for each layer it launches";
  EXPECT_DOUBLE_EQ(chat.work.expected_error, vllm.error_median);
  // An SLO just under the prediction: met with no margin, not with the engine's.
  const GpuKind& h100 = catalog.FindGpu("h100");
  TenantLoad load = MakeLoad(chat, h100);
  double solo = load.SequenceRate(load.solo_step_rate());
  Tenant tight = chat;
  tight.slo.min_rate = solo * (1 - vllm.error_median / 2);
  EXPECT_FALSE(MakeLoad(tight, h100).MeetsSlo(load.solo_step_rate()));
  tight.slo.margin = 0;
  EXPECT_TRUE(MakeLoad(tight, h100).MeetsSlo(load.solo_step_rate()));
  // Stated in the file: a fraction, or auto; anything else is refused.
  PlanFile stated = LoadPlanFile(
      WriteFile(PlanWith("min_tokens_per_second: 40}", "min_tokens_per_second: 40, margin: 0.2}")),
      catalog);
  EXPECT_DOUBLE_EQ(*stated.input.classes[0].tenant.slo.margin, 0.2);
  ExpectRefused("min_tokens_per_second: 40}", "min_tokens_per_second: 40, margin: 1.5}",
                {"margin", "'auto' or a fraction in [0, 1)"});
  ExpectRefused("efficiency: 0.7}", "engine: warp-drive}", {"plan.yaml:7:", "unknown engine"});
}

// A llama.cpp 70B Q4 tenant on an A100 is held back by its SMs unpacking the weights, not by the
// memory: what it uses of the SMs (which MPS shares out) is that unpacking, not its few FLOPs.
TEST(PlanFile, ATenantUnpackingQuantisedWeightsUsesTheSmsForIt) {
  Catalog catalog = Catalog::LoadBundled();
  const EngineProfile& lcpp = catalog.FindEngine("llama.cpp");
  ASSERT_GT(lcpp.dequant_bytes_per_sm_cycle_int4, 0);
  LlmSpec spec;
  spec.shape = &catalog.FindModel("Llama-2-70B");
  spec.dtype = DType::kInt4;
  spec.context = 256;
  spec.engine = &lcpp;
  Tenant tenant;
  tenant.work = LlmDecode(spec);
  const GpuKind& a100 = catalog.FindGpu("A100-80GB");
  TenantLoad load = MakeLoad(tenant, a100);
  EXPECT_GT(load.whole.compute, load.whole.memory) << "the SMs set the pace";
  EXPECT_DOUBLE_EQ(load.compute_use, DequantSecondsOn(tenant.work, a100));
  EXPECT_GT(load.compute_use, 10 * tenant.work.flops_per_step / a100.PeakFlops(DType::kInt4));
}

}  // namespace
}  // namespace gpumux
