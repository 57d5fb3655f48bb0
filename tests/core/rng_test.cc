#include "tessera/core/rng.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <numeric>
#include <set>
#include <vector>

#include <gtest/gtest.h>

namespace tessera {
namespace {

// Independent reference implementation of splitmix64 + xoshiro256** (Vigna's public-domain
// reference code), to check that Rng really is that generator (the portability promise).
class ReferenceXoshiro {
 public:
  explicit ReferenceXoshiro(uint64_t seed) {
    uint64_t x = seed;
    for (uint64_t& s : s_) s = SplitMix(x);
  }
  static uint64_t SplitMix(uint64_t& x) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

TEST(RngTest, ReferenceSplitMixKnownValues) {
  // Published splitmix64 outputs for seed 0 (sanity of the reference itself).
  uint64_t x = 0;
  EXPECT_EQ(ReferenceXoshiro::SplitMix(x), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(ReferenceXoshiro::SplitMix(x), 0x6e789e6aa1b965f4ULL);
  EXPECT_EQ(ReferenceXoshiro::SplitMix(x), 0x06c45d188009454fULL);
}

TEST(RngTest, IsXoshiro256StarStarSeededBySplitMix) {
  for (uint64_t seed : {uint64_t{0}, uint64_t{1}, uint64_t{42}, ~uint64_t{0}}) {
    Rng rng(seed);
    ReferenceXoshiro ref(seed);
    for (int i = 0; i < 100; ++i) ASSERT_EQ(rng.Next(), ref.Next()) << "seed " << seed << " draw " << i;
  }
}

// Lemire's nearly divisionless bounded draw with rejection ("Fast Random Integer Generation in
// an Interval", 2019), on top of the reference generator.
uint64_t ReferenceUniform(ReferenceXoshiro& g, uint64_t n) {
  __extension__ typedef unsigned __int128 U128;
  if (n == 0) return 0;
  U128 m = static_cast<U128>(g.Next()) * n;
  uint64_t low = static_cast<uint64_t>(m);
  if (low < n) {
    const uint64_t t = (0 - n) % n;
    while (low < t) {
      m = static_cast<U128>(g.Next()) * n;
      low = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

TEST(RngTest, UniformIsLemireWithRejection) {
  // Bounds where rejection is frequent (2^64 mod n is large) as well as small ones.
  const uint64_t bounds[] = {1, 6, 1000, (uint64_t{3} << 62) + 1, (uint64_t{1} << 63) + 1, ~uint64_t{0}};
  for (uint64_t n : bounds) {
    Rng rng(123);
    ReferenceXoshiro ref(123);
    for (int i = 0; i < 500; ++i) ASSERT_EQ(rng.Uniform(n), ReferenceUniform(ref, n)) << "n " << n << " draw " << i;
    EXPECT_EQ(rng.Next(), ref.Next()) << "same number of raw draws consumed, n " << n;
  }
}

TEST(RngTest, SameSeedSameSequence) {
  Rng a(12345), b(12345);
  for (int i = 0; i < 1000; ++i) {
    ASSERT_EQ(a.Next(), b.Next());
    ASSERT_EQ(a.Uniform(97), b.Uniform(97));
    ASSERT_EQ(a.UniformDouble(), b.UniformDouble());
  }
}

TEST(RngTest, DifferentSeedsDiffer) {
  Rng a(1), b(2);
  int equal = 0;
  for (int i = 0; i < 1000; ++i) equal += a.Next() == b.Next();
  EXPECT_EQ(equal, 0);
}

TEST(RngTest, UniformZeroAndOne) {
  Rng rng(7);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(rng.Uniform(0), 0u);
    EXPECT_EQ(rng.Uniform(1), 0u);
  }
}

TEST(RngTest, UniformStaysInRange) {
  Rng rng(99);
  const uint64_t bounds[] = {2, 3, 6, 7, 1000, uint64_t{1} << 40, (uint64_t{1} << 63) + 1,
                             ~uint64_t{0}};
  for (uint64_t n : bounds) {
    for (int i = 0; i < 2000; ++i) ASSERT_LT(rng.Uniform(n), n) << "n = " << n;
  }
}

TEST(RngTest, UniformHitsEveryValue) {
  Rng rng(3);
  std::set<uint64_t> seen;
  for (int i = 0; i < 500; ++i) seen.insert(rng.Uniform(6));
  EXPECT_EQ(seen, (std::set<uint64_t>{0, 1, 2, 3, 4, 5}));
}

// Pearson chi-square over 60000 draws. For 9 degrees of freedom the 99.99th percentile is about
// 33.7; a broken generator (bias, modulo artefacts, stuck values) lands far above.
double ChiSquare(Rng& rng, uint64_t n, int draws) {
  std::vector<int64_t> counts(n, 0);
  for (int i = 0; i < draws; ++i) ++counts[rng.Uniform(n)];
  const double expected = static_cast<double>(draws) / static_cast<double>(n);
  double chi = 0;
  for (int64_t c : counts) chi += (static_cast<double>(c) - expected) * (static_cast<double>(c) - expected) / expected;
  return chi;
}

TEST(RngTest, UniformIsRoughlyUniform) {
  for (uint64_t seed : {uint64_t{1}, uint64_t{2}, uint64_t{2024}}) {
    Rng rng(seed);
    EXPECT_LT(ChiSquare(rng, 10, 60000), 40.0) << "seed " << seed;
  }
  // A huge bound that is not a power of two exercises Lemire's rejection path (its threshold
  // 2^64 mod n = 2^62 - 1 is large): draws below 2^62 must be about 2^62 / n = 1/3 of all.
  Rng rng(5);
  const uint64_t n = (uint64_t{3} << 62) + 1;  // 0.75 * 2^64 + 1
  int low = 0;
  const int draws = 60000;
  for (int i = 0; i < draws; ++i) low += rng.Uniform(n) < (uint64_t{1} << 62);
  // P(low) = 2^62 / n ~ 1/3; stddev of the count ~ 115.
  EXPECT_NEAR(low, draws / 3, 1000);
}

TEST(RngTest, UniformDoubleInUnitInterval) {
  Rng rng(11);
  double sum = 0;
  const int draws = 60000;
  for (int i = 0; i < draws; ++i) {
    const double u = rng.UniformDouble();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / draws, 0.5, 0.01);
}

TEST(RngTest, UniformDoubleUsesTop53Bits) {
  Rng a(8), b(8);
  for (int i = 0; i < 10; ++i) {
    const uint64_t raw = b.Next();
    EXPECT_EQ(a.UniformDouble(), static_cast<double>(raw >> 11) / 9007199254740992.0);
  }
}

TEST(RngTest, ShuffleIsAPermutation) {
  Rng rng(17);
  std::vector<int> v(100);
  std::iota(v.begin(), v.end(), 0);
  std::vector<int> shuffled = v;
  rng.Shuffle(shuffled);
  EXPECT_NE(shuffled, v);  // 1/100! chance of a false failure
  std::vector<int> sorted = shuffled;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, v);
}

TEST(RngTest, ShuffleIsDeterministicAndHandlesTinyInputs) {
  Rng a(4), b(4);
  std::array<int, 8> x{1, 2, 3, 4, 5, 6, 7, 8};
  std::array<int, 8> y = x;
  a.Shuffle(x);
  b.Shuffle(y);
  EXPECT_EQ(x, y);

  std::vector<int> empty;
  a.Shuffle(empty);
  EXPECT_TRUE(empty.empty());
  std::vector<int> one{42};
  a.Shuffle(one);
  EXPECT_EQ(one, std::vector<int>{42});
}

TEST(RngTest, ShuffleOfThreeHitsAllSixOrders) {
  Rng rng(21);
  std::set<std::vector<int>> orders;
  for (int i = 0; i < 600; ++i) {
    std::vector<int> v{0, 1, 2};
    rng.Shuffle(v);
    orders.insert(v);
  }
  EXPECT_EQ(orders.size(), 6u);
}

TEST(RngTest, ForkIsIndependentOfDrawsSoFar) {
  Rng parent(77);
  Rng early = parent.Fork(7);
  for (int i = 0; i < 50; ++i) parent.Next();
  Rng late = parent.Fork(7);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(early.Next(), late.Next());
}

TEST(RngTest, ForkIsDeterministicPerSeedAndStream) {
  Rng a = Rng(77).Fork(3);
  Rng b = Rng(77).Fork(3);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(a.Next(), b.Next());
}

TEST(RngTest, ForksOfDifferentStreamsOrSeedsDiffer) {
  const Rng root(77);
  std::vector<uint64_t> firsts;
  for (uint64_t stream = 0; stream < 16; ++stream) {
    Rng child = root.Fork(stream);
    firsts.push_back(child.Next());
  }
  firsts.push_back(Rng(78).Fork(0).Next());
  Rng parent_copy(77);
  firsts.push_back(parent_copy.Next());  // a child does not replay its parent
  std::set<uint64_t> distinct(firsts.begin(), firsts.end());
  EXPECT_EQ(distinct.size(), firsts.size());
}

TEST(RngTest, ForkDoesNotAdvanceParent) {
  Rng a(5), b(5);
  (void)a.Fork(1);
  (void)a.Fork(2);
  for (int i = 0; i < 10; ++i) ASSERT_EQ(a.Next(), b.Next());
}

TEST(RngTest, ForkedStreamsAreUncorrelated) {
  Rng x = Rng(1).Fork(1);
  Rng y = Rng(1).Fork(2);
  // Same-bucket rate of two independent Uniform(10) streams is 1/10.
  int same = 0;
  const int draws = 20000;
  for (int i = 0; i < draws; ++i) same += x.Uniform(10) == y.Uniform(10);
  EXPECT_NEAR(same, draws / 10, 300);
}

}  // namespace
}  // namespace tessera
