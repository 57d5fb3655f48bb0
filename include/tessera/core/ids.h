// Strong ids. An Id<Tag> is a small integer (an index into the owning table) that cannot be
// confused with another kind of id or with a count.
//
//   NodeIndex n{3};
//   nodes[n.value()] ...;
//   // TaskIndex t = n;   // does not compile
//
// Thread-safety: plain values.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <limits>

namespace tessera {

template <typename Tag>
class Id {
 public:
  static constexpr uint32_t kInvalidValue = std::numeric_limits<uint32_t>::max();

  constexpr Id() = default;
  constexpr explicit Id(uint32_t v) : value_(v) {}

  constexpr uint32_t value() const { return value_; }
  constexpr bool valid() const { return value_ != kInvalidValue; }

  friend constexpr auto operator<=>(Id, Id) = default;

 private:
  uint32_t value_ = kInvalidValue;
};

struct NodeIndexTag {};
struct TaskIndexTag {};
struct GpuModelIdTag {};

// Position of a node in a ClusterSnapshot.
using NodeIndex = Id<NodeIndexTag>;
// Position of a task in a workload (pod list).
using TaskIndex = Id<TaskIndexTag>;
// Position of a model in a GpuModelCatalog.
using GpuModelId = Id<GpuModelIdTag>;

}  // namespace tessera

template <typename Tag>
struct std::hash<tessera::Id<Tag>> {
  size_t operator()(tessera::Id<Tag> id) const noexcept { return std::hash<uint32_t>()(id.value()); }
};
