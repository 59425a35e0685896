#include "node/agent/request_body.h"

#include <cmath>

#include "base/error.h"
#include "core/units.h"

namespace gpumux::agent {
namespace {

bool Printable(const std::string& s) {
  for (char c : s) {
    if (c < 0x20 || c >= 0x7f) return false;
  }
  return true;
}

}  // namespace

RequestBody::RequestBody(const std::string& text) {
  j_ = text.empty() ? nlohmann::json::object() : nlohmann::json::parse(text, nullptr, false);
  if (j_.is_discarded()) throw BadInput("request body: not JSON (or not UTF-8)");
  if (!j_.is_object()) throw BadInput("request body: expected a JSON object");
}

RequestBody::RequestBody(nlohmann::json body) : j_(std::move(body)) {
  if (!j_.is_object()) throw BadInput("request body: expected a JSON object");
}

void RequestBody::AllowOnly(std::initializer_list<const char*> known) const {
  for (const auto& [key, value] : j_.items()) {
    bool ok = false;
    std::string list;
    for (const char* k : known) {
      ok |= key == k;
      list += std::string(list.empty() ? "" : ", ") + k;
    }
    if (!ok) {
      throw BadInput("request body: unknown field " +
                     (Printable(key) && key.size() < 64 ? "'" + key + "'" : "(not shown)") +
                     "; known: " + list);
    }
  }
}

void RequestBody::Fail(const char* key, const std::string& expected) {
  throw BadInput(std::string(key) + ": expected " + expected);
}

std::optional<int64_t> RequestBody::Integer(const char* key, int64_t min, int64_t max) const {
  if (!Has(key)) return std::nullopt;
  const nlohmann::json& v = j_.at(key);
  std::string range = "a whole number from " + std::to_string(min) + " to " + std::to_string(max);
  if (v.is_number_unsigned()) {
    if (v.get<uint64_t>() > uint64_t(max)) Fail(key, range);
    return int64_t(v.get<uint64_t>());
  }
  if (!v.is_number_integer() || v.get<int64_t>() < min || v.get<int64_t>() > max) Fail(key, range);
  return v.get<int64_t>();
}

std::optional<std::vector<std::string>> RequestBody::NumberOrTextList(const char* key,
                                                                      size_t max_items) const {
  if (!Has(key)) return std::nullopt;
  const nlohmann::json& v = j_.at(key);
  std::string expected = "a list of 1 to " + std::to_string(max_items) +
                         " whole numbers or strings of up to 32 characters";
  if (!v.is_array() || v.empty() || v.size() > max_items) Fail(key, expected);
  std::vector<std::string> out;
  for (const nlohmann::json& item : v) {
    if (item.is_number_unsigned())
      out.push_back(std::to_string(item.get<uint64_t>()));
    else if (item.is_string() && !item.get<std::string>().empty() &&
             item.get<std::string>().size() <= 32)
      out.push_back(item.get<std::string>());
    else
      Fail(key, expected);
  }
  return out;
}

std::optional<double> RequestBody::Number(const char* key, double min, double max) const {
  if (!Has(key)) return std::nullopt;
  const nlohmann::json& v = j_.at(key);
  if (!v.is_number() || !(v.get<double>() >= min && v.get<double>() <= max)) {
    Fail(key, "a number from " + std::to_string(min) + " to " + std::to_string(max));
  }
  return v.get<double>();
}

std::optional<bool> RequestBody::Flag(const char* key) const {
  if (!Has(key)) return std::nullopt;
  if (!j_.at(key).is_boolean()) Fail(key, "true or false");
  return j_.at(key).get<bool>();
}

std::optional<std::string> RequestBody::Text(const char* key, size_t max_length) const {
  if (!Has(key)) return std::nullopt;
  const nlohmann::json& v = j_.at(key);
  if (!v.is_string() || v.get<std::string>().empty() || v.get<std::string>().size() > max_length ||
      !Printable(v.get<std::string>())) {
    Fail(key, "a string of 1 to " + std::to_string(max_length) + " printable ASCII characters");
  }
  return v.get<std::string>();
}

std::optional<std::vector<std::string>> RequestBody::TextList(const char* key,
                                                              size_t max_items) const {
  if (!Has(key)) return std::nullopt;
  const nlohmann::json& v = j_.at(key);
  std::string expected = "a list of at most " + std::to_string(max_items) + " strings";
  if (!v.is_array() || v.size() > max_items) Fail(key, expected);
  std::vector<std::string> out;
  for (const nlohmann::json& item : v) {
    if (!item.is_string() || item.get<std::string>().empty() ||
        item.get<std::string>().size() > 64 || !Printable(item.get<std::string>())) {
      Fail(key, expected + " of printable ASCII");
    }
    out.push_back(item.get<std::string>());
  }
  return out;
}

namespace {

// `v` as bytes: a number, or a size string; nullopt for anything else. Throws Error for a size
// string that does not parse, within `key`.
std::optional<uint64_t> AsBytes(const nlohmann::json& v, const char* key) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_string() && v.get<std::string>().size() < 64) {
    try {
      double bytes = ParseBytes(v.get<std::string>());
      if (bytes >= 0 && bytes < 1.8e19) return uint64_t(bytes);
    } catch (const Error& e) {
      throw e.Within(key);
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<uint64_t> RequestBody::Bytes(const char* key) const {
  if (!Has(key)) return std::nullopt;
  if (auto bytes = AsBytes(j_.at(key), key)) return bytes;
  Fail(key, "bytes, or a size such as \"24GiB\"");
}

std::vector<uint64_t> RequestBody::BytesList(const char* key, size_t max_items) const {
  const char* expected = "a list of sizes such as [\"24GiB\", \"40GiB\"]";
  if (!IsList(key) || j_.at(key).empty() || j_.at(key).size() > max_items) Fail(key, expected);
  std::vector<uint64_t> list;
  for (const nlohmann::json& v : j_.at(key)) {
    std::optional<uint64_t> bytes = AsBytes(v, key);
    if (!bytes) Fail(key, expected);
    list.push_back(*bytes);
  }
  return list;
}

}  // namespace gpumux::agent
