// The tables of published measurements in bench/fidelity/: comma-separated rows (no field holds a
// comma), lines starting with '#' are comments, and the first other line names the columns.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace gpumux {

// Calls `row(where, fields)` for each data row of `path`, `where` being "path:line". Throws Error
// (bad input) naming the file, and the line where there is one, for a file that cannot be read, no
// header or one other than `columns`, and a row with another number of fields; what `row` throws
// passes through.
void ReadMeasurementRows(
    const std::string& path, const std::vector<std::string>& columns,
    const std::function<void(const std::string& where, const std::vector<std::string>& fields)>&
        row);

// The number `text` in `column` of the row at `where`: at least 0, or above 0 when `positive`.
// Throws Error (bad input) "where: column: 'text' is not a (positive) number" otherwise.
double MeasurementNumber(const std::string& where, const std::string& column,
                         const std::string& text, bool positive = false);

}  // namespace gpumux
