// A request body of gpumuxd's API: a JSON object whose fields are read with their type and range
// checked. Every refusal is Error (bad input) naming the field and saying what was expected, so a
// malformed request is a 400 that says what is wrong, never a 500.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpumux::agent {

class RequestBody {
 public:
  // Parses `text` (empty is {}). Throws for text that is not a JSON object.
  explicit RequestBody(const std::string& text);
  // A body already parsed (a plan file's tenant). Throws unless `body` is a JSON object.
  explicit RequestBody(nlohmann::json body);

  // Throws for a field not in `known`, listing them.
  void AllowOnly(std::initializer_list<const char*> known) const;

  bool Has(const char* key) const { return j_.contains(key); }
  // The field, checked; nullopt where it is absent.
  std::optional<int64_t> Integer(const char* key, int64_t min, int64_t max) const;
  std::optional<double> Number(const char* key, double min, double max) const;
  std::optional<bool> Flag(const char* key) const;
  // A string of printable ASCII, 1 to `max_length` characters.
  std::optional<std::string> Text(const char* key, size_t max_length = 255) const;
  std::optional<std::vector<std::string>> TextList(const char* key, size_t max_items = 64) const;
  // A list of 1 to `max_items` whole numbers or strings, as text (3 → "3").
  std::optional<std::vector<std::string>> NumberOrTextList(const char* key, size_t max_items) const;
  // Bytes: a number, or a size string such as "24GiB".
  std::optional<uint64_t> Bytes(const char* key) const;
  // A list of 1 to `max_items` of those (throws where the field is absent or not such a list).
  std::vector<uint64_t> BytesList(const char* key, size_t max_items) const;
  bool IsList(const char* key) const { return Has(key) && j_.at(key).is_array(); }
  bool IsText(const char* key) const { return Has(key) && j_.at(key).is_string(); }
  // Whether the field is a string, or a list that holds one.
  bool HoldsText(const char* key) const {
    if (IsText(key)) return true;
    if (!IsList(key)) return false;
    for (const nlohmann::json& v : j_.at(key))
      if (v.is_string()) return true;
    return false;
  }

 private:
  [[noreturn]] static void Fail(const char* key, const std::string& expected);
  nlohmann::json j_;
};

}  // namespace gpumux::agent
