#include "cli/args.h"

#include <gtest/gtest.h>

#include "cli/command.h"

namespace gpuhost::cli {
namespace {

constexpr FlagSpec k_specs[] = {{"--json", false}, {"--python", true}, {"--help", false, "-h"}, {"--color", true}};

Result<ParsedArgs> parse(std::vector<std::string> args) { return parse_args(args, k_specs); }

TEST(Args, ParsesFlagsValuesAndPositionals) {
  auto p = parse({"--json", "--python", "/usr/bin/python3", "--python=/opt/venv", "x", "-h"});
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_TRUE(p->has("--json"));
  EXPECT_TRUE(p->has("--help"));
  EXPECT_EQ(p->values("--python"), (std::vector<std::string>{"/usr/bin/python3", "/opt/venv"}));
  EXPECT_EQ(p->value("--python"), "/opt/venv");
  EXPECT_EQ(p->positionals, std::vector<std::string>{"x"});
}

TEST(Args, EverythingAfterDoubleDashIsPositional) {
  auto p = parse({"--json", "--", "python", "--json", "train.py"});
  ASSERT_TRUE(p);
  EXPECT_EQ(p->positionals, (std::vector<std::string>{"python", "--json", "train.py"}));
  EXPECT_EQ(p->values("--json").size(), 1u);
}

TEST(Args, SuggestsTheClosestFlagForATypo) {
  auto p = parse({"--jsno"});
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().message, "unknown flag '--jsno' (did you mean '--json'?)");
}

TEST(Args, RejectsMissingValueAndValueOnBooleanFlag) {
  EXPECT_EQ(parse({"--python"}).error().message, "flag '--python' needs a value");
  EXPECT_EQ(parse({"--json=yes"}).error().message, "flag '--json' takes no value");
}

TEST(Args, CommonOptionsValidateColor) {
  auto p = parse({"--color=never", "--json"});
  ASSERT_TRUE(p);
  auto c = common_options(*p);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->color, ColorMode::never);
  EXPECT_TRUE(c->json);
  auto bad = parse({"--color", "sometimes"});
  ASSERT_TRUE(bad);
  EXPECT_FALSE(common_options(*bad));
}

}  // namespace
}  // namespace gpuhost::cli
