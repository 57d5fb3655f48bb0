// The read endpoints' shared query parameters (src/daemon/read_query.h): the header's worked
// example, and every bad value an INVALID_ARGUMENT whose message and field name the parameter.
#include "src/daemon/read_query.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessera::daemon {
namespace {

using ::testing::StartsWith;

TEST(ReadQuery, HeaderExample) {
  std::string field = "untouched";
  StatusOr<ReadQuery> q = ParseReadQuery(
      {{"tenant", "vision"}, {"from", "2026-11-01T00:00:00Z"}, {"to", "1796083200"}, {"after", "17"}, {"limit", "50"}},
      &field);
  ASSERT_TRUE(q.ok()) << q.status().message() << " (" << field << ")";
  EXPECT_EQ(q->tenant, "vision");
  EXPECT_EQ(q->from_s, 1793491200);
  EXPECT_EQ(q->to_s, 1796083200);  // 2026-12-01
  EXPECT_EQ(q->after, 17);
  EXPECT_EQ(q->limit, 50);
  EXPECT_EQ(field, "untouched");
}

TEST(ReadQuery, AbsentAndEmptyTenantAreNoneAndZeroAfterIsZero) {
  StatusOr<ReadQuery> none = ParseReadQuery({}, nullptr);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->tenant, "");
  EXPECT_FALSE(none->from_s || none->to_s || none->after || none->limit);
  StatusOr<ReadQuery> q = ParseReadQuery({{"tenant", ""}, {"after", "0"}, {"limit", "1000"}}, nullptr);
  ASSERT_TRUE(q.ok()) << q.status().message();
  EXPECT_EQ(q->tenant, "");
  EXPECT_EQ(q->after, 0);
  EXPECT_EQ(q->limit, 1000);
}

TEST(ReadQuery, EveryBadValueNamesItsParameter) {
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"after", "abc", "after: 'abc' is not an integer >= 0"},
      {"after", "-1", "after: '-1' is not an integer >= 0"},
      {"after", "", "after: '' is not an integer >= 0"},
      {"after", "99999999999999999999", "after: '99999999999999999999' is not an integer >= 0"},
      {"limit", "0", "limit: '0' is not an integer 1..1000"},
      {"limit", "1001", "limit: '1001' is not an integer 1..1000"},
      {"limit", "5x", "limit: '5x' is not an integer 1..1000"},
      {"from", "", "from: '' is empty"},
      {"from", "yesterday", "from: 'yesterday' is not a time"},
      {"to", "2026-13-01T00:00:00Z", "to: '2026-13-01T00:00:00Z'"},
  };
  for (const auto& [name, value, message] : cases) {
    std::string field;
    StatusOr<ReadQuery> q = ParseReadQuery({{name, value}}, &field);
    ASSERT_FALSE(q.ok()) << name << "=" << value;
    EXPECT_EQ(q.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(q.status().message()), StartsWith(message)) << name << "=" << value;
    EXPECT_EQ(field, name) << name << "=" << value;
  }
  std::string field;
  StatusOr<ReadQuery> q = ParseReadQuery({{"from", "1793491200"}, {"to", "1793491200"}}, &field);
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().message(), "from: must be before to");
  EXPECT_EQ(field, "from");
}

}  // namespace
}  // namespace tessera::daemon
