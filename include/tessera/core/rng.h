// Seeded, portable pseudo-random numbers: xoshiro256** seeded through splitmix64. Unlike
// std::uniform_int_distribution, every draw is specified here, so the same seed gives the
// same sequence on every compiler and platform (simulations must be byte-reproducible).
//
//   Rng rng(42);
//   uint64_t die = rng.Uniform(6);          // 0..5, unbiased (Lemire's method)
//   std::vector<int> v{1, 2, 3};
//   rng.Shuffle(v);                          // Fisher-Yates
//   Rng child = rng.Fork(7);                 // independent stream for a sub-component
//
// Thread-safety: not synchronised; one Rng per thread.
#pragma once

#include <cstdint>
#include <span>
#include <utility>

namespace tessera {

class Rng {
 public:
  explicit Rng(uint64_t seed);

  // Next raw 64-bit value.
  uint64_t Next();
  // Uniform integer in [0, n); n must be > 0 (returns 0 for n == 0).
  uint64_t Uniform(uint64_t n);
  // Uniform double in [0, 1).
  double UniformDouble();
  // A new generator whose stream depends on this one's seed and `stream`, not on how many
  // values this one has produced.
  Rng Fork(uint64_t stream) const;

  template <typename T>
  void Shuffle(std::span<T> items) {
    for (size_t i = items.size(); i > 1; --i) {
      size_t j = static_cast<size_t>(Uniform(i));
      std::swap(items[i - 1], items[j]);
    }
  }
  template <typename Container>
  void Shuffle(Container& c) {
    Shuffle(std::span(c.data(), c.size()));
  }

 private:
  uint64_t seed_;
  uint64_t s_[4];
};

}  // namespace tessera
