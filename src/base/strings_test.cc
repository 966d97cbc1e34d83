#include "base/strings.h"

#include <gtest/gtest.h>

namespace gpuhost {
namespace {

TEST(Strings, SplitsAndTrims) {
  EXPECT_EQ(split("a,,b", ','), (std::vector<std::string>{"a", "", "b"}));
  EXPECT_EQ(split_whitespace("  a \t b\n"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(split_lines("x\r\ny\n"), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(trim("  x  "), "x");
}

TEST(Strings, ParsesWholeNumbersOnly) {
  EXPECT_EQ(parse_int("42"), 42);
  EXPECT_EQ(parse_int("0x1f", 16), 31);
  EXPECT_FALSE(parse_int("42abc"));
  EXPECT_FALSE(parse_int(""));
  EXPECT_EQ(parse_double(" 2.5 "), 2.5);
  EXPECT_FALSE(parse_double("2.5x"));
}

TEST(Strings, SuggestsCloseCommandsOnly) {
  std::vector<std::string> commands{"doctor", "help", "version", "plan"};
  EXPECT_EQ(closest_match("docter", commands), "doctor");
  EXPECT_EQ(closest_match("doc", commands), "doctor");
  EXPECT_EQ(closest_match("hlep", commands), "help");
  EXPECT_FALSE(closest_match("frobnicate", commands));
}

TEST(Strings, FormatsBinarySizes) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(80.0 * 1024 * 1024 * 1024), "80.0 GiB");
}

}  // namespace
}  // namespace gpuhost
