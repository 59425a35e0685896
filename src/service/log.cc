#include "service/log.h"

#include <chrono>
#include <cstdio>
#include <ctime>

namespace gpumux::service {
std::string EscapeQuoted(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\', out += c;
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

void Log(const char* level, const std::string& message,
         const std::vector<std::pair<std::string, std::string>>& fields) {
  std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc;
  gmtime_r(&t, &utc);
  char ts[32];
  std::strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &utc);
  std::string line =
      std::string("ts=") + ts + " level=" + level + " msg=\"" + EscapeQuoted(message) + "\"";
  for (const auto& [k, v] : fields) {
    bool plain = !v.empty() && v.find_first_of(" \"=\n") == std::string::npos;
    line += " " + k + "=" + (plain ? v : "\"" + EscapeQuoted(v) + "\"");
  }
  std::fprintf(stderr, "%s\n", line.c_str());
}

}  // namespace gpumux::service
