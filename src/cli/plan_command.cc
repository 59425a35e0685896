// `gpumux plan FILE.yaml`: the fewest GPUs that meet every tenant's SLO, each GPU with its strategy
// and layout, beside one job per GPU.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/node_apply.h"
#include "cli/node_plan_json.h"
#include "cli/report.h"
#include "core/catalog.h"
#include "core/units.h"
#include "share/plan_file.h"

namespace gpumux {
namespace {

struct PlanOptions {
  std::string file;
  std::vector<std::string> catalogs;
  std::vector<std::string> calibrations;
  bool json = false;
  bool verbose = false;
  bool apply = false;
  bool dry_run = false;
  std::string agent = kDefaultAgentSocket;
};

std::vector<std::string> UtilisationRow(const char* label, const Utilisation& u) {
  return {label,
          fmt::format("{}", u.gpus),
          FormatPercent(u.memory),
          FormatPercent(u.bandwidth),
          FormatPercent(u.flops),
          fmt::format("${:.2f}", u.price_per_hour)};
}

void PrintText(const PlanFile& file, const Plan& plan, const NodePlan& node, bool verbose) {
  size_t next_tenant = 0;  // node.tenants follow the GPUs' tenants in order
  for (const std::string& note : file.notes) fmt::print("note: {}\n", note);
  if (!file.notes.empty()) fmt::print("\n");
  for (size_t i = 0; i < plan.gpus.size(); ++i) {
    const PlannedGpu& g = plan.gpus[i];
    const GpuKind& gpu = *file.input.fleet[g.fleet_index].gpu;
    fmt::print("GPU {} ({}): {} with {} tenant{}\n", node.gpus[i].gpu, gpu.name,
               ShareModeName(g.chosen.kind), g.tenant_names.size(),
               g.tenant_names.size() == 1 ? "" : "s");
    std::vector<std::vector<std::string>> rows = {
        {"tenant", "slice", "rate", "SLO", "slowdown", "memory", "priority"}};
    for (const TenantOutcome& o : g.chosen.tenants) {
      // With a margin for the model's error: the rate carries its band, the SLO the margin.
      std::string band = o.margin > 0 ? fmt::format(" ±{:.0f}%", 100 * o.margin) : "";
      std::string slo = o.required_rate <= 0 ? "-"
                        : o.margin > 0
                            ? fmt::format(">= {:.1f} ({:.1f} +{:.0f}%)", o.required_rate,
                                          o.required_rate * (1 - o.margin), 100 * o.margin)
                            : fmt::format(">= {:.1f}", o.required_rate);
      const NodeTenantPlan& t = node.tenants.at(next_tenant++);
      std::string limits = PriorityName(t.priority);
      if (t.weight != 1) limits += fmt::format(", weight {}", t.weight);
      if (t.compute_percent) limits += fmt::format(", cap {}%", *t.compute_percent);
      rows.push_back({o.name, o.slice, fmt::format("{:.1f} {}{}", o.rate, o.unit, band), slo,
                      fmt::format("{:.2f}x", o.slowdown), FormatBytes(o.memory), limits});
    }
    fmt::print("{}", FormatTable(rows, 4));
    if (g.chosen.layout) {
      fmt::print("    create: {}\n", g.chosen.layout->CreateCommand(*gpu.mig));
    }
    if (verbose || plan.gpus.size() <= 8) {
      fmt::print("{}", FormatConsidered(g.considered, &g.chosen));
    }
  }
  for (const UnplacedTenant& u : plan.unplaced) fmt::print("UNPLACED {}: {}\n", u.name, u.reason);
  fmt::print("\n{}", FormatTable({{"", "GPUs", "memory", "bandwidth", "FLOPs", "$/hour"},
                                  UtilisationRow("shared (gpumux)", plan.shared),
                                  UtilisationRow("one job per GPU", plan.baseline)},
                                 0));
  int saved = plan.baseline.gpus - plan.shared.gpus;
  fmt::print("\n{} GPU{} saved ({}), ${:.2f}/hour{}\n", saved, saved == 1 ? "" : "s",
             plan.baseline.gpus > 0 ? FormatPercent(double(saved) / plan.baseline.gpus) : "-",
             plan.baseline.price_per_hour - plan.shared.price_per_hour,
             plan.exact ? "; GPU count proven minimal"
                        : "; heuristic plan (a large input, or tenants that span GPUs)");
}

nlohmann::json ToJson(const PlanFile& file, const Plan& plan, const NodePlan& node) {
  nlohmann::json j = {{"gpus", nlohmann::json::array()},
                      {"unplaced", nlohmann::json::array()},
                      {"shared", ToJson(plan.shared)},
                      {"baseline", ToJson(plan.baseline)},
                      {"gpus_saved", plan.baseline.gpus - plan.shared.gpus},
                      {"exact", plan.exact},
                      {"notes", file.notes},
                      {"agent", ToJson(node)}};
  for (const PlannedGpu& g : plan.gpus) {
    const GpuKind& gpu = *file.input.fleet[g.fleet_index].gpu;
    nlohmann::json jg = {{"gpu", gpu.name},
                         {"tenants", g.tenant_names},
                         {"chosen", ToJson(g.chosen)},
                         {"considered", nlohmann::json::array()}};
    if (g.node_gpu >= 0) jg["node_gpu"] = g.node_gpu;
    if (g.chosen.layout) jg["mig_create_command"] = g.chosen.layout->CreateCommand(*gpu.mig);
    for (const StrategyResult& r : g.considered) jg["considered"].push_back(ToJson(r));
    j["gpus"].push_back(jg);
  }
  for (const UnplacedTenant& u : plan.unplaced)
    j["unplaced"].push_back({{"name", u.name}, {"reason", u.reason}});
  return j;
}

int RunPlan(const PlanOptions& o) {
  Catalog catalog = Catalog::LoadBundled();
  for (const std::string& path : o.catalogs) catalog.AddFile(path);
  // A plan for this node (--apply) is made with the calibration its gpumuxd has, unless told one,
  // and around the tenants it runs.
  nlohmann::json node_gpus;
  std::optional<LiveNode> live;
  if (o.apply) {
    agent::AgentClient agent(o.agent);
    node_gpus = agent.Gpus();
    live = ReadLiveNode(node_gpus, agent.Tenants());
  }
  std::vector<std::string> calibrations =
      o.apply && o.calibrations.empty()
          ? ApplyCalibrations(catalog, NodeCalibrations(node_gpus, "gpumuxd at " + o.agent))
          : ApplyCalibrationFiles(catalog, o.calibrations);
  PlanFile file = LoadPlanFile(o.file, catalog);
  if (live) file.input.live = &*live;
  Plan plan = PlanFleet(file.input);
  NodePlan node = MakeNodePlan(file.input, plan);
  if (o.json) {
    nlohmann::json j = ToJson(file, plan, node);
    j["calibrations"] = calibrations;
    fmt::print("{}\n", j.dump(2));
  } else {
    for (const std::string& c : calibrations) fmt::print("{}\n", c);
    if (!calibrations.empty()) fmt::print("\n");
    PrintText(file, plan, node, o.verbose);
  }
  if (!plan.unplaced.empty()) {
    if (o.apply)
      fmt::print(stderr, "gpumux: {} tenant(s) fit nowhere: the plan is not applied\n",
                 plan.unplaced.size());
    return kExitPartial;
  }
  if (!o.apply) return kExitOk;
  if (!o.json) fmt::print("\n");
  return ApplyToNode(node, o.agent, o.dry_run, o.json ? stderr : stdout);  // stdout holds the JSON
}

}  // namespace

Command AddPlanCommand(CLI::App& app) {
  auto o = std::make_shared<PlanOptions>();
  CLI::App* sub = app.add_subcommand("plan",
                                     "Fewest GPUs that meet every tenant's SLO, with each GPU's "
                                     "strategy (MIG, MPS, time-slicing) and layout");
  sub->add_option("file", o->file, "plan file (YAML): fleet and tenants; see examples/")
      ->required();
  sub->add_option("--catalog", o->catalogs, "extra catalog file with your own GPU kinds or models");
  sub->add_option("--calibration", o->calibrations,
                  "a `gpumux calibrate` file: its GPU kind's measured efficiencies stand for those "
                  "a workload does not state (default: with --apply the one gpumuxd serves, else "
                  "the node's, in $GPUMUX_CALIBRATION_DIR or /var/lib/gpumux/calibrations; "
                  "'none': none)");
  sub->add_flag("--json", o->json, "print one JSON object instead of tables");
  sub->add_flag("-v,--verbose", o->verbose, "show every strategy considered for every GPU");
  sub->add_flag("--apply", o->apply,
                "then bring this node's gpumuxd to the plan (as `gpumux apply` does)");
  sub->add_option("--agent", o->agent, "gpumuxd's socket, with --apply")->capture_default_str();
  sub->add_flag("--dry-run", o->dry_run,
                "with --apply: print the calls it would make, and make none");
  return {sub, [o] { return RunPlan(*o); }};
}

}  // namespace gpumux
