#include "core/calibration.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
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

}  // namespace

GpuCalibration LoadCalibration(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw BadInput(path + ": cannot read the calibration file");
  json j = json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw BadInput(path + ": not a calibration file (expected a JSON object)");
  GpuCalibration c;
  c.gpu = Text(j, "gpu", path);
  c.device_name = Text(j, "device_name", path);
  c.driver = Text(j, "driver", path);
  c.date = Text(j, "date", path);
  if (!j.contains("simulated") || !j["simulated"].is_boolean())
    throw BadInput(path + ": 'simulated' must be true or false");
  c.simulated = j["simulated"].get<bool>();
  c.bandwidth = Number(j, "bandwidth_bytes_per_second", 1e6, 1e15, path);
  c.flops = Number(j, "flops_per_second", 1e6, 1e18, path);
  c.launch_seconds = Number(j, "launch_seconds", 0, 1, path);
  c.sync_seconds = Number(j, "sync_seconds", 0, 1, path);
  if (j.contains("timeslice_usable")) {
    if (!j["timeslice_usable"].is_object())
      throw BadInput(path + ": 'timeslice_usable' must map process counts to fractions");
    for (auto& [n, v] : j["timeslice_usable"].items()) {
      int count = std::atoi(n.c_str());
      if (count < 2 || count > 64 || std::to_string(count) != n || !v.is_number() ||
          !(v.get<double>() > 0 && v.get<double>() <= 1.0))
        throw BadInput(
            fmt::format("{}: timeslice_usable '{}' must be a count from 2 mapped to a "
                        "fraction above 0 and at most 1",
                        path, n));
      c.timeslice_usable[count] = v.get<double>();
    }
  }
  return c;
}

void SaveCalibration(const GpuCalibration& c, const std::string& path) {
  json usable = json::object();
  for (auto [n, f] : c.timeslice_usable) usable[std::to_string(n)] = f;
  json j = {{"gpu", c.gpu},
            {"device_name", c.device_name},
            {"driver", c.driver},
            {"date", c.date},
            {"simulated", c.simulated},
            {"bandwidth_bytes_per_second", c.bandwidth},
            {"flops_per_second", c.flops},
            {"launch_seconds", c.launch_seconds},
            {"sync_seconds", c.sync_seconds},
            {"timeslice_usable", usable}};
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << j.dump(2) << "\n";
    if (!out.flush()) throw Unavailable(tmp + ": cannot write the calibration");
  }
  std::filesystem::rename(tmp, path);
}

std::string DescribeCalibration(const GpuCalibration& c, const std::string& path) {
  return fmt::format("calibration {}: {}{}, {}", path, c.gpu, c.simulated ? " (simulated)" : "",
                     c.date);
}

}  // namespace gpumux
