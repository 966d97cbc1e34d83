#include "base/yaml.h"

#include <gtest/gtest.h>

namespace gpuhost::yaml {
namespace {

using json::Value;

Value must_parse(std::string_view text) {
  auto v = parse(text);
  EXPECT_TRUE(v) << v.error().message;
  return v ? *v : Value();
}

std::string error_of(std::string_view text) {
  auto v = parse(text);
  EXPECT_FALSE(v) << "parsed: " << json::dump(*v);
  return v ? std::string() : v.error().message;
}

// The shape of a mig-parted v1 file: nested block mappings, a sequence of mappings at the key's
// own indent and deeper, quoted keys, flow lists, {} and comments.
TEST(Yaml, ReadsAMigPartedStyleConfig) {
  const Value v = must_parse(R"(# layouts
version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false   # whole GPUs

  balanced:
  - device-filter: ["0x20B210DE", '0x20B510DE']
    devices: [0, 1]
    mig-enabled: true
    mig-devices:
      "1g.10gb": 2
      "3g.40gb": 1
  empty:
    - devices: all
      mig-enabled: TRUE
      mig-devices: {}
)");
  EXPECT_EQ(
      json::dump(v),
      R"({"version":"v1","mig-configs":{"all-disabled":[{"devices":"all","mig-enabled":false}],)"
      R"("balanced":[{"device-filter":["0x20B210DE","0x20B510DE"],"devices":[0,1],"mig-enabled":true,)"
      R"("mig-devices":{"1g.10gb":2,"3g.40gb":1}}],"empty":[{"devices":"all","mig-enabled":true,"mig-devices":{}}]}})");
}

TEST(Yaml, ScalarsResolveAsTheCoreSchemaAndQuotesKeepStrings) {
  const Value v =
      must_parse("a: 12\nb: -3\nc: '12'\nd: ~\ne:\nf: 0x10\ng: \"t\\u00e9\\n\"\nh: it's\ni: a # b\n");
  EXPECT_EQ(json::dump(v),
            R"({"a":12,"b":-3,"c":"12","d":null,"e":null,"f":"0x10","g":"té\n","h":"it's","i":"a"})");
  EXPECT_EQ(json::dump(must_parse("- - 1\n  - 2\n- x\n-\n  k: v\n")), R"([[1,2],"x",{"k":"v"}])");
  EXPECT_EQ(json::dump(must_parse("{a: [1, {b: c}], 'd e': \"f\"}")), R"({"a":[1,{"b":"c"}],"d e":"f"})");
  EXPECT_EQ(json::dump(must_parse("---\nk: 'it''s'\r\n")), R"({"k":"it's"})");
  EXPECT_TRUE(must_parse("# nothing\n").is_null());
}

TEST(Yaml, RefusesWhatItDoesNotReadWithLineAndColumn) {
  EXPECT_EQ(error_of("a: 1\na: 2\n"), "line 2, column 1: duplicate key 'a'");
  EXPECT_EQ(error_of("a:\n  b: 1\n    c: 2\n"), "line 3, column 5: unexpected indentation");
  EXPECT_EQ(error_of("a: &x 1\nb: *x\n"),
            "line 1, column 4: anchors and aliases (& and *) are not supported: write the value out");
  EXPECT_EQ(error_of("a: |\n  text\n"), "line 1, column 4: block scalars (| and >) are not supported");
  EXPECT_EQ(error_of("a: !!str 1\n"), "line 1, column 4: tags ('!') are not supported");
  EXPECT_EQ(error_of("a: [1, 2\n"),
            "line 1, column 9: a flow sequence that does not end on its line (']' missing)");
  EXPECT_EQ(error_of("a: \"open\n"),
            "line 1, column 9: a quoted string that does not end on its line (\" missing)");
  EXPECT_EQ(error_of("a: b: c\n"),
            "line 1, column 5: a mapping cannot start on the line of another key: put it on the next line, "
            "indented");
  EXPECT_EQ(error_of("a: 1\n---\nb: 2\n"), "line 2, column 1: a second document: one document per file");
  EXPECT_EQ(error_of("a:\n\t- 1\n"), "line 2, column 1: a tab in indentation (YAML indents with spaces)");
  EXPECT_EQ(error_of("a: 1\n- 2\n"), "line 2, column 1: a sequence item where a key was expected");
  EXPECT_EQ(error_of("a:\n  plain\n  more\n"), "line 3, column 3: unexpected indentation");
}

TEST(Yaml, DumpReadsBackEqual) {
  const Value v = must_parse(R"(version: v1
mig-configs:
  current:
    - devices: [0]
      mig-enabled: true
      mig-devices:
        "1g.10gb": 2
        3g.40gb: 1
    - devices: [1]
      mig-enabled: false
    - devices: all
      mig-enabled: true
      mig-devices: {}
odd: ["true", "12", "a: b", "#x", "", null, 2.5]
)");
  const std::string text = yaml::dump(v);
  EXPECT_TRUE(
      text.starts_with("version: v1\nmig-configs:\n  current:\n    - devices: [0]\n      mig-enabled: true\n"
                       "      mig-devices:\n"))
      << text;
  EXPECT_NE(text.find("        \"1g.10gb\": 2\n"), std::string::npos) << text;
  auto back = parse(text);
  ASSERT_TRUE(back) << back.error().message << "\n" << text;
  EXPECT_EQ(*back, v) << text;
}

}  // namespace
}  // namespace gpuhost::yaml
