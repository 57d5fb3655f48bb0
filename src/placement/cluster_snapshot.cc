#include "tessera/placement/cluster_snapshot.h"

#include <algorithm>
#include <atomic>
#include <bit>

namespace tessera::placement {
namespace {

uint64_t NextUid() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

StatusOr<ClusterSnapshot> ClusterSnapshot::Create(std::vector<NodeSpec> nodes) {
  ClusterSnapshot s;
  s.uid_ = NextUid();
  s.state_.resize(nodes.size());
  s.tags_.resize(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodeSpec& n = nodes[i];
    const std::string where = "node " + std::to_string(i) + " ('" + n.name + "')";
    if (n.cpu.value() < 0) return InvalidArgumentError(where + ": cpu_milli is negative");
    if (n.memory.value() < 0) return InvalidArgumentError(where + ": memory_mib is negative");
    if (n.gpu_count < 0 || n.gpu_count > kMaxGpusPerNode) {
      return InvalidArgumentError(where + ": gpu count " + std::to_string(n.gpu_count) +
                                  " is outside 0.." + std::to_string(kMaxGpusPerNode));
    }
    if (n.gpu_count > 0 && !n.model.valid()) return InvalidArgumentError(where + ": has GPUs but no model");
    if (n.gpu_count == 0 && n.model.valid()) return InvalidArgumentError(where + ": has a GPU model but no GPUs");
    if (n.model.valid() && n.model.value() >= GpuModelCatalog::kMaxModels) {
      return InvalidArgumentError(where + ": GPU model id " + std::to_string(n.model.value()) + " is out of range");
    }
    NodeState& st = s.state_[i];
    st.cpu_free = n.cpu.value();
    st.mem_free = n.memory.value();
    st.gpu_count = static_cast<int16_t>(n.gpu_count);
    st.model_bit = n.gpu_count > 0 ? ModelBit(n.model) : 0;
    for (int g = 0; g < n.gpu_count; ++g) st.gpu_free[g] = 1000;
    s.RefreshDerived(st);
    s.total_gpu_capacity_ += 1000LL * n.gpu_count;
    s.total_cpu_capacity_ += n.cpu.value();
  }
  s.specs_ = std::move(nodes);
  return s;
}

ClusterSnapshot::ClusterSnapshot(const ClusterSnapshot& other)
    : specs_(other.specs_),
      state_(other.state_),
      tags_(other.tags_),
      total_gpu_capacity_(other.total_gpu_capacity_),
      total_cpu_capacity_(other.total_cpu_capacity_),
      allocated_gpu_(other.allocated_gpu_),
      uid_(NextUid()) {}

ClusterSnapshot& ClusterSnapshot::operator=(const ClusterSnapshot& other) {
  if (this != &other) {
    ClusterSnapshot copy(other);
    *this = std::move(copy);
  }
  return *this;
}

void ClusterSnapshot::RefreshDerived(NodeState& s) {
  int64_t sum = 0;
  int32_t mx = 0;
  int16_t full = 0;
  for (int g = 0; g < s.gpu_count; ++g) {
    sum += s.gpu_free[g];
    mx = std::max(mx, s.gpu_free[g]);
    full += s.gpu_free[g] == 1000;
  }
  s.gpu_free_sum = sum;
  s.max_free = mx;
  s.full_free = full;
}

bool ClusterSnapshot::Fits(NodeIndex n, const TaskRequest& t) const {
  const NodeState& s = state_[n.value()];
  if (s.cpu_free < t.cpu.value() || s.mem_free < t.memory.value()) return false;
  if (t.num_gpu == 0) return true;
  if (s.gpu_count == 0) return false;
  if (t.allowed_models != 0 && (t.allowed_models & s.model_bit) == 0) return false;
  const int32_t d = static_cast<int32_t>(t.gpu_milli.value());
  if (d == 1000) return s.full_free >= t.num_gpu;
  if (s.max_free < d) return false;
  if (t.num_gpu == 1) return true;
  int fitting = 0;
  for (int g = 0; g < s.gpu_count; ++g) fitting += s.gpu_free[g] >= d;
  return fitting >= t.num_gpu;
}

Status ClusterSnapshot::Apply(const TaskRequest& t, const Placement& where) {
  if (!where.node.valid() || where.node.value() >= state_.size()) {
    return FailedPreconditionError("placement names node " + std::to_string(where.node.value()) +
                                   " outside the cluster");
  }
  NodeState& s = state_[where.node.value()];
  const std::string& name = specs_[where.node.value()].name;
  if (!Fits(where.node, t)) return FailedPreconditionError("task does not fit on node " + name);
  if (std::popcount(where.gpus) != t.num_gpu || (where.gpus >> s.gpu_count) != 0) {
    return FailedPreconditionError("placement on node " + name + " must name " +
                                   std::to_string(t.num_gpu) + " of its GPUs");
  }
  const int32_t d = static_cast<int32_t>(t.gpu_milli.value());
  for (int g = 0; g < s.gpu_count; ++g) {
    if ((where.gpus & GpuBit(g)) && s.gpu_free[g] < d) {
      return FailedPreconditionError("GPU " + std::to_string(g) + " of node " + name + " has only " +
                                     std::to_string(s.gpu_free[g]) + " milli free");
    }
  }
  s.cpu_free -= t.cpu.value();
  s.mem_free -= t.memory.value();
  for (int g = 0; g < s.gpu_count; ++g) {
    if (where.gpus & GpuBit(g)) s.gpu_free[g] -= d;
  }
  RefreshDerived(s);
  ++s.version;
  if (t.num_gpu > 0) ++tags_[where.node.value()][TaskTag(t)];
  allocated_gpu_ += t.TotalGpu().value();
  return Status::Ok();
}

Status ClusterSnapshot::Undo(const TaskRequest& t, const Placement& where) {
  if (!where.node.valid() || where.node.value() >= state_.size()) {
    return FailedPreconditionError("undo names node " + std::to_string(where.node.value()) +
                                   " outside the cluster");
  }
  NodeState& s = state_[where.node.value()];
  const NodeSpec& spec = specs_[where.node.value()];
  const int32_t d = static_cast<int32_t>(t.gpu_milli.value());
  bool ok = s.cpu_free + t.cpu.value() <= spec.cpu.value() &&
            s.mem_free + t.memory.value() <= spec.memory.value() &&
            std::popcount(where.gpus) == t.num_gpu && (where.gpus >> s.gpu_count) == 0;
  for (int g = 0; ok && g < s.gpu_count; ++g) {
    if ((where.gpus & GpuBit(g)) && s.gpu_free[g] + d > 1000) ok = false;
  }
  if (t.num_gpu > 0 && tags_[where.node.value()][TaskTag(t)] == 0) ok = false;
  if (!ok) return FailedPreconditionError("undo of a task that is not on node " + spec.name);
  s.cpu_free += t.cpu.value();
  s.mem_free += t.memory.value();
  for (int g = 0; g < s.gpu_count; ++g) {
    if (where.gpus & GpuBit(g)) s.gpu_free[g] += d;
  }
  RefreshDerived(s);
  ++s.version;
  if (t.num_gpu > 0) --tags_[where.node.value()][TaskTag(t)];
  allocated_gpu_ -= t.TotalGpu().value();
  return Status::Ok();
}

}  // namespace tessera::placement
