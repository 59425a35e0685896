#include "core/calibration.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "base/error.h"

namespace gpumux {

using nlohmann::json;

namespace {

// The field `key` of `j`, checked: a finite number from `min` to `max`.
double Number(const json& j, const char* key, double min, double max, const std::string& where) {
  if (!j.contains(key) || !j[key].is_number() || !std::isfinite(j[key].get<double>()) ||
      j[key].get<double>() < min || j[key].get<double>() > max)
    throw BadInput(
        fmt::format("{}: '{}' must be a number from {:g} to {:g}", where, key, min, max));
  return j[key].get<double>();
}

std::string Text(const json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j[key].is_string())
    throw BadInput(fmt::format("{}: '{}' must be a string", where, key));
  return j[key].get<std::string>();
}

// The optional field `key` of `j`: process counts from 2 mapped to fractions in (0, 1].
std::map<int, double> UsableByCount(const json& j, const char* key, const std::string& where) {
  std::map<int, double> usable;
  if (!j.contains(key)) return usable;
  if (!j[key].is_object())
    throw BadInput(fmt::format("{}: '{}' must map process counts to fractions", where, key));
  for (auto& [n, v] : j[key].items()) {
    int count = std::atoi(n.c_str());
    if (count < 2 || count > 64 || std::to_string(count) != n || !v.is_number() ||
        !(v.get<double>() > 0 && v.get<double>() <= 1.0))
      throw BadInput(fmt::format(
          "{}: {} '{}' must be a count from 2 mapped to a fraction above 0 and at most 1", where,
          key, n));
    usable[count] = v.get<double>();
  }
  return usable;
}

json UsableJson(const std::map<int, double>& usable) {
  json j = json::object();
  for (auto [n, f] : usable) j[std::to_string(n)] = f;
  return j;
}

}  // namespace

GpuCalibration CalibrationFromJson(const json& j, const std::string& where) {
  if (!j.is_object()) throw BadInput(where + ": not a calibration (expected a JSON object)");
  GpuCalibration c;
  c.gpu = Text(j, "gpu", where);
  c.device_name = Text(j, "device_name", where);
  c.driver = Text(j, "driver", where);
  c.date = Text(j, "date", where);
  if (!j.contains("simulated") || !j["simulated"].is_boolean())
    throw BadInput(where + ": 'simulated' must be true or false");
  c.simulated = j["simulated"].get<bool>();
  c.bandwidth = Number(j, "bandwidth_bytes_per_second", 1e6, 1e15, where);
  c.flops = Number(j, "flops_per_second", 1e6, 1e18, where);
  c.launch_seconds = Number(j, "launch_seconds", 0, 1, where);
  c.sync_seconds = Number(j, "sync_seconds", 0, 1, where);
  c.timeslice_usable = UsableByCount(j, "timeslice_usable", where);
  c.mps_usable = UsableByCount(j, "mps_usable", where);
  return c;
}

json CalibrationToJson(const GpuCalibration& c) {
  json j = {{"gpu", c.gpu},
            {"device_name", c.device_name},
            {"driver", c.driver},
            {"date", c.date},
            {"simulated", c.simulated},
            {"bandwidth_bytes_per_second", c.bandwidth},
            {"flops_per_second", c.flops},
            {"launch_seconds", c.launch_seconds},
            {"sync_seconds", c.sync_seconds},
            {"timeslice_usable", UsableJson(c.timeslice_usable)}};
  if (!c.mps_usable.empty()) j["mps_usable"] = UsableJson(c.mps_usable);
  return j;
}

GpuCalibration LoadCalibration(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw BadInput(path + ": cannot read the calibration file");
  json j = json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw BadInput(path + ": not a calibration file (expected a JSON object)");
  return CalibrationFromJson(j, path);
}

void SaveCalibration(const GpuCalibration& c, const std::string& path) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << CalibrationToJson(c).dump(2) << "\n";
    if (!out.flush()) throw Unavailable(tmp + ": cannot write the calibration");
  }
  std::filesystem::rename(tmp, path);
}

std::string CalibrationDir() {
  const char* dir = std::getenv("GPUMUX_CALIBRATION_DIR");
  return dir && *dir ? dir : "/var/lib/gpumux/calibrations";
}

std::vector<CalibrationFile> LoadCalibrationDir(const std::string& dir, bool simulated_too) {
  std::vector<std::string> paths;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error))
    if (entry.path().extension() == ".json") paths.push_back(entry.path().string());
  std::sort(paths.begin(), paths.end());
  std::vector<CalibrationFile> found;
  for (const std::string& path : paths) {
    GpuCalibration c = LoadCalibration(path);
    if (simulated_too || !c.simulated) found.push_back({path, c});
  }
  return found;
}

std::string DescribeCalibration(const GpuCalibration& c, const std::string& path) {
  return fmt::format("calibration {}: {}{}, {}", path, c.gpu, c.simulated ? " (simulated)" : "",
                     c.date);
}

}  // namespace gpumux
