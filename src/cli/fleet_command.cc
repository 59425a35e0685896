// `gpumux fleet simulate`: replay a cluster trace under placement policies, as the FGD paper's
// artifact does, and report allocation, fragmentation and failed pods.
#include <fmt/format.h>
#include <unistd.h>

#include <ctime>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "base/error.h"
#include "cli/commands.h"
#include "cli/report.h"
#include "fleet/curves_report.h"
#include "fleet/experiment.h"
#include "fleet/policy.h"
#include "fleet/simulator.h"

namespace gpumux {
namespace {

struct FleetOptions {
  std::string nodes, pods, policies = "bestfit,fgd,gpumux", out_dir;  // out_dir "": OutputFolder
  int seeds = 10;
  uint64_t first_seed = 42;
  double inflation = 1.3;
  int jobs = 0;
  bool json = false;
  bool departures = false;
  double time_scale = 1;
  bool scan_every_node = false;
};

std::vector<std::string> SplitComma(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) {
    if (item.empty()) throw BadInput(fmt::format("--policy '{}' has an empty name", s));
    out.push_back(item);
  }
  return out;
}

// --departures: fleet::RunDeparturesExperiment, reported as a table or JSON.
int RunDepartures(const FleetOptions& o, const std::vector<fleet::NodeSpec>& nodes,
                  const std::vector<fleet::PodSpec>& pods, const fleet::ExperimentOptions& eo) {
  std::vector<fleet::PolicyChurn> churn =
      fleet::RunDeparturesExperiment(nodes, pods, eo, o.time_scale);
  auto stat = [](const fleet::PolicyChurn& c, auto field) {
    std::vector<double> values;
    for (const fleet::ChurnResult& r : c.per_seed) values.push_back(double(r.*field));
    return fleet::MeanAndSd(values);
  };
  auto ms = [](fleet::Stat s, int digits) {
    return fmt::format("{:.{}f} ± {:.{}f}", s.mean, digits, s.sd, digits);
  };
  nlohmann::json j = {{"nodes", o.nodes},
                      {"pods", o.pods},
                      {"seeds", o.seeds},
                      {"time_scale", o.time_scale},
                      {"policies", nlohmann::json::array()}};
  std::vector<std::vector<std::string>> rows = {{"policy", "unallocated % (time average)",
                                                 "failed pods", "failed % of GPU request",
                                                 "peak allocation %"}};
  for (const fleet::PolicyChurn& c : churn) {
    auto unallocated = stat(c, &fleet::ChurnResult::unallocated_pct);
    auto failed = stat(c, &fleet::ChurnResult::failed_pods);
    auto failed_pct = stat(c, &fleet::ChurnResult::failed_request_pct);
    auto peak = stat(c, &fleet::ChurnResult::peak_allocation_pct);
    rows.push_back({c.policy, ms(unallocated, 3), ms(failed, 1), ms(failed_pct, 3), ms(peak, 2)});
    j["policies"].push_back(
        {{"name", c.policy},
         {"unallocated_pct", {{"mean", unallocated.mean}, {"sd", unallocated.sd}}},
         {"failed_pods", {{"mean", failed.mean}, {"sd", failed.sd}}},
         {"failed_request_pct", {{"mean", failed_pct.mean}, {"sd", failed_pct.sd}}},
         {"peak_allocation_pct", {{"mean", peak.mean}, {"sd", peak.sd}}}});
  }
  if (o.json) {
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print(
        "Pods arriving at creation_time / {} and leaving after their trace lifetime ({} seeds "
        "from {}, mean ± sd):\n{}",
        o.time_scale, o.seeds, o.first_seed, FormatTable(rows));
  }
  return kExitOk;
}

// Where the curves go: --out, or (never the current directory, which may hold a run's files
// already) fleet-<pods file>-<UTC time>, made as needed. Throws Error (bad input) for a folder
// that cannot be made.
std::string OutputFolder(const FleetOptions& o) {
  std::string dir = o.out_dir;
  if (dir.empty()) {
    std::time_t now = std::time(nullptr);
    char when[32];
    std::strftime(when, sizeof(when), "%Y%m%d-%H%M%S", std::gmtime(&now));
    dir = "fleet-" + std::filesystem::path(o.pods).stem().string() + "-" + when;
  }
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) throw BadInput("--out " + dir + ": cannot make the folder: " + error.message());
  return dir;
}

int RunSimulate(const FleetOptions& o) {
  std::vector<fleet::NodeSpec> nodes = fleet::LoadNodes(o.nodes);
  std::vector<fleet::PodSpec> pods = fleet::LoadPods(o.pods);
  fleet::ExperimentOptions eo;
  eo.policies = SplitComma(o.policies);
  eo.seeds = o.seeds;
  eo.first_seed = o.first_seed;
  eo.inflation = o.inflation;
  eo.scan_every_node = o.scan_every_node;
  eo.jobs = o.jobs > 0 ? o.jobs : int(std::max(1u, std::thread::hardware_concurrency()));
  bool tty = isatty(STDERR_FILENO);
  if (tty) {
    eo.progress = [](int done, int total) {
      int width = 30, filled = total ? width * done / total : width;
      fmt::print(stderr, "\r  [{}{}] {}/{} runs", std::string(filled, '#'),
                 std::string(width - filled, ' '), done, total);
      if (done == total) fmt::print(stderr, "\n");
    };
  }
  if (o.departures) return RunDepartures(o, nodes, pods, eo);
  std::vector<fleet::PolicyCurves> curves = fleet::RunExperiment(nodes, pods, eo);
  std::string dir = OutputFolder(o);
  std::string csv = dir + "/fleet_curves.csv", svg = dir + "/fleet_unallocated.svg";
  fleet::WriteCurvesCsv(csv, curves, eo.max_pct);
  fleet::WriteUnallocatedSvg(
      svg, curves, eo.max_pct,
      fmt::format("Unallocated GPU vs arrived workload: {}, mean of {} seeds",
                  std::filesystem::path(o.pods).filename().string(), o.seeds));

  auto stat_json = [](fleet::Stat s) { return nlohmann::json{{"mean", s.mean}, {"sd", s.sd}}; };
  if (o.json) {
    nlohmann::json j = {{"nodes", o.nodes},
                        {"pods", o.pods},
                        {"seeds", o.seeds},
                        {"first_seed", o.first_seed},
                        {"inflation", o.inflation},
                        {"csv", csv},
                        {"svg", svg},
                        {"policies", nlohmann::json::array()}};
    for (const fleet::PolicyCurves& c : curves) {
      double seconds = 0;
      for (double s : c.seconds_per_run) seconds += s;
      j["policies"].push_back(
          {{"name", c.policy},
           {"unallocated_pct_at_100", stat_json(At(c, 100, &fleet::CurvePoint::unallocated_pct))},
           {"allocation_pct_at_100", stat_json(At(c, 100, &fleet::CurvePoint::allocation_pct))},
           {"frag_capacity_pct_at_100",
            stat_json(At(c, 100, &fleet::CurvePoint::frag_capacity_pct))},
           {"frag_idle_pct_at_100", stat_json(At(c, 100, &fleet::CurvePoint::frag_idle_pct))},
           {"failed_pods_at_100", stat_json(At(c, 100, &fleet::CurvePoint::failed_pods))},
           {"seconds_per_run", seconds / c.seconds_per_run.size()}});
    }
    fmt::print("{}\n", j.dump(2));
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows = {{"policy", "unallocated %", "allocation %",
                                                 "frag % of capacity", "frag % of idle",
                                                 "failed pods", "s/run"}};
  auto ms = [](fleet::Stat s, int digits) {
    return fmt::format("{:.{}f} ± {:.{}f}", s.mean, digits, s.sd, digits);
  };
  for (const fleet::PolicyCurves& c : curves) {
    double seconds = 0;
    for (double s : c.seconds_per_run) seconds += s;
    rows.push_back({c.policy, ms(At(c, 100, &fleet::CurvePoint::unallocated_pct), 2),
                    ms(At(c, 100, &fleet::CurvePoint::allocation_pct), 2),
                    ms(At(c, 100, &fleet::CurvePoint::frag_capacity_pct), 2),
                    ms(At(c, 100, &fleet::CurvePoint::frag_idle_pct), 1),
                    ms(At(c, 100, &fleet::CurvePoint::failed_pods), 0),
                    fmt::format("{:.2f}", seconds / c.seconds_per_run.size())});
  }
  fmt::print("At 100% of GPU capacity arrived ({} seeds from {}, mean ± sd):\n{}", o.seeds,
             o.first_seed, FormatTable(rows));
  fmt::print("curves: {}\nplot:   {}\n", csv, svg);
  return kExitOk;
}

}  // namespace

Command AddFleetCommand(CLI::App& app) {
  auto o = std::make_shared<FleetOptions>();
  CLI::App* fleet =
      app.add_subcommand("fleet", "Fleet scheduling: place GPU-sharing pods across a cluster");
  fleet->require_subcommand(1);
  CLI::App* sim = fleet->add_subcommand(
      "simulate",
      "Replay a trace (openb format) under placement policies, as the FGD paper's artifact does");
  sim->add_option("--nodes", o->nodes, "node list CSV (sn,cpu_milli,memory_mib,gpu,model)")
      ->required();
  sim->add_option("--pods", o->pods,
                  "pod list CSV (name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,...])")
      ->required();
  sim->add_option("--policy", o->policies,
                  "comma-separated: random, dotprod, clustering, packing, bestfit, fgd, gpumux")
      ->capture_default_str();
  sim->add_option("--seeds", o->seeds, "runs per policy, seeds first-seed, first-seed+1, ...")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  sim->add_option("--first-seed", o->first_seed, "first seed")->capture_default_str();
  sim->add_option("--inflation", o->inflation,
                  "arrived GPU request to stop at, as a multiple of capacity")
      ->check(CLI::Range(0.01, 10.0))
      ->capture_default_str();
  sim->add_option("--out", o->out_dir,
                  "folder for fleet_curves.csv and fleet_unallocated.svg, made if missing "
                  "(default: fleet-<pods file>-<UTC time>)");
  sim->add_option("--jobs", o->jobs, "runs in parallel (default: one per core)");
  sim->add_flag("--json", o->json, "print one JSON object instead of a table");
  sim->add_flag("--departures", o->departures,
                "pods arrive and leave at their trace times (creation_time, deletion_time): "
                "time-averaged unallocated GPU % and failed pods");
  sim->add_option("--time-scale", o->time_scale,
                  "with --departures: arrivals at creation_time / SCALE (lifetimes unchanged)")
      ->check(CLI::Range(0.001, 1e6))
      ->capture_default_str();
  sim->add_flag("--scan-every-node", o->scan_every_node,
                "check and score every node for every pod, as the policies' definition reads "
                "(the same placements, slower: the cost bench's baseline)");
  return {sim, [o] { return RunSimulate(*o); }};
}

}  // namespace gpumux
