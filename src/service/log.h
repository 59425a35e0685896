// gpumuxd's log: one structured line per event on stderr (journald keeps it under systemd):
//   ts=2026-12-02T18:26:06Z level=info msg="tenant admitted" tenant=slurm-3.0 gpu=0
//   source="slurm job 3"
// Values with spaces, quotes or '=' are quoted. Thread-safe (one fprintf per line).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace gpumux::service {

// `s` with backslash, double quote and newline escaped (\\, \", \n): the rule for quoted values in
// these log lines and for Prometheus label values alike.
std::string EscapeQuoted(const std::string& s);

void Log(const char* level, const std::string& message,
         const std::vector<std::pair<std::string, std::string>>& fields = {});

}  // namespace gpumux::service
