// Writing an experiment's curves: a CSV with every metric at every arrived percentage (mean and sd
// over seeds), and an SVG plot of unallocated GPU % against arrived % for every policy.
#pragma once

#include <string>
#include <vector>

#include "fleet/experiment.h"

namespace gpumux::fleet {

// Throws Error (bad input) if the file cannot be written.
void WriteCurvesCsv(const std::string& path, const std::vector<PolicyCurves>& curves, int max_pct);
void WriteUnallocatedSvg(const std::string& path, const std::vector<PolicyCurves>& curves,
                         int max_pct, const std::string& title);

}  // namespace gpumux::fleet
