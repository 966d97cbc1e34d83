#include "base/json.h"

#include <gtest/gtest.h>

namespace gpuhost::json {
namespace {

TEST(Json, RoundTripsNestedDocumentInInsertionOrder) {
  auto parsed = parse(R"({"b": 1, "a": [true, null, 2.5, "x\n"], "c": {"d": -7}})");
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_EQ(dump(*parsed), R"({"b":1,"a":[true,null,2.5,"x\n"],"c":{"d":-7}})");
  EXPECT_EQ(parsed->members().front().first, "b");
  EXPECT_EQ((*parsed->find("c")).get_int("d"), -7);
}

TEST(Json, KeepsLargeIntegersExact) {
  auto parsed = parse("[85899345920, 9007199254740993]");
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->items()[0].as_int(), 85899345920LL);
  EXPECT_EQ(parsed->items()[1].as_int(), 9007199254740993LL);
}

TEST(Json, ReportsWhereParsingFailed) {
  auto parsed = parse("{\"a\": [1, 2,, 3]}");
  ASSERT_FALSE(parsed);
  EXPECT_EQ(parsed.error().code, ErrorCode::parse_error);
  EXPECT_NE(parsed.error().message.find("column"), std::string::npos) << parsed.error().message;
}

TEST(Json, BuildsAndPrettyPrints) {
  Value v;
  v["name"] = "gpu0";
  v["temps"].push_back(40);
  v["temps"].push_back(41.5);
  EXPECT_EQ(dump(v, 2), "{\n  \"name\": \"gpu0\",\n  \"temps\": [\n    40,\n    41.5\n  ]\n}");
}

TEST(Json, EscapesControlCharactersAndWritesNanAsNull) {
  Value v = Value::array();
  v.push_back(std::string("a\x01" "b"));
  v.push_back(0.0 / 0.0);
  EXPECT_EQ(dump(v), R"(["a\u0001b",null])");
}

TEST(Json, BytesThatAreNotUtf8AreWrittenAsReplacementCharacters) {
  const std::string fffd = "\xEF\xBF\xBD";
  struct Case {
    std::string in;
    std::string out;
  };
  const Case cases[] = {
      {"caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80",
       "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"},  // valid: kept
      {"a\xFF"
       "b",
       "a" + fffd + "b"},                               // never a UTF-8 byte
      {"\xC0\xAF", fffd + fffd},                        // overlong '/'
      {"\xE0\x80\xAF", fffd + fffd + fffd},             // overlong, three bytes
      {"\xED\xA0\x80", fffd + fffd + fffd},             // a surrogate (U+D800)
      {"\xF4\x90\x80\x80", fffd + fffd + fffd + fffd},  // past U+10FFFF
      {"end\xE2\x82", "end" + fffd + fffd},             // cut short
      {"\x80x", fffd + "x"},                            // a lone continuation byte
  };
  for (const auto& c : cases) {
    const std::string written = dump(Value(c.in));
    EXPECT_EQ(written, "\"" + c.out + "\"");
    auto back = parse(written);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(back->as_string(), c.out);
    EXPECT_EQ(valid_utf8(c.in), c.in == c.out) << written;
  }
  // Keys too.
  Value object = Value::object();
  object[std::string("k\xFF")] = 1;
  EXPECT_EQ(dump(object), "{\"k" + fffd + "\":1}");
}

TEST(Json, LenientGettersFallBackOnWrongType) {
  auto v = parse(R"({"n": "12", "s": 3})");
  ASSERT_TRUE(v);
  EXPECT_EQ(v->get_int("n", -1), -1);
  EXPECT_EQ(v->get_string("s", "none"), "none");
  EXPECT_EQ(v->get_string("missing", "none"), "none");
}

TEST(Json, NumberOutOfRangeIsAParseErrorNotAnException) {
  auto parsed = parse(R"({"loss": 1e400})");
  ASSERT_FALSE(parsed);
  EXPECT_EQ(parsed.error().code, ErrorCode::parse_error);
  EXPECT_NE(parsed.error().message.find("1e400"), std::string::npos) << parsed.error().message;
}

}  // namespace
}  // namespace gpuhost::json
