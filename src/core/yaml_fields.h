// Strict reading of YAML input files: every field is checked for presence, type and unit, unknown
// fields are refused, and every error names the file, the line and the field. Used by the catalog
// and the plan loader so that both speak about bad input the same way.
#pragma once

#include <yaml-cpp/yaml.h>

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace gpumux {

// The largest plan or catalog file read: a plan of a thousand tenant classes is some 300 KB.
inline constexpr size_t kMaxYamlFileBytes = 4u << 20;

class YamlFields {
 public:
  // Parses `path`. Throws Error (bad input) if the file cannot be read (a directory, over
  // kMaxYamlFileBytes) or is not valid YAML.
  static YAML::Node LoadFile(const std::string& path);

  // Reads the fields of one mapping node. Text fields must be valid UTF-8. `where` names the entry
  // in messages ("GPU 'H100'").
  YamlFields(std::string path, const YAML::Node& node, std::string where);

  // Throws if the node has a key outside `allowed`.
  void AllowOnly(std::initializer_list<std::string_view> allowed) const;

  bool Has(std::string_view key) const;
  const YAML::Node& node() const { return node_; }
  std::string Location(std::string_view key) const;  // "file:line" of the key (or of the node)

  std::string String(std::string_view key) const;
  std::optional<std::string> OptionalString(std::string_view key) const;
  double Number(std::string_view key) const;
  std::optional<double> OptionalNumber(std::string_view key) const;  // null counts as absent
  int Integer(std::string_view key, int min, int max) const;
  bool Bool(std::string_view key, bool default_value) const;
  double Bytes(std::string_view key) const;                         // "80 GiB"
  double Bandwidth(std::string_view key) const;                     // "3.35 TB/s"
  double Flops(std::string_view key) const;                         // "20 TFLOPS"
  double Frequency(std::string_view key) const;                     // "1410 MHz"
  std::vector<std::string> StringList(std::string_view key) const;  // absent -> empty
  YAML::Node Map(std::string_view key) const;                       // must be a mapping
  YAML::Node List(std::string_view key) const;                      // must be a sequence

  // Throws Error (bad input) "file:line: <where>: field 'key': <reason>".
  [[noreturn]] void Fail(std::string_view key, std::string_view reason) const;

 private:
  YAML::Node Get(std::string_view key) const;  // required scalar-or-any
  std::string Scalar(std::string_view key) const;

  std::string path_;
  YAML::Node node_;
  std::string where_;
};

}  // namespace gpumux
