#include "base/input_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "base/error_test_support.h"

namespace gpumux {
namespace {

std::string Temp(const std::string& name, const std::string& text) {
  auto path = std::filesystem::temp_directory_path() /
              ("gpumux_input_" + std::to_string(getpid()) + "_" + name);
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

TEST(InputFile, ReadsWithinItsBoundAndRefusesDirectoriesAndWhatIsLarger) {
  std::string path = Temp("small", "abc");
  EXPECT_EQ(ReadInputFile(path, 3), "abc");
  EXPECT_EQ(ErrorCodeOf([&] { ReadInputFile(path, 2); }), ErrorCode::kBadInput);
  EXPECT_EQ(ErrorCodeOf([&] { ReadInputFile(std::filesystem::temp_directory_path(), 10); }),
            ErrorCode::kBadInput);
  EXPECT_EQ(ErrorCodeOf([&] { ReadInputFile("/dev/zero", 1 << 16); }), ErrorCode::kBadInput)
      << "an endless device is read to the bound, not to its end";
}

TEST(InputFile, LinesAreBoundedAndTheLastNeedsNoEnd) {
  InputLines lines(Temp("lines", "one\ntwo\r\nthree"), 5);
  std::string line;
  ASSERT_TRUE(lines.Next(&line));
  EXPECT_EQ(line, "one");
  ASSERT_TRUE(lines.Next(&line));
  EXPECT_EQ(line, "two\r");
  ASSERT_TRUE(lines.Next(&line));
  EXPECT_EQ(line, "three");
  EXPECT_FALSE(lines.Next(&line));
  InputLines wide(Temp("wide", "abcdef\n"), 5);
  try {
    wide.Next(&line);
    ADD_FAILURE() << "a 6-byte line passed a 5-byte bound";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(":1: a line of over 5 bytes"), std::string::npos);
  }
}

TEST(InputFile, QuotedIsShortAndPrintable) {
  EXPECT_EQ(Quoted("ab\ncd"), "ab?cd");
  EXPECT_EQ(Quoted(std::string(100, 'x'), 4), "xxxx...");
}

TEST(InputFile, IsUtf8TellsValidTextFromBytesThatAreNot) {
  EXPECT_TRUE(IsUtf8("plain"));
  EXPECT_TRUE(IsUtf8("gr\xc3\xbc\xc3\x9f \xe2\x82\xac \xf0\x9f\x98\x80"));
  EXPECT_FALSE(IsUtf8("\xff\xfe"));
  EXPECT_FALSE(IsUtf8("\xc3"));              // cut short
  EXPECT_FALSE(IsUtf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(IsUtf8("\xed\xa0\x80"));      // a surrogate
  EXPECT_FALSE(IsUtf8("\xf4\x90\x80\x80"));  // past U+10FFFF
}

}  // namespace
}  // namespace gpumux
