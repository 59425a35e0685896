#include "core/units.h"

#include <gtest/gtest.h>

namespace gpumux {
namespace {

TEST(ParseBytes, DecimalAndBinaryPrefixes) {
  EXPECT_DOUBLE_EQ(ParseBytes("26 GB"), 26e9);
  EXPECT_DOUBLE_EQ(ParseBytes("80GiB"), 80.0 * (1ull << 30));
  EXPECT_DOUBLE_EQ(ParseBytes("512 MiB"), 512.0 * (1 << 20));
  EXPECT_DOUBLE_EQ(ParseBytes("1e9"), 1e9);
  EXPECT_DOUBLE_EQ(ParseBytes(" 9.75 GiB "), 9.75 * (1ull << 30));
}

TEST(ParseBytes, RefusesUnknownUnitsAndNegatives) {
  EXPECT_THROW(ParseBytes("80 GX"), Error);
  EXPECT_THROW(ParseBytes("-1 GB"), Error);
  EXPECT_THROW(ParseBytes("GB"), Error);
  try {
    ParseBytes("80 gigs");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("GiB"), std::string::npos) << "lists the units it knows";
  }
}

TEST(ParseFrequency, RequiresAUnit) {
  EXPECT_DOUBLE_EQ(ParseFrequency("1410 MHz"), 1.41e9);
  EXPECT_DOUBLE_EQ(ParseFrequency("1.98GHz"), 1.98e9);
  EXPECT_THROW(ParseFrequency("1410"), Error);
  EXPECT_THROW(ParseFrequency("1410 MB/s"), Error);
}

TEST(ParseBandwidth, RequiresAUnit) {
  EXPECT_DOUBLE_EQ(ParseBandwidth("3.35 TB/s"), 3.35e12);
  EXPECT_DOUBLE_EQ(ParseBandwidth("864 GB/s"), 864e9);
  EXPECT_THROW(ParseBandwidth("3.35"), Error);
  EXPECT_THROW(ParseBandwidth("3.35 TB"), Error);
}

TEST(ParseFlopsAndFraction, Basics) {
  EXPECT_DOUBLE_EQ(ParseFlops("20 TFLOPS"), 20e12);
  EXPECT_DOUBLE_EQ(ParseFlops("500 GFLOP/s"), 500e9);
  EXPECT_DOUBLE_EQ(ParseFraction("40%"), 0.4);
  EXPECT_DOUBLE_EQ(ParseFraction("0.25"), 0.25);
  EXPECT_THROW(ParseFraction("140%"), Error);
}

TEST(Format, ThreeSignificantFigures) {
  EXPECT_EQ(FormatBytes(26e9), "26.0 GB");
  EXPECT_EQ(FormatBandwidth(3.35e12), "3.35 TB/s");
  EXPECT_EQ(FormatFlops(989.4e12), "989 TFLOP/s");
  EXPECT_EQ(FormatPercent(0.3254), "32.5%");
  EXPECT_EQ(FormatPercent(0.00339), "0.34%");
}

// A quota given as 20GiB reads "20 GiB", not "21.5 GB"; a size in decimal units reads as before.
TEST(Units, QuotasReadInTheUnitTheyWereGivenIn) {
  EXPECT_EQ(FormatBytesAsGiven(uint64_t(ParseBytes("20GiB"))), "20 GiB");
  EXPECT_EQ(FormatBytesAsGiven(uint64_t(ParseBytes("1.5GiB"))), "1.5 GiB");
  EXPECT_EQ(FormatBytesAsGiven(uint64_t(ParseBytes("512MiB"))), "512 MiB");
  EXPECT_EQ(FormatBytesAsGiven(uint64_t(ParseBytes("1000MiB"))), "1000 MiB") << "not 0.98 GiB";
  EXPECT_EQ(FormatBytesAsGiven(uint64_t(ParseBytes("2TiB"))), "2 TiB");
  EXPECT_EQ(FormatBytesAsGiven(uint64_t(ParseBytes("20GB"))), "20.0 GB");
  EXPECT_EQ(FormatBytesAsGiven(0), FormatBytes(0));
  EXPECT_EQ(FormatBytesAsGiven(~0ull), FormatBytes(double(~0ull))) << "no overflow";
}

}  // namespace
}  // namespace gpumux
