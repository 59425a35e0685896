// `gpumux apply PLAN.json`: brings one node's gpumuxd to what a plan (`gpumux plan --json`) asks of
// it, or with --dry-run prints the calls it would make. `gpumux plan FILE.yaml --apply` does the
// same with the plan it has just made.
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/input_file.h"
#include "cli/commands.h"
#include "cli/node_apply.h"
#include "cli/node_plan_json.h"

namespace gpumux {
namespace {

// A plan's JSON for a node of 64 GPUs and a thousand tenants is some 300 KB.
constexpr size_t kMaxPlanJsonBytes = 16u << 20;

struct ApplyOptions {
  std::string file;
  std::string agent = kDefaultAgentSocket;
  bool dry_run = false;
};

int RunApplyFile(const ApplyOptions& o) {
  std::string text = ReadInputFile(o.file, kMaxPlanJsonBytes);
  nlohmann::json plan;
  try {
    plan = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    size_t at = std::min(e.byte, text.size());
    size_t line = size_t(std::count(text.begin(), text.begin() + long(at), '\n')) + 1;
    throw BadInput(
        fmt::format("{}:{}: not JSON (byte {}; write it with `gpumux plan FILE.yaml "
                    "--json`)",
                    o.file, line, e.byte));
  }
  if (!plan.is_object() || !plan.contains("agent")) {
    throw BadInput(o.file +
                   ": no \"agent\" section (write it with `gpumux plan FILE.yaml --json`)");
  }
  if (plan.contains("unplaced") && plan["unplaced"].is_array() && !plan["unplaced"].empty()) {
    throw DoesNotFit(o.file + ": the plan leaves " + std::to_string(plan["unplaced"].size()) +
                     " tenant(s) unplaced; it is not applied");
  }
  NodePlan node = NodePlanFromJson(plan["agent"], o.file + ": agent");
  bool calibrated = plan.contains("calibrations") && plan["calibrations"].is_array() &&
                    !plan["calibrations"].empty();
  if (!calibrated) {
    auto measured = NodeCalibrations(agent::AgentClient(o.agent).Gpus(), "gpumuxd at " + o.agent);
    if (!measured.empty())
      fmt::print(stderr,
                 "gpumux: note: {} was planned without a calibration, while this node's GPUs "
                 "have one: {} (`gpumux plan FILE.yaml --apply` plans with it)\n",
                 o.file, measured[0].path);
  }
  return ApplyToNode(node, o.agent, o.dry_run);
}

}  // namespace

int ApplyToNode(const NodePlan& plan, const std::string& socket, bool dry_run, std::FILE* out) {
  std::vector<AgentCall> calls = ApplyNodePlan(agent::AgentClient(socket), plan, dry_run);
  if (calls.empty()) {
    fmt::print(out, "gpumuxd at {} already runs this plan: nothing to do\n", socket);
    return kExitOk;
  }
  fmt::print(out, "{} {} call{} to gpumuxd at {}:\n", dry_run ? "would make" : "made", calls.size(),
             calls.size() == 1 ? "" : "s", socket);
  for (const AgentCall& c : calls)
    fmt::print(out, "  {:<48} {} {} {}\n", c.what, c.method, c.path, c.body.dump());
  return kExitOk;
}

Command AddApplyCommand(CLI::App& app) {
  auto o = std::make_shared<ApplyOptions>();
  CLI::App* sub =
      app.add_subcommand("apply",
                         "Bring a node's gpumuxd to a plan: each GPU's sharing mode and MIG "
                         "layout, each tenant's limits (refused as a whole if it cannot be)");
  sub->add_option("plan", o->file, "the plan as `gpumux plan FILE.yaml --json` writes it")
      ->required();
  sub->add_option("--agent", o->agent, "gpumuxd's socket")->capture_default_str();
  sub->add_flag("--dry-run", o->dry_run, "print the calls it would make, and make none");
  return {sub, [o] { return RunApplyFile(*o); }};
}

}  // namespace gpumux
