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
    if (!n.gpu_models.empty()) TESSERA_RETURN_IF_ERROR(s.InitModelGroups(i, n, where));
    for (int g = 0; g < n.gpu_count; ++g) st.gpu_free[g] = 1000;
    if (n.mig != nullptr || !n.mig_in_use.empty() || !n.mig_fixed.empty()) {
      TESSERA_RETURN_IF_ERROR(s.InitMigNode(i, n, where));
    }
    s.RefreshDerived(st);
    s.total_gpu_capacity_ += 1000LL * n.gpu_count;
    s.total_cpu_capacity_ += n.cpu.value();
  }
  s.specs_ = std::move(nodes);
  return s;
}

Status ClusterSnapshot::InitModelGroups(size_t i, const NodeSpec& n, const std::string& where) {
  if (static_cast<int>(n.gpu_models.size()) != n.gpu_count) {
    return InvalidArgumentError(where + ": gpu_models has " + std::to_string(n.gpu_models.size()) + " models for " +
                                std::to_string(n.gpu_count) + " GPUs");
  }
  if (n.gpu_models[0] != n.model) return InvalidArgumentError(where + ": model must be gpu_models[0]");
  std::vector<ModelGroup> groups;
  for (int g = 0; g < n.gpu_count; ++g) {
    const GpuModelId m = n.gpu_models[static_cast<size_t>(g)];
    if (!m.valid() || m.value() >= GpuModelCatalog::kMaxModels) {
      return InvalidArgumentError(where + ": gpu_models[" + std::to_string(g) + "] is not a valid model id");
    }
    auto it = std::find_if(groups.begin(), groups.end(), [&](const ModelGroup& x) { return x.model_bit == ModelBit(m); });
    if (it == groups.end()) it = groups.insert(groups.end(), ModelGroup{ModelBit(m), 0});
    it->gpus |= GpuBit(g);
  }
  if (groups.size() == 1) return Status::Ok();  // one model after all: an ordinary node
  if (n.mig != nullptr) return InvalidArgumentError(where + ": a node with GPUs of several models cannot be in MIG mode");
  if (groups_.empty()) groups_.resize(state_.size());
  NodeState& st = state_[i];
  st.mixed = true;
  for (const ModelGroup& x : groups) st.model_bit |= x.model_bit;
  groups_[i] = std::move(groups);
  return Status::Ok();
}

GpuSet ClusterSnapshot::ModelGpus(NodeIndex n, ModelMask models) const {
  const NodeState& s = state_[n.value()];
  const GpuSet all = GpusOfCount(s.gpu_count);
  if (models == 0) return all;
  if (!s.mixed) return (models & s.model_bit) != 0 ? all : 0;
  GpuSet out = 0;
  for (const ModelGroup& g : groups_[n.value()])
    if ((models & g.model_bit) != 0) out |= g.gpus;
  return out;
}

ModelMask ClusterSnapshot::ModelOfGpus(NodeIndex n, GpuSet gpus) const {
  const NodeState& s = state_[n.value()];
  if (!s.mixed) return s.model_bit;
  if (gpus == 0) return 0;
  const GpuSet lowest = gpus & (~gpus + 1);
  for (const ModelGroup& g : groups_[n.value()])
    if ((g.gpus & lowest) != 0) return g.model_bit;
  return 0;
}

Status ClusterSnapshot::InitMigNode(size_t i, const NodeSpec& n, const std::string& where) {
  if (n.mig == nullptr) return InvalidArgumentError(where + ": has MIG instances in use but no MIG geometry");
  if (n.gpu_count == 0) return InvalidArgumentError(where + ": has a MIG geometry but no GPUs");
  const MigGeometry& g = *n.mig;
  if (g.memory_slices < 1 || g.memory_slices > kMaxMigSlices) {
    return InvalidArgumentError(where + ": MIG geometry has " + std::to_string(g.memory_slices) +
                                " memory slices; supported 1.." + std::to_string(kMaxMigSlices));
  }
  if (g.profiles.empty() || g.profiles.size() > 127) {
    return InvalidArgumentError(where + ": MIG geometry has " + std::to_string(g.profiles.size()) +
                                " profiles; supported 1..127");
  }
  for (const MigProfile& p : g.profiles) {
    if (p.size < 1 || p.size > g.memory_slices) {
      return InvalidArgumentError(where + ": MIG profile " + p.name + " has placement size " + std::to_string(p.size) +
                                  ", outside 1.." + std::to_string(g.memory_slices));
    }
  }
  if (!n.mig_in_use.empty() && static_cast<int>(n.mig_in_use.size()) != n.gpu_count) {
    return InvalidArgumentError(where + ": mig_in_use has " + std::to_string(n.mig_in_use.size()) +
                                " layouts for " + std::to_string(n.gpu_count) + " GPUs");
  }
  if (!n.mig_fixed.empty() && static_cast<int>(n.mig_fixed.size()) != n.gpu_count) {
    return InvalidArgumentError(where + ": mig_fixed has " + std::to_string(n.mig_fixed.size()) + " layouts for " +
                                std::to_string(n.gpu_count) + " GPUs");
  }
  if (mig_.empty()) mig_.resize(state_.size());
  NodeState& st = state_[i];
  st.mig = true;
  std::vector<MigGpuState>& gpus = mig_[i];
  gpus.assign(static_cast<size_t>(n.gpu_count), MigGpuState{});
  for (size_t k = 0; k < n.mig_fixed.size(); ++k) {
    if (Status v = partition::ValidateLayout(g, n.mig_fixed[k]); !v.ok()) {
      return InvalidArgumentError(where + ", GPU " + std::to_string(k) + " (fixed layout): " + v.message());
    }
    gpus[k].fixed = true;
    for (const partition::MigInstance& inst : n.mig_fixed[k])
      gpus[k].exists[static_cast<size_t>(inst.start)] = static_cast<int8_t>(inst.profile);
    for (const partition::MigInstance& inst : k < n.mig_in_use.size() ? n.mig_in_use[k] : partition::MigLayout{})
      if (gpus[k].exists[static_cast<size_t>(inst.start)] != inst.profile)
        return InvalidArgumentError(where + ", GPU " + std::to_string(k) + ": an instance in use is not in its fixed layout");
  }
  for (size_t k = 0; k < n.mig_in_use.size(); ++k) {
    if (Status v = partition::ValidateLayout(g, n.mig_in_use[k]); !v.ok()) {
      return InvalidArgumentError(where + ", GPU " + std::to_string(k) + ": " + v.message());
    }
    for (const partition::MigInstance& inst : n.mig_in_use[k]) {
      MigAdd(g, gpus[k], inst.profile, inst.start, +1);
      const int32_t milli = MigInstanceMilli(g, inst.profile);
      st.gpu_free[k] -= milli;
      allocated_gpu_ += milli;
    }
  }
  return Status::Ok();
}

int32_t ClusterSnapshot::MigInstanceMilli(const MigGeometry& geometry, int profile) {
  return static_cast<int32_t>(1000 * geometry.profiles[static_cast<size_t>(profile)].size / geometry.memory_slices);
}

uint32_t ClusterSnapshot::MigValidStarts(const MigGeometry& g, const MigGpuState& st, int profile) {
  if (profile < 0 || static_cast<size_t>(profile) >= g.profiles.size()) return 0;
  const MigProfile& p = g.profiles[static_cast<size_t>(profile)];
  if (st.instances >= g.max_gpu_instances || st.compute + p.compute_slices > g.compute_slices) return 0;
  int count = 0;
  for (int8_t a : st.at) count += a == profile;
  if (count >= p.max_count) return 0;
  const uint32_t block = (1u << p.size) - 1u;
  uint32_t starts = 0;
  for (int s : p.starts) {
    if (s < 0 || s + p.size > g.memory_slices) continue;
    if (st.fixed && st.exists[static_cast<size_t>(s)] != profile) continue;  // only an instance that exists
    if ((st.used & (block << s)) == 0) starts |= 1u << s;
  }
  return starts;
}

void ClusterSnapshot::MigAdd(const MigGeometry& g, MigGpuState& st, int profile, int start, int sign) {
  const MigProfile& p = g.profiles[static_cast<size_t>(profile)];
  const uint16_t mask = static_cast<uint16_t>(((1u << p.size) - 1u) << start);
  if (sign > 0) {
    st.used = static_cast<uint16_t>(st.used | mask);
    st.at[static_cast<size_t>(start)] = static_cast<int8_t>(profile);
  } else {
    st.used = static_cast<uint16_t>(st.used & ~mask);
    st.at[static_cast<size_t>(start)] = -1;
  }
  st.instances = static_cast<int8_t>(st.instances + sign);
  st.compute = static_cast<int8_t>(st.compute + sign * p.compute_slices);
}

uint32_t ClusterSnapshot::mig_valid_starts(NodeIndex n, int g, int profile) const {
  if (!state_[n.value()].mig || g < 0 || g >= state_[n.value()].gpu_count) return 0;
  return MigValidStarts(*specs_[n.value()].mig, mig_gpu(n, g), profile);
}

partition::MigLayout ClusterSnapshot::mig_layout(NodeIndex n, int g) const {
  partition::MigLayout out;
  if (!state_[n.value()].mig || g < 0 || g >= state_[n.value()].gpu_count) return out;
  const MigGpuState& st = mig_gpu(n, g);
  for (int s = 0; s < kMaxMigSlices; ++s) {
    if (st.at[static_cast<size_t>(s)] >= 0) out.push_back({st.at[static_cast<size_t>(s)], s});
  }
  return out;
}

uint32_t ClusterSnapshot::mig_used_slices(NodeIndex n, int g) const {
  if (!state_[n.value()].mig || g < 0 || g >= state_[n.value()].gpu_count) return 0;
  return mig_gpu(n, g).used;
}

bool ClusterSnapshot::MigFits(NodeIndex n, const TaskRequest& t) const {
  const NodeState& s = state_[n.value()];
  if (!s.mig || !t.IsMig()) return false;
  const MigGeometry& g = *specs_[n.value()].mig;
  if (static_cast<size_t>(t.mig_profile) >= g.profiles.size()) return false;
  const std::vector<MigGpuState>& gpus = mig_[n.value()];
  for (int k = 0; k < s.gpu_count; ++k) {
    if (MigValidStarts(g, gpus[static_cast<size_t>(k)], t.mig_profile) != 0) return true;
  }
  return false;
}

Status ClusterSnapshot::ApplyMig(const TaskRequest& t, const Placement& where) {
  NodeState& s = state_[where.node.value()];
  const NodeSpec& spec = specs_[where.node.value()];
  const MigGeometry& g = *spec.mig;
  const int32_t milli = MigInstanceMilli(g, t.mig_profile);
  if (t.gpu_milli.value() != milli) {
    return FailedPreconditionError("MIG request for " + g.profiles[static_cast<size_t>(t.mig_profile)].name +
                                   " must carry gpu_milli " + std::to_string(milli) + ", got " +
                                   std::to_string(t.gpu_milli.value()));
  }
  const int k = std::countr_zero(where.gpus);
  const int start = where.mig_start;
  if (start < 0 || start >= kMaxMigSlices ||
      (MigValidStarts(g, mig_[where.node.value()][static_cast<size_t>(k)], t.mig_profile) & (1u << start)) == 0) {
    return FailedPreconditionError("MIG " + g.profiles[static_cast<size_t>(t.mig_profile)].name + "@" +
                                   std::to_string(start) + " is not a valid placement on GPU " + std::to_string(k) +
                                   " of node " + spec.name + " now");
  }
  s.cpu_free -= t.cpu.value();
  s.mem_free -= t.memory.value();
  MigAdd(g, mig_[where.node.value()][static_cast<size_t>(k)], t.mig_profile, start, +1);
  s.gpu_free[k] -= milli;
  RefreshDerived(s);
  ++s.version;
  ++tags_[where.node.value()][TaskTag(t)];
  allocated_gpu_ += milli;
  return Status::Ok();
}

Status ClusterSnapshot::UndoMig(const TaskRequest& t, const Placement& where) {
  NodeState& s = state_[where.node.value()];
  const NodeSpec& spec = specs_[where.node.value()];
  bool ok = s.mig && t.num_gpu == 1 && std::popcount(where.gpus) == 1 && (where.gpus >> s.gpu_count) == 0 &&
            static_cast<size_t>(t.mig_profile) < spec.mig->profiles.size() && where.mig_start >= 0 &&
            where.mig_start < kMaxMigSlices && s.cpu_free + t.cpu.value() <= spec.cpu.value() &&
            s.mem_free + t.memory.value() <= spec.memory.value() && tags_[where.node.value()][TaskTag(t)] > 0;
  const int k = ok ? std::countr_zero(where.gpus) : 0;
  ok = ok && mig_[where.node.value()][static_cast<size_t>(k)].at[static_cast<size_t>(where.mig_start)] == t.mig_profile;
  if (!ok) return FailedPreconditionError("undo of a MIG instance that is not on node " + spec.name);
  const int32_t milli = MigInstanceMilli(*spec.mig, t.mig_profile);
  s.cpu_free += t.cpu.value();
  s.mem_free += t.memory.value();
  MigAdd(*spec.mig, mig_[where.node.value()][static_cast<size_t>(k)], t.mig_profile, where.mig_start, -1);
  s.gpu_free[k] += milli;
  RefreshDerived(s);
  ++s.version;
  --tags_[where.node.value()][TaskTag(t)];
  allocated_gpu_ -= milli;
  return Status::Ok();
}

ClusterSnapshot::ClusterSnapshot(const ClusterSnapshot& other)
    : specs_(other.specs_),
      state_(other.state_),
      tags_(other.tags_),
      mig_(other.mig_),
      groups_(other.groups_),
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
  if (s.mixed) [[unlikely]] return FitsMixed(n, t, kAllGpus);
  if (s.mig || t.mig_profile >= 0) [[unlikely]] return MigFits(n, t);
  const int32_t d = static_cast<int32_t>(t.gpu_milli.value());
  if (d == 1000) return s.full_free >= t.num_gpu;
  if (s.max_free < d) return false;
  if (t.num_gpu == 1) return true;
  int fitting = 0;
  for (int g = 0; g < s.gpu_count; ++g) fitting += s.gpu_free[g] >= d;
  return fitting >= t.num_gpu;
}

bool ClusterSnapshot::Fits(NodeIndex n, const TaskRequest& t, GpuSet usable) const {
  const NodeState& s = state_[n.value()];
  const GpuSet all = GpusOfCount(s.gpu_count);
  if ((usable & all) == all || t.num_gpu == 0) return Fits(n, t);
  if (s.cpu_free < t.cpu.value() || s.mem_free < t.memory.value()) return false;
  if (s.gpu_count == 0) return false;
  if (t.allowed_models != 0 && (t.allowed_models & s.model_bit) == 0) return false;
  if (s.mixed) [[unlikely]] return FitsMixed(n, t, usable);
  return FitsOn(n, t, usable);
}

bool ClusterSnapshot::FitsMixed(NodeIndex n, const TaskRequest& t, GpuSet usable) const {
  for (const ModelGroup& g : groups_[n.value()])
    if (t.AllowsModel(g.model_bit) && FitsOn(n, t, usable & g.gpus)) return true;
  return false;
}

bool ClusterSnapshot::FitsOn(NodeIndex n, const TaskRequest& t, GpuSet usable) const {
  const NodeState& s = state_[n.value()];
  usable &= GpusOfCount(s.gpu_count);
  if (s.mig || t.mig_profile >= 0) [[unlikely]] {
    if (!s.mig || !t.IsMig()) return false;
    const MigGeometry& g = *specs_[n.value()].mig;
    if (static_cast<size_t>(t.mig_profile) >= g.profiles.size()) return false;
    for (GpuSet rest = usable; rest != 0; rest &= rest - 1) {
      const int k = std::countr_zero(rest);
      if (MigValidStarts(g, mig_[n.value()][static_cast<size_t>(k)], t.mig_profile) != 0) return true;
    }
    return false;
  }
  const int32_t d = static_cast<int32_t>(t.gpu_milli.value());
  int fitting = 0;
  for (GpuSet rest = usable; rest != 0; rest &= rest - 1) fitting += s.gpu_free[std::countr_zero(rest)] >= d;
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
  if (t.mig_profile >= 0) [[unlikely]] return ApplyMig(t, where);
  if (s.mixed && where.gpus != 0) [[unlikely]] {
    const ModelMask model = ModelOfGpus(where.node, where.gpus);
    if ((ModelGpus(where.node, model) & where.gpus) != where.gpus) {
      return FailedPreconditionError("placement on node " + name + " takes GPUs of several models");
    }
    if (!t.AllowsModel(model)) {
      return FailedPreconditionError("placement on node " + name + " takes GPUs of a model the task does not allow");
    }
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
  if (t.mig_profile >= 0) [[unlikely]] return UndoMig(t, where);
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
  if (t.num_gpu > 0 && s.mig) ok = false;  // MIG GPUs hold only MIG instances
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
