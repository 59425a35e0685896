// Runs the `gpumux` binary as a user or a script would and checks what it prints and how it exits.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "shell.h"

namespace {

using Result = gpumux::testing::ShellResult;
using gpumux::testing::Gpumux;

std::string Example(const char* name) {
  return std::string(GPUMUX_SOURCE_DIR) + "/examples/" + name;
}

std::string WriteTemp(const std::string& name, const std::string& text) {
  auto path = std::filesystem::temp_directory_path() / name;
  std::ofstream(path) << text;
  return path.string();
}

TEST(Explain, GoldenExampleAsJson) {
  Result r = Gpumux(
      "explain --gpu H100-SXM5-80GB --params 13e9 --dtype bf16 --batch 1 --efficiency 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_NEAR(j["memory_bytes"].get<double>(), 26e9, 1e7);
  EXPECT_NEAR(j["tokens_per_second"].get<double>(), 128, 1.5);
  EXPECT_NEAR(j["flops_per_second"].get<double>(), 3.3e12, 0.06e12);
  EXPECT_NEAR(j["bandwidth_bytes_per_second"].get<double>(), 3.3e12, 0.06e12);
  EXPECT_NEAR(j["flops_fraction"].get<double>(), 0.003, 0.001);
  EXPECT_NEAR(j["bandwidth_fraction"].get<double>(), 0.98, 0.021);
  EXPECT_NEAR(j["memory_fraction"].get<double>(), 0.30, 0.01);
}

TEST(Explain, ModelShapeShowsTheExactFiguresBesideTheRuleOfThumb) {
  Result r = Gpumux(
      "explain --gpu h100-sxm5-80gb --model llama-2-13b --context 4096 --efficiency 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_GT(j["kv_cache_bytes"].get<double>(), 3.3e9);
  EXPECT_LT(j["tokens_per_second"].get<double>(),
            j["rule_of_thumb"]["tokens_per_second"].get<double>());
  Result text = Gpumux("explain --gpu H100 --model Llama-2-13B --context 4096");
  EXPECT_NE(text.out.find("shape + KV cache"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("params x bytes"), std::string::npos) << text.out;
}

TEST(Explain, AModelTooBigForOneGpuSaysHowManyItNeedsAndItsRateThere) {
  Result r = Gpumux("explain --gpu H100 --model Llama-3-70B --context 4096 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_GT(j["memory_fraction"].get<double>(), 1.0);
  EXPECT_EQ(j["gpus_needed"], 2);
  const auto& tp = j["tensor_parallel"];
  EXPECT_EQ(tp["degree"], 2);
  EXPECT_NEAR(tp["weight_bytes"].get<double>(), j["weight_bytes"].get<double>() / 2, 1);
  EXPECT_LT(tp["memory_fraction"].get<double>(), 1.0);
  EXPECT_NEAR(tp["tokens_per_second"].get<double>(), 2 * j["tokens_per_second"].get<double>(),
              0.01 * j["tokens_per_second"].get<double>())
      << "each GPU reads half of every step's bytes";
  Result text = Gpumux("explain --gpu H100 --model Llama-3-70B");
  EXPECT_NE(text.out.find("needs 2 GPUs"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("TP = 2, per GPU"), std::string::npos) << text.out;
  Result small = Gpumux("explain --gpu H100 --model Llama-2-13B --json");
  EXPECT_EQ(nlohmann::json::parse(small.out)["gpus_needed"], 1);
  EXPECT_FALSE(nlohmann::json::parse(small.out).contains("tensor_parallel"));
  Result huge = Gpumux("explain --gpu H100 --params 2e12 --json");
  EXPECT_TRUE(nlohmann::json::parse(huge.out)["gpus_needed"].is_null()) << "more than 8";
}

// An engine's line says what it is measured to miss by; an engine that runs a class from a loop
// of its own says so and carries its own band; AutoAWQ's per-head attention shows what it costs.
TEST(Explain, AnEngineSaysItsBandAndWhatItsAttentionCosts) {
  Result chat = Gpumux("explain --gpu A100-80GB --model Llama-3-8B --engine torchchat");
  ASSERT_EQ(chat.exit_code, 0) << chat.out;
  EXPECT_NE(chat.out.find("engine: torchchat"), std::string::npos) << chat.out;
  EXPECT_NE(chat.out.find("runs compiled's constants"), std::string::npos) << chat.out;
  EXPECT_NE(chat.out.find("+ 1.58 ms a step in its own loop"), std::string::npos) << chat.out;
  EXPECT_NE(chat.out.find("within ±5% (median; worst 5%)"), std::string::npos) << chat.out;
  Result vllm = Gpumux("explain --gpu A100-80GB --model Llama-3-8B --engine vllm");
  EXPECT_EQ(vllm.out.find("runs "), std::string::npos) << vllm.out;
  Result awq = Gpumux(
      "explain --gpu RTX-4090 --model Mistral-7B --dtype int4 --quant-group 128 --engine autoawq "
      "--context 3072");
  ASSERT_EQ(awq.exit_code, 0) << awq.out;
  EXPECT_NE(awq.out.find("one block per sequence and query head"), std::string::npos) << awq.out;
  EXPECT_NE(awq.out.find("32 blocks read 403 MB"), std::string::npos) << awq.out;
  Result split =
      Gpumux("explain --gpu RTX-4090 --model Mistral-7B --dtype int4 --engine vllm --context 3072");
  EXPECT_EQ(split.out.find("query head"), std::string::npos) << "vLLM splits the context";
  // The same, for a program: --json carries the loop, the unpacking and the attention.
  nlohmann::json chat_json = nlohmann::json::parse(
      Gpumux("explain --gpu A100-80GB --model Llama-3-8B --engine torchchat --json").out);
  EXPECT_EQ(chat_json["runs"], "compiled");
  EXPECT_GT(chat_json["host_overhead_seconds"].get<double>(), 0);
  EXPECT_GT(chat_json["step_overhead_seconds"].get<double>(),
            chat_json["host_overhead_seconds"].get<double>());
  nlohmann::json awq_json = nlohmann::json::parse(
      Gpumux("explain --gpu RTX-4090 --model Mistral-7B --dtype int4 --quant-group 128 --engine "
             "autoawq --context 3072 --json")
          .out);
  EXPECT_EQ(awq_json["attention"]["blocks"], 32);
  EXPECT_GT(awq_json["attention"]["seconds_per_step"].get<double>(),
            awq_json["attention"]["seconds_at_memory_pace"].get<double>());
  EXPECT_FALSE(awq_json.contains("runs"));
  nlohmann::json q4_json = nlohmann::json::parse(
      Gpumux("explain --gpu A100-80GB --model Llama-2-70B --dtype int4 --engine llama.cpp --json")
          .out);
  EXPECT_TRUE(q4_json["unpacking"]["sets_the_pace"].get<bool>()) << q4_json.dump();
  nlohmann::json split_json = nlohmann::json::parse(
      Gpumux("explain --gpu RTX-4090 --model Mistral-7B --dtype int4 --engine vllm --context 3072 "
             "--json")
          .out);
  EXPECT_FALSE(split_json.contains("attention"));
}

TEST(Explain, SharingVerdictInNumbers) {
  Result ok = Gpumux(
      "explain --gpu H100 --params 13e9 --efficiency 1 --tenants 2 --min-tokens-per-second 50");
  ASSERT_EQ(ok.exit_code, 0) << ok.out;
  EXPECT_NE(ok.out.find("chosen"), std::string::npos) << ok.out;
  Result no = Gpumux(
      "explain --gpu H100 --params 13e9 --efficiency 1 --tenants 2 --min-tokens-per-second 100 "
      "--json");
  ASSERT_EQ(no.exit_code, 0) << no.out;
  auto j = nlohmann::json::parse(no.out);
  EXPECT_FALSE(j["sharing"].contains("chosen"));
  EXPECT_EQ(j["sharing"]["max_copies"], 1);
  for (const auto& c : j["sharing"]["considered"]) {
    EXPECT_NE(c["verdict"].get<std::string>().find("< SLO 100"), std::string::npos) << c["verdict"];
  }
}

TEST(Explain, UnknownNamesExitTwoAndSuggest) {
  Result gpu = Gpumux("explain --gpu H100-SMX5 --params 13e9");
  EXPECT_EQ(gpu.exit_code, 2);
  EXPECT_NE(gpu.out.find("nearest known: H100"), std::string::npos) << gpu.out;
  Result model = Gpumux("explain --gpu H100 --model Lama-3-8B");
  EXPECT_EQ(model.exit_code, 2);
  EXPECT_NE(model.out.find("Llama-3-8B"), std::string::npos) << model.out;
  EXPECT_EQ(Gpumux("explain --gpu H100").exit_code, 2) << "needs --model or --params";
  EXPECT_EQ(Gpumux("explain --gpu H100 --params 13e9 --batch 0").exit_code, 2);
  EXPECT_EQ(Gpumux("explain --gpu H100 --params 13e9 --efficiency 2").exit_code, 2);
}

TEST(Explain, UserCatalogAddsAGpuKind) {
  std::string path = WriteTemp("gpumux_cli_catalog.yaml", R"(gpus:
  - name: My-GPU
    memory: 32 GiB
    memory_bandwidth: 1 TB/s
    tflops: {bf16: 200, fp16: 200, fp8: null, tf32: 100}
    sms: 80
    tdp_watts: 300
)");
  Result r =
      Gpumux("explain --catalog " + path + " --gpu my-gpu --params 7e9 --efficiency 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NEAR(nlohmann::json::parse(r.out)["tokens_per_second"].get<double>(), 1e12 / 14e9, 0.01);
  std::string bad =
      WriteTemp("gpumux_cli_bad_catalog.yaml", "gpus:\n  - name: X\n    memory: 1 GiB\n");
  Result b = Gpumux("explain --catalog " + bad + " --gpu X --params 1e9");
  EXPECT_EQ(b.exit_code, 2);
  EXPECT_NE(b.out.find(bad + ":2:"), std::string::npos) << b.out;
}

TEST(Plan, WorkedExampleSavesGpus) {
  Result r = Gpumux("plan " + Example("p5-48xlarge.yaml") + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["baseline"]["gpus"], 8);
  EXPECT_LT(j["shared"]["gpus"].get<int>(), 8);
  EXPECT_GT(j["gpus_saved"].get<int>(), 0);
  for (const auto& g : j["gpus"]) {
    for (const auto& t : g["chosen"]["tenants"]) EXPECT_TRUE(t["meets_slo"].get<bool>()) << t;
  }
  Result text = Gpumux("plan " + Example("p5-48xlarge.yaml"));
  EXPECT_NE(text.out.find("one job per GPU"), std::string::npos) << text.out;
}

TEST(Plan, MixedFleetPlansEveryTenant) {
  Result r = Gpumux("plan " + Example("mixed-inference-fleet.yaml") + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["unplaced"].empty());
  EXPECT_LT(j["shared"]["gpus"].get<int>(), j["baseline"]["gpus"].get<int>());
}

TEST(Plan, PartialPlanExitsThreeAndNamesTheTenant) {
  std::string path = WriteTemp("gpumux_cli_plan.yaml", R"(fleet:
  - {gpu: L4, count: 2}
tenants:
  - name: huge
    workload: {kind: llm-decode, model: Llama-3-70B}
  - name: tiny
    workload: {kind: llm-decode, model: Qwen2.5-0.5B}
    slo: {max_slowdown: 2}
)");
  Result r = Gpumux("plan " + path);
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_NE(r.out.find("UNPLACED huge"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tiny"), std::string::npos) << r.out;
}

TEST(Plan, BadFileExitsTwoWithLocation) {
  std::string path =
      WriteTemp("gpumux_cli_bad_plan.yaml", "fleet:\n  - {gpu: H100, count: many}\ntenants: []\n");
  Result r = Gpumux("plan " + path);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find(path + ":2:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("'count'"), std::string::npos) << r.out;
  EXPECT_EQ(Gpumux("plan /nonexistent/plan.yaml").exit_code, 2);
}

std::string SmallTrace() {
  std::string nodes =
      WriteTemp("gpumux_cli_nodes.csv",
                "sn,cpu_milli,memory_mib,gpu,model\nn0,96000,393216,8,G2\nn1,104000,524288,2,T4\n"
                "n2,64000,262144,4,V100\n");
  std::string pods = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n";
  const char* rows[] = {"1000,1024,1,500", "8000,16384,1,1000",  "4000,8192,0,0",
                        "2000,4096,1,250", "16000,65536,2,1000", "6000,4096,1,810"};
  for (int i = 0; i < 30; ++i) pods += "p" + std::to_string(i) + "," + rows[i % 6] + "\n";
  return "--nodes " + nodes + " --pods " + WriteTemp("gpumux_cli_pods.csv", pods);
}

TEST(Fleet, SimulateWritesCurvesPlotAndJson) {
  auto out = std::filesystem::temp_directory_path() / "gpumux_cli_fleet";
  std::filesystem::remove_all(out);
  std::filesystem::create_directories(out);
  Result r = Gpumux("fleet simulate " + SmallTrace() +
                    " --policy fgd,bestfit --seeds 3 --json --out " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["policies"].size(), 2u);
  EXPECT_EQ(j["policies"][0]["name"], "fgd");
  EXPECT_EQ(j["policies"][1]["name"], "bestfit");
  for (const auto& p : j["policies"]) {
    double un = p["unallocated_pct_at_100"]["mean"].get<double>();
    double al = p["allocation_pct_at_100"]["mean"].get<double>();
    EXPECT_NEAR(un + al, 100, 1e-9);
    EXPECT_GE(p["unallocated_pct_at_100"]["sd"].get<double>(), 0);
  }
  EXPECT_TRUE(std::filesystem::exists(out / "fleet_curves.csv"));
  std::ifstream svg(out / "fleet_unallocated.svg");
  std::string text((std::istreambuf_iterator<char>(svg)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("<svg"), std::string::npos);
  EXPECT_NE(text.find(">bestfit<"), std::string::npos) << "legend names every policy";
  Result table =
      Gpumux("fleet simulate " + SmallTrace() + " --policy gpumux --seeds 2 --out " + out.string());
  ASSERT_EQ(table.exit_code, 0) << table.out;
  EXPECT_NE(table.out.find("gpumux"), std::string::npos);
}

// Without --out, the curves go to a folder of their own, never over what the current directory
// holds.
TEST(Fleet, SimulateWritesIntoAFolderItNamesNotTheCurrentDirectory) {
  auto here = std::filesystem::temp_directory_path() / "gpumux_cli_fleet_cwd";
  std::filesystem::remove_all(here);
  std::filesystem::create_directories(here);
  std::ofstream(here / "fleet_curves.csv") << "mine\n";
  Result r =
      gpumux::testing::Shell("cd " + here.string() + " && " + GPUMUX_BINARY + " fleet simulate " +
                             SmallTrace() + " --policy bestfit --seeds 1 --json 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::string csv = nlohmann::json::parse(r.out)["csv"];
  EXPECT_EQ(csv.rfind("fleet-gpumux_cli_pods-", 0), 0u) << csv;
  EXPECT_TRUE(std::filesystem::exists(here / csv)) << csv;
  std::ifstream mine(here / "fleet_curves.csv");
  std::string kept;
  std::getline(mine, kept);
  EXPECT_EQ(kept, "mine") << "a file of the same name in the current directory is left alone";
  Result refused = Gpumux("fleet simulate " + SmallTrace() + " --policy bestfit --seeds 1 --out " +
                          (here / "fleet_curves.csv" / "x").string());
  EXPECT_EQ(refused.exit_code, 2) << refused.out;
  EXPECT_NE(refused.out.find("cannot make the folder"), std::string::npos) << refused.out;
}

TEST(Fleet, BadInputExitsTwo) {
  std::string bad = WriteTemp("gpumux_cli_bad_pods.csv",
                              "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,1,1,2000\n");
  Result r =
      Gpumux("fleet simulate --nodes " +
             WriteTemp("gpumux_cli_n.csv", "sn,cpu_milli,memory_mib,gpu,model\nn0,1000,1,1,G2\n") +
             " --pods " + bad + " --seeds 1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find(bad + ":2: gpu_milli 2000 is over 1000"), std::string::npos) << r.out;
  Result policy = Gpumux("fleet simulate " + SmallTrace() + " --policy fdg --seeds 1");
  EXPECT_EQ(policy.exit_code, 2);
  EXPECT_NE(policy.out.find("unknown policy 'fdg'"), std::string::npos) << policy.out;
}

// Bad files, as issue 21 tried them: each exits 2 naming file and field, within bounded time,
// memory and message length.
TEST(Cli, BadFilesExitTwoNamingWhatIsWrongWithinBounds) {
  auto expect = [](const Result& r, const std::string& says) {
    EXPECT_EQ(r.exit_code, 2) << r.out.substr(0, 400);
    EXPECT_NE(r.out.find(says), std::string::npos) << r.out.substr(0, 400);
    EXPECT_LT(r.out.size(), 1000u) << "a bounded message";
  };
  auto dir = std::filesystem::temp_directory_path() / "gpumux_cli_a_directory";
  std::filesystem::create_directories(dir);
  expect(Gpumux("plan " + dir.string()), dir.string() + ": a directory, not a file");
  const std::string fleet = "fleet:\n  - {gpu: H100, count: 2}\n";
  std::string utf8 =
      WriteTemp("gpumux_cli_utf8.yaml", fleet +
                                            "tenants:\n  - name: \"a\xff\xfe"
                                            "b\"\n"
                                            "    workload: {kind: generic, memory: 1 GB, "
                                            "bandwidth: 1 GB/s}\n");
  expect(Gpumux("plan " + utf8 + " --json"), "'name': not valid UTF-8");
  std::string params = WriteTemp("gpumux_cli_params.yaml",
                                 fleet +
                                     "tenants:\n  - name: a\n    workload: {kind: llm-decode, "
                                     "params: 0}\n");
  expect(Gpumux("plan " + params), "'params': must be more than 0");
  std::string count = WriteTemp(
      "gpumux_cli_count.yaml",
      fleet +
          "tenants:\n  - name: a\n    count: 16777216\n    workload: {kind: generic, memory: "
          "1 GB, bandwidth: 1 GB/s}\n");
  expect(Gpumux("plan " + count), "'count'");
  std::string big =
      WriteTemp("gpumux_cli_big.yaml", fleet + "tenants:\n" + std::string(5u << 20, '#') + "\n");
  expect(Gpumux("plan " + big), "bytes such a file may hold");
  std::string json = WriteTemp("gpumux_cli_bad.json", "{\n  \"agent\": {\n    oops\n}\n");
  expect(Gpumux("apply " + json + " --dry-run"), json + ":3: not JSON");
  // A trace whose header is one 1 MB line, and /dev/zero as a pod list.
  std::string nodes =
      WriteTemp("gpumux_cli_nodes_ok.csv", "sn,cpu_milli,memory_mib,gpu,model\nn0,1000,1,1,G2\n");
  std::string wide = WriteTemp("gpumux_cli_wide.csv", std::string(1u << 20, 'x') + "\n");
  expect(Gpumux("fleet simulate --nodes " + nodes + " --pods " + wide + " --seeds 1"),
         wide + ":1: a line of over 65536 bytes");
  expect(Gpumux("fleet simulate --nodes " + nodes + " --pods /dev/zero --seeds 1"),
         "/dev/zero:1: a line of over 65536 bytes");
}

TEST(Cli, HelpAndUsage) {
  Result help = Gpumux("--help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("explain"), std::string::npos);
  EXPECT_NE(help.out.find("plan"), std::string::npos);
  EXPECT_EQ(Gpumux("explain --help").exit_code, 0);
  EXPECT_EQ(Gpumux("").exit_code, 2);
  EXPECT_EQ(Gpumux("frobnicate").exit_code, 2);
}

}  // namespace
