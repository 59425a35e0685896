#include "core/measurement_csv.h"

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>

#include "base/comma_list.h"
#include "base/error.h"

namespace gpumux {

void ReadMeasurementRows(
    const std::string& path, const std::vector<std::string>& columns,
    const std::function<void(const std::string& where, const std::vector<std::string>& fields)>&
        row) {
  std::ifstream in(path);
  if (!in) throw BadInput(path + ": cannot read the measurements");
  std::string line;
  bool header = false;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> fields = SplitCommas(line);
    std::string where = fmt::format("{}:{}", path, number);
    if (!header) {
      if (fields != columns)
        throw BadInput(where + ": expected the header " +
                       fmt::format("{}", fmt::join(columns, ",")));
      header = true;
      continue;
    }
    if (fields.size() != columns.size())
      throw BadInput(
          fmt::format("{}: {} fields, expected {}", where, fields.size(), columns.size()));
    row(where, fields);
  }
  if (!header) throw BadInput(path + ": no header line");
}

double MeasurementNumber(const std::string& where, const std::string& column,
                         const std::string& text, bool positive) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(positive ? v > 0 : v >= 0))
    throw BadInput(fmt::format("{}: {}: '{}' is not a {}number", where, column, text,
                               positive ? "positive " : ""));
  return v;
}

}  // namespace gpumux
