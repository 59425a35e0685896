// Quantities with units, as written in catalog and plan files and as printed to people.
//
// Parsing accepts a number followed by an optional unit ("80 GiB", "3.35TB/s", "40%"). Decimal
// prefixes (kB, MB, GB, TB) are powers of 1000, binary ones (KiB, MiB, GiB, TiB) powers of 1024.
// Every parser throws Error (bad input), whose what() names the text and the units it expected;
// callers add the file and line.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include "base/error.h"

namespace gpumux {

// "26 GB", "24GiB", "512 MiB", "1e9" (plain bytes) -> bytes.
double ParseBytes(std::string_view text);
// "3.35 TB/s", "864 GB/s", "500 GiB/s" -> bytes per second. A unit is required.
double ParseBandwidth(std::string_view text);
// "20 TFLOPS", "20 TFLOP/s", "500 GFLOPS" -> FLOP per second. A unit is required.
double ParseFlops(std::string_view text);
// "1410 MHz", "1.98 GHz" -> Hz. A unit is required.
double ParseFrequency(std::string_view text);
// "40%" or "0.4" -> 0.4. Must lie in [0, 1].
double ParseFraction(std::string_view text);
// A plain finite number, e.g. "13e9".
double ParseNumber(std::string_view text);

// Three significant figures with a decimal prefix: "26.0 GB", "3.35 TB/s", "3.35 TFLOP/s".
std::string FormatScaled(double value, std::string_view suffix);
std::string FormatBytes(double bytes);
// A size as people gave it: a whole number of MiB (what "24GiB" or "512MiB" is) in binary units,
// exactly ("20 GiB", "1.5 GiB", "512 MiB"); anything else as FormatBytes does.
std::string FormatBytesAsGiven(uint64_t bytes);
std::string FormatBandwidth(double bytes_per_second);
std::string FormatFlops(double flops_per_second);
// 0.3254 -> "32.5%"; values under 1% keep two decimals ("0.34%").
std::string FormatPercent(double fraction);

}  // namespace gpumux
