#include "src/daemon/tokens.h"

#include <gtest/gtest.h>

#include <set>

namespace tessera::daemon {
namespace {

TEST(Tokens, AreLongRandomAndUrlSafe) {
  std::set<std::string> seen;
  for (int k = 0; k < 1000; ++k) {
    const std::string t = *NewToken();
    ASSERT_EQ(t.size(), kTokenPrefix.size() + 43);
    EXPECT_EQ(t.rfind(kTokenPrefix, 0), 0u);
    for (char c : t.substr(kTokenPrefix.size()))
      EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') << t;
    EXPECT_TRUE(seen.insert(t).second);
  }
}

TEST(Tokens, HashIsSha256Hex) {
  // SHA-256("abc"), FIPS 180-2 appendix B.1.
  EXPECT_EQ(TokenHash("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_TRUE(TokenHashesEqual(TokenHash("x"), TokenHash("x")));
  EXPECT_FALSE(TokenHashesEqual(TokenHash("x"), TokenHash("y")));
  EXPECT_FALSE(TokenHashesEqual("ab", "abc"));
}

TEST(Tokens, BearerHeader) {
  EXPECT_EQ(BearerToken("Bearer tsr_abc"), "tsr_abc");
  EXPECT_EQ(BearerToken("bearer   tsr_abc  "), "tsr_abc");
  EXPECT_EQ(BearerToken("Basic dXNlcg=="), "");
  EXPECT_EQ(BearerToken("Bearer "), "");
  EXPECT_EQ(BearerToken(""), "");
}

}  // namespace
}  // namespace tessera::daemon
