#include "core/yaml_fields.h"

#include <fmt/format.h>

#include <cmath>

#include "base/input_file.h"
#include "core/units.h"

namespace gpumux {

YAML::Node YamlFields::LoadFile(const std::string& path) {
  // yaml-cpp holds a document in some 60 times its size: the bound keeps that within reason.
  std::string text = ReadInputFile(path, kMaxYamlFileBytes);
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw BadInput(fmt::format("{}:{}: not valid YAML: {}", path, e.mark.line + 1, e.msg));
  }
}

YamlFields::YamlFields(std::string path, const YAML::Node& node, std::string where)
    : path_(std::move(path)), node_(node), where_(std::move(where)) {
  if (!node_.IsMap()) {
    throw BadInput(fmt::format("{}:{}: {}: expected a mapping of fields", path_,
                               node_.Mark().line + 1, where_));
  }
}

void YamlFields::AllowOnly(std::initializer_list<std::string_view> allowed) const {
  for (const auto& kv : node_) {
    if (!kv.first.IsScalar()) {  // "? [a, b]: x" makes a key of a list or a mapping
      throw BadInput(
          fmt::format("{}:{}: {}: a field name must be plain text, not a list or mapping", path_,
                      kv.first.Mark().line + 1, where_));
    }
    std::string key = kv.first.as<std::string>();
    bool known = false;
    std::string list;
    for (std::string_view a : allowed) {
      known |= (key == a);
      list += fmt::format("{}{}", list.empty() ? "" : ", ", a);
    }
    if (!known) {
      throw BadInput(fmt::format("{}:{}: {}: unknown field '{}' (known fields: {})", path_,
                                 kv.first.Mark().line + 1, where_, key, list));
    }
  }
}

bool YamlFields::Has(std::string_view key) const {
  YAML::Node v = node_[std::string(key)];
  return v.IsDefined() && !v.IsNull();
}

std::string YamlFields::Location(std::string_view key) const {
  YAML::Node v = node_[std::string(key)];
  int line = (v.IsDefined() ? v.Mark().line : node_.Mark().line) + 1;
  return fmt::format("{}:{}", path_, line);
}

void YamlFields::Fail(std::string_view key, std::string_view reason) const {
  throw BadInput(fmt::format("{}: {}: field '{}': {}", Location(key), where_, key, reason));
}

YAML::Node YamlFields::Get(std::string_view key) const {
  YAML::Node v = node_[std::string(key)];
  if (!v.IsDefined() || v.IsNull()) Fail(key, "missing");
  return v;
}

std::string YamlFields::Scalar(std::string_view key) const {
  YAML::Node v = Get(key);
  if (!v.IsScalar()) Fail(key, "expected a single value");
  return v.Scalar();
}

std::string YamlFields::String(std::string_view key) const {
  std::string s = Scalar(key);
  if (s.empty()) Fail(key, "must not be empty");
  if (!IsUtf8(s)) Fail(key, "not valid UTF-8 text");
  return s;
}

std::optional<std::string> YamlFields::OptionalString(std::string_view key) const {
  if (!Has(key)) return std::nullopt;
  return String(key);
}

double YamlFields::Number(std::string_view key) const {
  std::string s = Scalar(key);
  double v = 0;
  try {
    v = ParseNumber(s);
  } catch (const Error& e) {
    Fail(key, e.what());
  }
  if (v < 0) Fail(key, fmt::format("{} is negative", s));  // outside the try: not wrapped twice
  return v;
}

std::optional<double> YamlFields::OptionalNumber(std::string_view key) const {
  if (!Has(key)) return std::nullopt;
  return Number(key);
}

int YamlFields::Integer(std::string_view key, int min, int max) const {
  double v = Number(key);
  if (v != std::floor(v)) Fail(key, fmt::format("{} is not a whole number", v));
  if (v < min || v > max) Fail(key, fmt::format("{} is outside {}..{}", v, min, max));
  return int(v);
}

bool YamlFields::Bool(std::string_view key, bool default_value) const {
  if (!Has(key)) return default_value;
  std::string s = Scalar(key);
  if (s == "true") return true;
  if (s == "false") return false;
  Fail(key, fmt::format("'{}' is not true or false", s));
}

double YamlFields::Bytes(std::string_view key) const {
  try {
    return ParseBytes(Scalar(key));
  } catch (const Error& e) {
    Fail(key, e.what());
  }
}

double YamlFields::Bandwidth(std::string_view key) const {
  try {
    return ParseBandwidth(Scalar(key));
  } catch (const Error& e) {
    Fail(key, e.what());
  }
}

double YamlFields::Frequency(std::string_view key) const {
  try {
    return ParseFrequency(Scalar(key));
  } catch (const Error& e) {
    Fail(key, e.what());
  }
}

double YamlFields::Flops(std::string_view key) const {
  try {
    return ParseFlops(Scalar(key));
  } catch (const Error& e) {
    Fail(key, e.what());
  }
}

std::vector<std::string> YamlFields::StringList(std::string_view key) const {
  std::vector<std::string> out;
  if (!Has(key)) return out;
  YAML::Node v = Get(key);
  if (!v.IsSequence()) Fail(key, "expected a list");
  for (const auto& item : v) {
    if (!item.IsScalar()) Fail(key, "expected a list of names");
    out.push_back(item.Scalar());
  }
  return out;
}

YAML::Node YamlFields::Map(std::string_view key) const {
  YAML::Node v = Get(key);
  if (!v.IsMap()) Fail(key, "expected a mapping");
  return v;
}

YAML::Node YamlFields::List(std::string_view key) const {
  YAML::Node v = Get(key);
  if (!v.IsSequence()) Fail(key, "expected a list");
  return v;
}

}  // namespace gpumux
