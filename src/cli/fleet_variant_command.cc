// `gpumux fleet variant`: a new pod list sampled from one, emphasizing a kind of workload
// (fleet/variant.h), written as a pod list CSV that `gpumux fleet simulate --pods` reads.
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <memory>

#include "base/error.h"
#include "cli/commands.h"
#include "fleet/variant.h"

namespace gpumux {
namespace {

struct VariantOptions {
  std::string pods, nodes, out, growth = "replace";
  fleet::VariantKnobs knobs;
  double sharing = -1, multi_gpu = -1, cpu_only = -1, gpu_spec = -1;  // -1: not given
};

int RunVariant(VariantOptions& o) {
  auto given = [](double v) { return v < 0 ? std::nullopt : std::optional<double>(v); };
  o.knobs.sharing = given(o.sharing);
  o.knobs.multi_gpu = given(o.multi_gpu);
  o.knobs.cpu_only = given(o.cpu_only);
  o.knobs.gpu_spec = given(o.gpu_spec);
  o.knobs.growth =
      o.growth == "add" ? fleet::VariantKnobs::Growth::kAdd : fleet::VariantKnobs::Growth::kReplace;
  std::vector<fleet::NodeSpec> nodes =
      o.nodes.empty() ? std::vector<fleet::NodeSpec>{} : fleet::LoadNodes(o.nodes);
  std::vector<fleet::PodSpec> pods = fleet::MakeVariant(fleet::LoadPods(o.pods), nodes, o.knobs);
  if (o.out.empty()) {
    fleet::WritePods(std::cout, pods);
  } else {
    std::ofstream out(o.out);
    if (!out) throw BadInput(o.out + ": cannot write it");
    fleet::WritePods(out, pods);
  }
  fleet::PodClassShares s = fleet::ClassShares(pods);
  fmt::print(stderr,
             "{} pods: CPU-only {:.1f}%, sharing {:.1f}%, whole {:.1f}%, multi-GPU {:.1f}% of "
             "pods; GPU request "
             "sharing {:.1f}%, whole {:.1f}%, multi-GPU {:.1f}%; {:.1f}% of GPU pods name models\n",
             pods.size(), 100 * s.cpu_only, 100 * s.sharing, 100 * s.whole, 100 * s.multi_gpu,
             100 * s.sharing_request, 100 * s.whole_request, 100 * s.multi_gpu_request,
             100 * s.gpu_spec);
  return kExitOk;
}

}  // namespace

Command AddFleetVariantCommand(CLI::App& app) {
  auto o = std::make_shared<VariantOptions>();
  CLI::App* fleet = app.get_subcommand("fleet");  // made by AddFleetCommand
  CLI::App* sub = fleet->add_subcommand("variant",
                                        "Sample a pod list from another, emphasizing a kind of "
                                        "workload, as the openb variants were made");
  sub->add_option("--pods", o->pods, "source pod list CSV (e.g. openb_pod_list_default.csv)")
      ->required();
  sub->add_option("--nodes", o->nodes, "node list CSV whose GPU models --gpu-spec draws from");
  sub->add_option("--sharing", o->sharing,
                  "share of the GPU request from GPU-sharing pods (0 to <1)");
  sub->add_option("--multi-gpu", o->multi_gpu,
                  "share of the GPU request from multi-GPU pods (0 to <1)");
  sub->add_option("--cpu-only", o->cpu_only, "share of pods that are CPU-only (0 to <1)");
  sub->add_option("--gpu-spec", o->gpu_spec,
                  "share of GPU pods constrained to GPU models of the node list (0 to 1)");
  sub->add_option("--grow", o->growth,
                  "replace: keep the number of GPU pods (as gpushare40); add: keep the pods no "
                  "knob sets (as "
                  "multigpu30)")
      ->check(CLI::IsMember({"replace", "add"}))
      ->capture_default_str();
  sub->add_option("--seed", o->knobs.seed, "random seed")->capture_default_str();
  sub->add_option("--out", o->out, "write the CSV here instead of to stdout");
  return {sub, [o] { return RunVariant(*o); }};
}

}  // namespace gpumux
