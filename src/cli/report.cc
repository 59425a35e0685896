#include "cli/report.h"

#include "base/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace gpumux {

std::vector<std::string> ApplyCalibrations(Catalog& catalog,
                                           const std::vector<CalibrationFile>& calibrations) {
  std::vector<std::string> used;
  for (const CalibrationFile& c : calibrations) {
    try {
      catalog.Calibrate(c.figures);
    } catch (const Error& e) {
      throw e.Within(c.path);
    }
    used.push_back(DescribeCalibration(c.figures, c.path));
  }
  return used;
}

std::vector<std::string> ApplyCalibrationFiles(Catalog& catalog,
                                               const std::vector<std::string>& files) {
  if (files.size() == 1 && files[0] == "none") return {};
  if (files.empty())
    return ApplyCalibrations(catalog,
                             LoadCalibrationDir(CalibrationDir(), /*simulated_too=*/false));
  std::vector<CalibrationFile> calibrations;
  for (const std::string& path : files) calibrations.push_back({path, LoadCalibration(path)});
  return ApplyCalibrations(catalog, calibrations);
}

namespace {

// JSON has no infinity: a headroom without any SLO is written as null.
nlohmann::json Finite(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

}  // namespace

nlohmann::json ToJson(const TenantOutcome& o) {
  nlohmann::json j = {{"name", o.name},
                      {"slice", o.slice},
                      {"unit", o.unit},
                      {"solo_rate", o.solo_rate},
                      {"rate", o.rate},
                      {"required_rate", o.required_rate},
                      {"slo_margin", o.margin},
                      {"slowdown", o.slowdown},
                      {"memory_bytes", o.memory},
                      {"bandwidth_bytes_per_second", o.bandwidth},
                      {"flops_per_second", o.flops},
                      {"meets_slo", o.meets_slo}};
  if (o.stranded_memory > 0 || o.stranded_bandwidth > 0 || o.stranded_flops > 0) {
    j["stranded"] = {{"memory_bytes", o.stranded_memory},
                     {"bandwidth_bytes_per_second", o.stranded_bandwidth},
                     {"flops_per_second", o.stranded_flops}};
  }
  return j;
}

nlohmann::json ToJson(const StrategyResult& r) {
  nlohmann::json j = {{"strategy", std::string(ShareModeName(r.kind))},
                      {"fits", r.fits},
                      {"headroom", Finite(r.headroom)},
                      {"verdict", r.verdict},
                      {"tenants", nlohmann::json::array()}};
  for (const TenantOutcome& o : r.tenants) j["tenants"].push_back(ToJson(o));
  if (r.layout) {
    nlohmann::json instances = nlohmann::json::array();
    for (const MigInstance& inst : r.layout->instances) {
      instances.push_back({{"profile", inst.profile->name},
                           {"profile_id", inst.profile->id},
                           {"start", inst.start},
                           {"size", inst.profile->memory_slices}});
    }
    j["mig_layout"] = instances;
  }
  return j;
}

nlohmann::json ToJson(const Utilisation& u) {
  return {{"gpus", u.gpus},
          {"price_per_hour", u.price_per_hour},
          {"memory_utilisation", u.memory},
          {"bandwidth_utilisation", u.bandwidth},
          {"flops_utilisation", u.flops}};
}

std::string FormatTable(const std::vector<std::vector<std::string>>& rows, size_t indent) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line(indent, ' ');
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string FormatConsidered(const std::vector<StrategyResult>& considered,
                             const StrategyResult* chosen) {
  std::vector<std::vector<std::string>> rows;
  for (const StrategyResult& r : considered) {
    std::string mark = chosen && chosen->kind == r.kind ? "chosen" : r.fits ? "fits" : "loses";
    rows.push_back({std::string(ShareModeName(r.kind)), mark,
                    std::isfinite(r.headroom) ? fmt::format("headroom {:.2f}", r.headroom) : "",
                    r.verdict});
  }
  return FormatTable(rows, 4);
}

}  // namespace gpumux
