// The one JSON field reader (tessera/api/json_fields.h).
#include "tessera/api/json_fields.h"

#include <gtest/gtest.h>

namespace tessera::api {
namespace {

using json = nlohmann::json;

TEST(JsonFieldsTest, ErrorsNameTheFieldWithItsPrefix) {
  StatusOr<json> j = ParseJsonObject(R"({"name": "a", "weight": "2"})");
  ASSERT_TRUE(j.ok());
  std::string bad;
  JsonFields f(*j, "quota.", &bad);
  StatusOr<int64_t> w = f.Int("weight", 1, 100, 1);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().message(), "quota.weight: expected an integer, got a string");
  EXPECT_EQ(bad, "quota.weight");
  EXPECT_TRUE(f.OnlyKnown({"name", "weight"}).ok());
  EXPECT_EQ(f.OnlyKnown({"name"}).message(), "quota.weight: unknown field (known: name)");
}

TEST(JsonFieldsTest, AbsentFieldsGiveTheirDefaults) {
  const json j = json::object();
  JsonFields f(j, "", nullptr);
  EXPECT_EQ(*f.Int("n", 0, 9, 7), 7);
  EXPECT_EQ(*f.Str("s", 9), "");
  EXPECT_EQ(*f.Bool("b", true), true);
  EXPECT_TRUE(f.Array("a")->empty());
  EXPECT_TRUE(f.Strings("c")->empty());
  EXPECT_EQ(f.Require("n").message(), "n: missing");
}

TEST(JsonFieldsTest, RangesAndLengthsAreChecked) {
  const json j = {{"n", 10}, {"big", 18446744073709551615ull}, {"s", ""}, {"long", "abcd"}};
  JsonFields f(j, "", nullptr);
  EXPECT_EQ(f.Int("n", 0, 9, 0).status().message(), "n: 10 is out of range 0..9");
  EXPECT_EQ(f.Int("big", 0, 9, 0).status().message(), "big: 18446744073709551615 is out of range 0..9");
  EXPECT_EQ(f.Str("s", 9).status().message(), "s: must not be empty");
  EXPECT_EQ(f.Str("long", 3).status().message(), "long: longer than 3 characters");
}

TEST(JsonFieldsTest, StringsKeepEmptyElementsAndNameABadOne) {
  const json j = {{"command", {"sh", "-c", ""}}, {"bad", {"a", 2}}};
  std::string bad;
  JsonFields f(j, "w.", &bad);
  EXPECT_EQ(*f.Strings("command"), (std::vector<std::string>{"sh", "-c", ""}));
  EXPECT_EQ(f.Strings("bad").status().message(), "w.bad[1]: expected a string, got an integer");
  EXPECT_EQ(bad, "w.bad[1]");
}

TEST(JsonFieldsTest, NestedReadersPrefixTheirPath) {
  const json j = {{"gpus", {{{"index", "x"}}, 3}}};
  std::string bad;
  JsonFields f(j, "", &bad);
  StatusOr<JsonFields> g = f.Nested(j["gpus"][0], "gpus[0]");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->Int("index", 0, 15, 0).status().message(), "gpus[0].index: expected an integer, got a string");
  EXPECT_EQ(bad, "gpus[0].index");
  EXPECT_EQ(f.Nested(j["gpus"][1], "gpus[1]").status().message(), "gpus[1]: expected an object, got an integer");
}

TEST(JsonFieldsTest, ParseSaysWhereTheBodyBreaks) {
  EXPECT_EQ(ParseJsonObject("{\"a\": }").status().message(),
            "the body is not JSON (error at character 7, counting from 1)");
  EXPECT_EQ(ParseJsonObject("[]").status().message(), "the body must be a JSON object");
}

}  // namespace
}  // namespace tessera::api
