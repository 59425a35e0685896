#include "fleet/variant.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/error.h"

namespace gpumux::fleet {
namespace {

const std::string kTraces = GPUMUX_SOURCE_DIR "/traces/openb-v2023/";

struct Published {
  const char* file;
  VariantKnobs knobs;
};

// Each published variant, and the knobs that say what it emphasizes (its README's words).
std::vector<Published> PublishedVariants() {
  VariantKnobs sharing, multi, spec, cpu;
  sharing.sharing = 0.40;  // "40% of the GPU request comes from sharing tasks"
  multi.multi_gpu = 0.30;  // "30% of the GPU request from multi-GPU tasks"
  multi.growth = VariantKnobs::Growth::kAdd;
  spec.gpu_spec = 0.20;  // "20% of GPU tasks constrained to GPU models"
  cpu.cpu_only = 0.10;   // "10.0% of tasks are CPU-only"
  return {{"openb_pod_list_gpushare40.csv", sharing},
          {"openb_pod_list_multigpu30.csv", multi},
          {"openb_pod_list_gpuspec20.csv", spec},
          {"openb_pod_list_cpu100.csv", cpu}};
}

TEST(Variant, ReproducesThePublishedVariantsClassFrequenciesFromTheDefault) {
  std::vector<PodSpec> source = LoadPods(kTraces + "openb_pod_list_default.csv");
  std::vector<NodeSpec> nodes = LoadNodes(kTraces + "openb_node_list_gpu_node.csv");
  for (const Published& v : PublishedVariants()) {
    std::vector<PodSpec> published = LoadPods(kTraces + v.file);
    PodClassShares want = ClassShares(published);
    for (uint64_t seed : {1, 2, 3}) {
      VariantKnobs knobs = v.knobs;
      knobs.seed = seed;
      std::vector<PodSpec> made = MakeVariant(source, nodes, knobs);
      PodClassShares got = ClassShares(made);
      SCOPED_TRACE(std::string(v.file) + " seed " + std::to_string(seed));
      EXPECT_NEAR(double(made.size()), double(published.size()), 0.03 * double(published.size()));
      EXPECT_NEAR(got.cpu_only, want.cpu_only, 0.015);
      EXPECT_NEAR(got.sharing, want.sharing, 0.015);
      EXPECT_NEAR(got.whole, want.whole, 0.015);
      EXPECT_NEAR(got.multi_gpu, want.multi_gpu, 0.015);
      EXPECT_NEAR(got.sharing_request, want.sharing_request, 0.015);
      EXPECT_NEAR(got.whole_request, want.whole_request, 0.015);
      EXPECT_NEAR(got.multi_gpu_request, want.multi_gpu_request, 0.015);
      EXPECT_NEAR(got.gpu_spec, want.gpu_spec, 0.01);
    }
  }
}

TEST(Variant, KnobsSetWhatTheySayAndTheSeedDecides) {
  std::vector<PodSpec> source = LoadPods(kTraces + "openb_pod_list_default.csv");
  std::vector<NodeSpec> nodes = LoadNodes(kTraces + "openb_node_list_gpu_node.csv");
  VariantKnobs knobs;
  knobs.sharing = 0.8;
  knobs.multi_gpu = 0.1;
  knobs.cpu_only = 0.3;
  knobs.gpu_spec = 0.5;
  std::vector<PodSpec> a = MakeVariant(source, nodes, knobs);
  PodClassShares s = ClassShares(a);
  EXPECT_NEAR(s.sharing_request, 0.8, 0.01);
  EXPECT_NEAR(s.multi_gpu_request, 0.1, 0.01);
  EXPECT_NEAR(s.cpu_only, 0.3, 0.01);
  EXPECT_NEAR(s.gpu_spec, 0.5, 0.01);
  for (const PodSpec& p : a) {
    for (const std::string& model : p.gpu_spec) {
      EXPECT_TRUE(std::any_of(nodes.begin(), nodes.end(), [&](const NodeSpec& n) {
        return n.model == model;
      })) << model;
    }
  }
  std::ostringstream first, again, other;
  WritePods(first, a);
  WritePods(again, MakeVariant(source, nodes, knobs));
  knobs.seed = 7;
  WritePods(other, MakeVariant(source, nodes, knobs));
  EXPECT_EQ(first.str(), again.str()) << "one seed, one variant";
  EXPECT_NE(first.str(), other.str());
}

TEST(Variant, WrittenPodsLoadBackAsTheyWere) {
  std::vector<PodSpec> source = LoadPods(kTraces + "openb_pod_list_gpuspec20.csv");
  auto path = std::filesystem::temp_directory_path() /
              ("gpumux_variant_" + std::to_string(getpid()) + ".csv");
  {
    std::ofstream out(path);
    WritePods(out, source);
  }
  std::vector<PodSpec> back = LoadPods(path.string());
  std::filesystem::remove(path);
  ASSERT_EQ(back.size(), source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    EXPECT_EQ(back[i].name, source[i].name);
    EXPECT_EQ(back[i].total_gpu_milli(), source[i].total_gpu_milli());
    EXPECT_EQ(back[i].cpu_milli, source[i].cpu_milli);
    EXPECT_EQ(back[i].gpu_spec, source[i].gpu_spec);
  }
}

TEST(Variant, ImpossibleKnobsAreRefused) {
  std::vector<PodSpec> source = LoadPods(kTraces + "openb_pod_list_default.csv");
  std::vector<NodeSpec> nodes = LoadNodes(kTraces + "openb_node_list_gpu_node.csv");
  for (auto set : std::vector<void (*)(VariantKnobs&)>{
           [](VariantKnobs& k) { k.sharing = 1.0; }, [](VariantKnobs& k) { k.cpu_only = -0.1; },
           [](VariantKnobs& k) { k.sharing = 0.6, k.multi_gpu = 0.5; },
           [](VariantKnobs& k) { k.gpu_spec = 1.5; }}) {
    VariantKnobs k;
    set(k);
    EXPECT_THROW(MakeVariant(source, nodes, k), Error);
  }
  VariantKnobs spec;
  spec.gpu_spec = 0.2;
  EXPECT_THROW(MakeVariant(source, {}, spec), Error) << "no node model to draw from";
}

}  // namespace
}  // namespace gpumux::fleet
