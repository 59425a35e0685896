// Reading what users hand the command line (plan files, catalogs, plans, traces) within bounds:
// a file is refused for what it is (a directory), for its size, or for a line too long, before it
// is read whole, and what an error quotes of it is cut short.
#pragma once

#include <cstddef>
#include <fstream>
#include <string>
#include <string_view>

namespace gpumux {

// The whole of `path`, at most `max_bytes` of it. Throws Error (bad input) naming the file when it
// cannot be opened, is a directory, or holds more than `max_bytes` (a pipe or a device is read up
// to the bound, not to its end).
std::string ReadInputFile(const std::string& path, size_t max_bytes);

// Reads `path` line by line, no line longer than `max_line` bytes. Throws Error (bad input) as
// ReadInputFile, and from Next for a line over the bound ("PATH:LINE: a line of over N bytes").
class InputLines {
 public:
  InputLines(std::string path, size_t max_line);
  // The next line without its end; false at the end of the file.
  bool Next(std::string* line);
  int line_number() const { return line_; }

 private:
  std::string path_;
  std::ifstream in_;
  size_t max_line_;
  int line_ = 0;
};

// `text` as an error message may quote it: at most `max` bytes, "..." marking a cut, and bytes
// that are not printable ASCII shown as '?'.
std::string Quoted(std::string_view text, size_t max = 80);

// Whether `text` is valid UTF-8 (no overlong forms or surrogates).
bool IsUtf8(std::string_view text);

}  // namespace gpumux
