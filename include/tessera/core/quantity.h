// Strong integer quantities shared by every module: GPU compute in milli-GPU, CPU in
// milli-vCPU, memory in MiB. A Quantity<Tag> only mixes with its own kind, so passing a
// CpuMilli where a GpuMilli is expected does not compile.
//
//   GpuMilli half{500};
//   GpuMilli whole = half + half;          // 1000 = one whole GPU
//   int64_t n = whole.value();             // 1000
//   // GpuMilli bad = half + CpuMilli{1};  // does not compile
//
// Thread-safety: plain values.
#pragma once

#include <compare>
#include <cstdint>

namespace tessera {

template <typename Tag>
class Quantity {
 public:
  constexpr Quantity() = default;
  constexpr explicit Quantity(int64_t v) : value_(v) {}

  constexpr int64_t value() const { return value_; }

  constexpr Quantity& operator+=(Quantity o) {
    value_ += o.value_;
    return *this;
  }
  constexpr Quantity& operator-=(Quantity o) {
    value_ -= o.value_;
    return *this;
  }
  friend constexpr Quantity operator+(Quantity a, Quantity b) { return Quantity(a.value_ + b.value_); }
  friend constexpr Quantity operator-(Quantity a, Quantity b) { return Quantity(a.value_ - b.value_); }
  friend constexpr Quantity operator*(Quantity a, int64_t k) { return Quantity(a.value_ * k); }
  friend constexpr Quantity operator*(int64_t k, Quantity a) { return Quantity(a.value_ * k); }
  friend constexpr auto operator<=>(Quantity, Quantity) = default;

 private:
  int64_t value_ = 0;
};

struct GpuMilliTag {};
struct CpuMilliTag {};
struct MiBTag {};

// GPU compute share; 1000 = one whole GPU (the Alibaba trace's unit).
using GpuMilli = Quantity<GpuMilliTag>;
// CPU share; 1000 = one vCPU (Kubernetes' unit).
using CpuMilli = Quantity<CpuMilliTag>;
// Memory in mebibytes (APIs and traces; the shim uses bytes).
using MiB = Quantity<MiBTag>;

inline constexpr GpuMilli kWholeGpu{1000};

}  // namespace tessera
