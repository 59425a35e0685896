#include "core/units.h"

#include <fmt/format.h>
#include <cctype>
#include <charconv>
#include <cmath>
#include <utility>
#include <vector>

namespace gpumux {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Splits "3.35 TB/s" into 3.35 and "TB/s". Throws if there is no leading number.
std::pair<double, std::string_view> SplitNumber(std::string_view text) {
  std::string_view s = Trim(text);
  double value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || !std::isfinite(value)) {
    throw BadInput(fmt::format("'{}' is not a number", text));
  }
  return {value, Trim(std::string_view(end, s.data() + s.size() - end))};
}

struct Unit {
  std::string_view name;
  double scale;
};

double ParseWithUnits(std::string_view text, const std::vector<Unit>& units, bool unit_required,
                      std::string_view what) {
  auto [value, unit] = SplitNumber(text);
  if (value < 0) throw BadInput(fmt::format("'{}' is negative; {} cannot be", text, what));
  if (unit.empty()) {
    if (!unit_required) return value;
  } else {
    for (const Unit& u : units) {
      if (unit == u.name) return value * u.scale;
    }
  }
  std::string expected;
  for (const Unit& u : units) expected += fmt::format("{}{}", expected.empty() ? "" : ", ", u.name);
  throw BadInput(fmt::format("'{}' is not {}: expected a number with one of the units {}", text,
                             what, expected));
}

}  // namespace

std::string FormatScaled(double value, std::string_view suffix) {
  static constexpr std::pair<double, const char*> kPrefixes[] = {
      {1e15, "P"}, {1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}};
  for (auto [scale, prefix] : kPrefixes) {
    if (std::fabs(value) >= scale) {
      double v = value / scale;
      return fmt::format("{:.{}f} {}{}", v, v >= 100 ? 0 : v >= 10 ? 1 : 2, prefix, suffix);
    }
  }
  return fmt::format("{:.3g} {}", value, suffix);
}

double ParseNumber(std::string_view text) {
  auto [value, rest] = SplitNumber(text);
  if (!rest.empty()) throw BadInput(fmt::format("'{}' is not a plain number", text));
  return value;
}

double ParseBytes(std::string_view text) {
  static const std::vector<Unit> kUnits = {{"B", 1},
                                           {"kB", 1e3},
                                           {"KB", 1e3},
                                           {"MB", 1e6},
                                           {"GB", 1e9},
                                           {"TB", 1e12},
                                           {"KiB", 1024.0},
                                           {"MiB", 1048576.0},
                                           {"GiB", 1073741824.0},
                                           {"TiB", 1099511627776.0},
                                           {"G", 1073741824.0},
                                           {"M", 1048576.0}};
  return ParseWithUnits(text, kUnits, /*unit_required=*/false, "a size in bytes");
}

double ParseBandwidth(std::string_view text) {
  static const std::vector<Unit> kUnits = {{"B/s", 1},           {"MB/s", 1e6},
                                           {"GB/s", 1e9},        {"TB/s", 1e12},
                                           {"MiB/s", 1048576.0}, {"GiB/s", 1073741824.0}};
  return ParseWithUnits(text, kUnits, /*unit_required=*/true, "a bandwidth");
}

double ParseFlops(std::string_view text) {
  static const std::vector<Unit> kUnits = {{"FLOPS", 1},     {"FLOP/s", 1},    {"GFLOPS", 1e9},
                                           {"GFLOP/s", 1e9}, {"TFLOPS", 1e12}, {"TFLOP/s", 1e12},
                                           {"PFLOPS", 1e15}, {"PFLOP/s", 1e15}};
  return ParseWithUnits(text, kUnits, /*unit_required=*/true, "a compute rate");
}

double ParseFrequency(std::string_view text) {
  static const std::vector<Unit> kUnits = {{"Hz", 1}, {"kHz", 1e3}, {"MHz", 1e6}, {"GHz", 1e9}};
  return ParseWithUnits(text, kUnits, /*unit_required=*/true, "a frequency");
}

double ParseFraction(std::string_view text) {
  auto [value, unit] = SplitNumber(text);
  if (unit == "%") {
    value /= 100;
  } else if (!unit.empty()) {
    throw BadInput(fmt::format("'{}' is not a fraction: write 40% or 0.4", text));
  }
  if (value < 0 || value > 1) {
    throw BadInput(fmt::format("'{}' is outside 0..100%", text));
  }
  return value;
}

std::string FormatBytes(double bytes) { return FormatScaled(bytes, "B"); }
std::string FormatBytesAsGiven(uint64_t bytes) {
  constexpr uint64_t kMiB = 1ull << 20, kGiB = 1ull << 30, kTiB = 1ull << 40;
  if (bytes == 0 || bytes % kMiB != 0) return FormatBytes(double(bytes));
  // The largest unit that shows it exactly in at most two decimals.
  for (auto [unit, name] : {std::pair{kTiB, "TiB"}, std::pair{kGiB, "GiB"}}) {
    if (bytes >= unit && (bytes % unit) * 100 % unit == 0)
      return fmt::format("{:g} {}", double(bytes) / double(unit), name);
  }
  return fmt::format("{} MiB", bytes / kMiB);
}
std::string FormatBandwidth(double bytes_per_second) {
  return FormatScaled(bytes_per_second, "B/s");
}
std::string FormatFlops(double flops_per_second) {
  return FormatScaled(flops_per_second, "FLOP/s");
}

std::string FormatPercent(double fraction) {
  double pct = fraction * 100;
  return fmt::format("{:.{}f}%", pct, std::fabs(pct) < 1 ? 2 : 1);
}

}  // namespace gpumux
