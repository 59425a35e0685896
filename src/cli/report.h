// Turning results into what people and scripts read: JSON objects and aligned text tables.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "core/calibration.h"
#include "core/catalog.h"
#include "core/workload.h"
#include "share/fleet_planner.h"
#include "share/strategy.h"

namespace gpumux {

// Attaches each calibration to the catalog's GPU kind it names; returns a line saying which each is
// (DescribeCalibration). Throws Error (bad input) naming the calibration's file.
std::vector<std::string> ApplyCalibrations(Catalog& catalog,
                                           const std::vector<CalibrationFile>& calibrations);
// The same for calibration files (`--calibration`), read first; with none given, the node's own
// (LoadCalibrationDir(CalibrationDir(), false)); with the one word "none", none.
std::vector<std::string> ApplyCalibrationFiles(Catalog& catalog,
                                               const std::vector<std::string>& files);

nlohmann::json ToJson(const TenantOutcome& o);
nlohmann::json ToJson(const StrategyResult& r);
nlohmann::json ToJson(const Utilisation& u);

// A text table: the first row is the header; columns are padded to their widest cell.
std::string FormatTable(const std::vector<std::vector<std::string>>& rows, size_t indent = 2);

// "  mps        fits   headroom 1.29  mps: bandwidth demand ... -> a 64.4 tok/s >= SLO 50"
std::string FormatConsidered(const std::vector<StrategyResult>& considered,
                             const StrategyResult* chosen);

}  // namespace gpumux
