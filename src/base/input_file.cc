#include "base/input_file.h"

#include <sys/stat.h>

#include <cstdint>

#include "base/error.h"

namespace gpumux {
namespace {

// Refuses what is not a file to read.
void CheckReadable(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) throw BadInput(path + ": cannot open the file");
  if (S_ISDIR(st.st_mode)) throw BadInput(path + ": a directory, not a file");
}

}  // namespace

std::string ReadInputFile(const std::string& path, size_t max_bytes) {
  CheckReadable(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw BadInput(path + ": cannot open the file");
  std::string text;
  char buf[65536];
  while (in.read(buf, sizeof(buf)) || in.gcount() > 0) {
    text.append(buf, size_t(in.gcount()));
    if (text.size() > max_bytes) {
      throw BadInput(path + ": larger than the " + std::to_string(max_bytes) +
                     " bytes such a file may hold");
    }
  }
  return text;
}

InputLines::InputLines(std::string path, size_t max_line)
    : path_(std::move(path)), max_line_(max_line) {
  CheckReadable(path_);
  in_.open(path_, std::ios::binary);
  if (!in_) throw BadInput(path_ + ": cannot open the file");
}

bool InputLines::Next(std::string* line) {
  line->clear();
  if (!in_.good()) return false;
  ++line_;
  for (int c; (c = in_.get()) != EOF;) {
    if (c == '\n') return true;
    if (line->size() == max_line_) {
      throw BadInput(path_ + ":" + std::to_string(line_) + ": a line of over " +
                     std::to_string(max_line_) + " bytes");
    }
    line->push_back(char(c));
  }
  return !line->empty();
}

std::string Quoted(std::string_view text, size_t max) {
  std::string out;
  for (size_t i = 0; i < text.size() && i < max; ++i) {
    char c = text[i];
    out.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  }
  if (text.size() > max) out += "...";
  return out;
}

bool IsUtf8(std::string_view text) {
  static constexpr uint32_t kLeast[] = {0, 0x80, 0x800, 0x10000};  // by continuation bytes
  for (size_t i = 0; i < text.size();) {
    auto c = static_cast<unsigned char>(text[i]);
    size_t n;  // continuation bytes
    if (c < 0x80) {
      n = 0;
    } else if ((c >> 5) == 0x6) {
      n = 1;
    } else if ((c >> 4) == 0xe) {
      n = 2;
    } else if ((c >> 3) == 0x1e) {
      n = 3;
    } else {
      return false;
    }
    if (text.size() - i <= n) return false;
    uint32_t cp = n == 0 ? c : c & (0x3fu >> n);
    for (size_t k = 1; k <= n; ++k) {
      auto d = static_cast<unsigned char>(text[i + k]);
      if ((d & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3f);
    }
    if (cp < kLeast[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += n + 1;
  }
  return true;
}

}  // namespace gpumux
