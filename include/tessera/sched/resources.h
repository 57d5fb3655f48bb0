// Resource vectors for quotas and fair share: GPU milli, GPU memory MiB, and whole GPUs of each
// GPU model that a quota names. The dimensions are fixed per tenant tree (ResourceSpace); a
// Resources value is a small fixed array so that quota checks on the scheduling hot path are a
// handful of integer compares.
//
//   ResourceSpace space({"A100-80GB"});        // dims: gpu_milli, gpu_memory_mib, gpus:A100-80GB
//   Resources a = space.Zero();  a[kGpuMilliDim] = 500;  a[kGpuMemoryDim] = 40960;
//   Resources b = a + a;           // 1000 milli, 81920 MiB
//   b.AllLessEqual(limit)          // true when every dimension is within `limit`
//
// Unlimited is represented by kUnlimited (INT64_MAX / 4, so sums never overflow).
// Thread-safety: plain values.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::sched {

inline constexpr int kMaxResourceDims = 8;
inline constexpr int kGpuMilliDim = 0;
inline constexpr int kGpuMemoryDim = 1;
inline constexpr int kFirstModelDim = 2;
inline constexpr int kMaxQuotaModels = kMaxResourceDims - kFirstModelDim;
inline constexpr int64_t kUnlimited = INT64_MAX / 4;

class Resources {
 public:
  Resources() = default;
  int64_t& operator[](int d) { return v_[d]; }
  int64_t operator[](int d) const { return v_[d]; }

  Resources& operator+=(const Resources& o) {
    for (int d = 0; d < kMaxResourceDims; ++d) v_[d] += o.v_[d];
    return *this;
  }
  Resources& operator-=(const Resources& o) {
    for (int d = 0; d < kMaxResourceDims; ++d) v_[d] -= o.v_[d];
    return *this;
  }
  friend Resources operator+(Resources a, const Resources& b) { return a += b; }
  friend Resources operator-(Resources a, const Resources& b) { return a -= b; }
  friend bool operator==(const Resources&, const Resources&) = default;

  // Every dimension <= the other's.
  bool AllLessEqual(const Resources& o) const {
    for (int d = 0; d < kMaxResourceDims; ++d)
      if (v_[d] > o.v_[d]) return false;
    return true;
  }
  bool AnyNegative() const {
    for (int64_t x : v_)
      if (x < 0) return true;
    return false;
  }
  bool IsZero() const {
    for (int64_t x : v_)
      if (x != 0) return false;
    return true;
  }
  static Resources Filled(int64_t x) {
    Resources r;
    r.v_.fill(x);
    return r;
  }

 private:
  std::array<int64_t, kMaxResourceDims> v_{};
};

// Names the dimensions: "gpu_milli", "gpu_memory_mib", then "gpus:<model>" per quota model.
class ResourceSpace {
 public:
  ResourceSpace() = default;
  // At most kMaxQuotaModels models.
  explicit ResourceSpace(std::vector<std::string> models) : models_(std::move(models)) {}

  int dims() const { return kFirstModelDim + static_cast<int>(models_.size()); }
  const std::vector<std::string>& models() const { return models_; }
  // The dimension of whole GPUs of `model`, or nullopt if no quota names it.
  std::optional<int> ModelDim(std::string_view model) const;
  std::string DimName(int d) const;
  // "gpu_milli=500 gpu_memory_mib=40960" (only the space's dimensions; unlimited prints "inf").
  std::string Format(const Resources& r) const;

 private:
  std::vector<std::string> models_;
};

}  // namespace tessera::sched
