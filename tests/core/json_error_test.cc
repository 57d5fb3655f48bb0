#include "tessera/core/json_error.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(JsonError, ValidTextHasNoErrorOffset) {
  EXPECT_EQ(JsonErrorOffset(R"({"a": 1})"), 0u);
  EXPECT_EQ(JsonErrorOffset("[1, 2]"), 0u);
}

TEST(JsonError, TheOffsetIsTheFailingByteCountingFromOne) {
  EXPECT_EQ(JsonErrorOffset(R"({"a": })"), 7u);
  EXPECT_EQ(JsonErrorOffset("x"), 1u);
}

TEST(JsonError, LineAndColumnOfAnOffset) {
  const std::string text = "{\n  \"a\": }";
  EXPECT_EQ(JsonErrorOffset(text), 10u);
  EXPECT_EQ(LineColumnAt(text, JsonErrorOffset(text)), "2:8");
  EXPECT_EQ(LineColumnAt("abc", 1), "1:1");
}

}  // namespace
}  // namespace tessera
