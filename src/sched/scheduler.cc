// The Scheduler's construction, the calls outside a cycle (Complete, Cancel, Adopt,
// SubmitRestored, SetCordoned) and the accessors. The passes of a cycle live in the other
// files of src/sched/ (see scheduler_impl.h).
#include "tessera/sched/scheduler.h"

#include <algorithm>
#include <bit>
#include <string>

#include "src/sched/scheduler_impl.h"

namespace tessera::sched {

std::string_view QosName(QosClass q) {
  switch (q) {
    case QosClass::kGuaranteed: return "Guaranteed";
    case QosClass::kBurstable: return "Burstable";
    case QosClass::kBestEffort: return "BestEffort";
  }
  return "?";
}

std::string_view JobKindName(JobKind k) {
  return k == JobKind::kService ? "service" : "batch";
}

StatusOr<QosClass> ParseQos(std::string_view name) {
  std::string s;
  for (char c : name)
    if (c != '-' && c != '_') s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (s == "guaranteed") return QosClass::kGuaranteed;
  if (s == "burstable") return QosClass::kBurstable;
  if (s == "besteffort") return QosClass::kBestEffort;
  return InvalidArgumentError("unknown QoS class '" + std::string(name) +
                              "' (expected Guaranteed, Burstable or BestEffort)");
}

std::string_view FairShareRuleName(FairShareRule r) {
  return r == FairShareRule::kLexicographic ? "lexicographic" : "equalize";
}

StatusOr<FairShareRule> ParseFairShareRule(std::string_view name) {
  if (name == "equalize") return FairShareRule::kEqualize;
  if (name == "lexicographic") return FairShareRule::kLexicographic;
  return InvalidArgumentError("unknown fair-share rule '" + std::string(name) +
                              "' (known: equalize, lexicographic)");
}

std::string_view WaitReasonName(WaitReason r) {
  switch (r) {
    case WaitReason::kNone: return "none";
    case WaitReason::kLimit: return "limit";
    case WaitReason::kGuarantee: return "guarantee";
    case WaitReason::kCapacity: return "capacity";
    case WaitReason::kAffinity: return "affinity";
  }
  return "?";
}

Resources Scheduler::Impl::ResourcesOf(const Job& j, const std::vector<Placement>* where) const {
  const TaskRequest p = EffectivePod(j);
  Resources r;
  r[kGpuMilliDim] = static_cast<int64_t>(j.pods) * p.TotalGpu().value();
  r[kGpuMemoryDim] = static_cast<int64_t>(j.pods) * p.num_gpu * j.gpu_memory.value();
  if (where && p.IsWholeGpu()) {
    const auto& catalog = GpuModelCatalog::Builtin();
    for (const Placement& pl : *where) {
      const NodeSpec& spec = snap.spec(pl.node);
      if (!spec.model.valid()) continue;
      // The placed GPUs' model (one model per pod, also on a mixed-model node).
      const GpuModelId model = pl.gpus != 0 ? GpuModelOf(spec, std::countr_zero(pl.gpus)) : spec.model;
      if (auto dim = tree->space().ModelDim(catalog.info(model).name))
        r[*dim] += p.num_gpu;
    }
  }
  return r;
}

Scheduler::Scheduler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Scheduler::~Scheduler() = default;

StatusOr<std::unique_ptr<Scheduler>> Scheduler::Create(const TenantTree* tenants,
                                                       std::vector<NodeSpec> nodes,
                                                       SchedulerOptions options) {
  // An empty tree is allowed: a control plane starts with no tenants, and nothing can be
  // submitted until one exists.
  if (tenants == nullptr) return InvalidArgumentError("scheduler: no tenant tree");
  TESSERA_ASSIGN_OR_RETURN(ClusterSnapshot snap, ClusterSnapshot::Create(std::move(nodes)));
  auto impl = std::make_unique<Impl>(std::move(snap));
  impl->tree = tenants;
  impl->opt = options;
  placement::PolicyOptions po;
  po.target_workload = options.target_workload;
  if (po.target_workload == nullptr) {
    // A neutral mix: one whole GPU and the common fractions, any model.
    std::vector<placement::TaskType> types;
    for (int milli : {1000, 500, 250}) {
      placement::TaskType t;
      t.num_gpu = 1;
      t.gpu_milli = GpuMilli{milli};
      t.weight = 1;
      types.push_back(t);
    }
    impl->default_workload = placement::TargetWorkload::FromTypes(std::move(types));
    po.target_workload = &impl->default_workload;
  }
  TESSERA_ASSIGN_OR_RETURN(impl->policy, placement::MakePolicy(options.placement_policy, po));
  {
    auto order = MakeFairOrder(options.fair_order);
    if (!order.ok()) return order.status().WithPrefix("scheduler: fair_order: ");
    impl->fair_order = std::move(*order);
  }
  impl->rng = Rng(options.seed);
  impl->ctx.rng = &impl->rng;
  const int nt = tenants->size();
  impl->usage.assign(nt, Resources());
  impl->be_usage.assign(nt, Resources());
  impl->g_usage.assign(nt, Resources());
  impl->decayed.assign(nt, {});
  impl->share.assign(nt, 0.0);
  impl->queue.assign(nt, {});
  impl->pending_counts.assign(nt, {});
  impl->by_size.assign(nt, {});
  impl->on_node.assign(impl->snap.node_count(), {});
  impl->immovable_pods.assign(impl->snap.node_count(), 0);
  impl->cordoned.assign(impl->snap.node_count(), 0);
  for (size_t n = 0; n < impl->snap.node_count(); ++n)
    impl->max_node_gpus =
        std::max(impl->max_node_gpus, impl->snap.gpu_count(NodeIndex{static_cast<uint32_t>(n)}));

  Resources cap;
  cap[kGpuMilliDim] = impl->snap.total_gpu_capacity().value();
  const auto& catalog = GpuModelCatalog::Builtin();
  for (size_t n = 0; n < impl->snap.node_count(); ++n) {
    const NodeSpec& s = impl->snap.spec(NodeIndex{static_cast<uint32_t>(n)});
    for (int g = 0; g < s.gpu_count; ++g) {
      const GpuModelInfo& info = catalog.info(GpuModelOf(s, g));
      cap[kGpuMemoryDim] += info.memory.value();
      if (auto dim = tenants->space().ModelDim(info.name)) cap[*dim] += 1;
    }
  }
  impl->capacity = cap;
  for (int d = 0; d < tenants->space().dims(); ++d) {
    if (cap[d] > 0) impl->drf_dims |= 1u << d;
    for (int t = 0; t < nt; ++t)
      if (tenants->spec(t).guaranteed[d] > 0) impl->quota_dims |= 1u << d;
  }
  return std::unique_ptr<Scheduler>(new Scheduler(std::move(impl)));
}

Status Scheduler::Complete(JobId id, Seconds /*now*/) {
  Impl& m = *impl_;
  auto it = m.running.find(id);
  if (it == m.running.end()) return NotFoundError("job " + std::to_string(id) + " is not running");
  Impl::Running r = std::move(it->second);
  m.running.erase(it);
  for (const Placement& p : r.pods) {
    TESSERA_RETURN_IF_ERROR(m.snap.Undo(r.pod, p));
    auto& lst = m.on_node[p.node.value()];
    lst.erase(std::find(lst.begin(), lst.end(), id));
    if (Impl::Immovable(r.job, r.pod)) --m.immovable_pods[p.node.value()];
  }
  m.AddUsage(r.job.tenant, r.res, r.job.qos, -1);
  m.caps_dirty = true;
  return Status::Ok();
}

Status Scheduler::Cancel(JobId id) {
  Impl& m = *impl_;
  auto it = m.pending.find(id);
  if (it == m.pending.end()) return NotFoundError("job " + std::to_string(id) + " is not pending");
  m.Dequeue(it->second);
  m.pending.erase(it);
  m.reasons.erase(id);
  return Status::Ok();
}

Status Scheduler::Adopt(const Job& job, std::vector<Placement> pods, Seconds start, uint64_t seq) {
  Impl& m = *impl_;
  const std::string what = "job " + std::to_string(job.id);
  TESSERA_RETURN_IF_ERROR(CheckJobShape(m, job, what));
  if (pods.size() != static_cast<size_t>(job.pods))
    return InvalidArgumentError(what + ": " + std::to_string(pods.size()) + " placements for " +
                                std::to_string(job.pods) + " pods");
  if (seq == 0) return InvalidArgumentError(what + ": seq must be > 0 (StartEvent::seq)");
  Impl::Running r;
  r.job = job;
  r.pod = m.EffectivePod(job);
  for (size_t k = 0; k < pods.size(); ++k) {
    if (Status st = m.snap.Apply(r.pod, pods[k]); !st.ok()) {
      for (size_t b = k; b-- > 0;) {
        Status undo = m.snap.Undo(r.pod, pods[b]);
        if (!undo.ok()) return InternalError(what + ": cannot take back an adopted pod: " + undo.message());
      }
      return InvalidArgumentError(what + ": pod " + std::to_string(k) + " cannot run where it was: " +
                                  st.message());
    }
  }
  r.pods = std::move(pods);
  r.start = start;
  r.res = m.ResourcesOf(job, &r.pods);
  r.seq = seq;
  for (const Placement& p : r.pods) {
    auto& lst = m.on_node[p.node.value()];
    // Keep arrival order: the pods on a node stay sorted by seq.
    auto at = std::find_if(lst.begin(), lst.end(), [&](JobId other) { return m.running.at(other).seq > seq; });
    lst.insert(at, job.id);
    if (Impl::Immovable(job, r.pod)) ++m.immovable_pods[p.node.value()];
  }
  m.AddUsage(job.tenant, r.res, job.qos, +1);
  m.running.emplace(job.id, std::move(r));
  m.next_seq = std::max(m.next_seq, seq + 1);
  m.caps_dirty = true;
  return Status::Ok();
}

Status Scheduler::SubmitRestored(const Job& job, WaitReason last_reason) {
  TESSERA_RETURN_IF_ERROR(Submit(job));
  impl_->reasons[job.id] = last_reason;
  return Status::Ok();
}

std::vector<JobId> Scheduler::running_jobs() const {
  std::vector<std::pair<uint64_t, JobId>> by_seq;
  by_seq.reserve(impl_->running.size());
  for (const auto& [id, r] : impl_->running) by_seq.push_back({r.seq, id});
  std::sort(by_seq.begin(), by_seq.end());
  std::vector<JobId> out;
  out.reserve(by_seq.size());
  for (const auto& [seq, id] : by_seq) out.push_back(id);
  return out;
}

std::vector<JobId> Scheduler::pending_jobs() const {
  std::vector<JobId> out;
  out.reserve(impl_->pending.size());
  for (const auto& [id, job] : impl_->pending) out.push_back(id);
  std::sort(out.begin(), out.end());
  return out;
}

Scheduler::FairShareMemory Scheduler::fair_share_memory() const {
  return {impl_->decay_started, impl_->last_decay, impl_->decayed};
}

Status Scheduler::RestoreFairShareMemory(const FairShareMemory& memory) {
  Impl& m = *impl_;
  if (memory.decayed.size() != static_cast<size_t>(m.tree->size()))
    return InvalidArgumentError("fair-share memory for " + std::to_string(memory.decayed.size()) +
                                " tenants, the tree has " + std::to_string(m.tree->size()));
  m.decay_started = memory.started;
  m.last_decay = memory.last_decay;
  m.decayed = memory.decayed;
  for (int a = 0; a < m.tree->size(); ++a) m.share[a] = m.ShareOf(a);
  return Status::Ok();
}

Status Scheduler::SetCordoned(NodeIndex node, bool cordoned) {
  Impl& m = *impl_;
  if (node.value() >= m.snap.node_count())
    return InvalidArgumentError("node index " + std::to_string(node.value()) + " out of range (" +
                                std::to_string(m.snap.node_count()) + " nodes)");
  uint8_t& c = m.cordoned[node.value()];
  if (c != static_cast<uint8_t>(cordoned)) m.cordoned_count += cordoned ? 1 : -1;
  c = cordoned ? 1 : 0;
  return Status::Ok();
}

bool Scheduler::cordoned(NodeIndex node) const {
  return node.value() < impl_->cordoned.size() && impl_->cordoned[node.value()] != 0;
}

uint64_t Scheduler::placed_seq(JobId id) const {
  auto it = impl_->running.find(id);
  return it == impl_->running.end() ? 0 : it->second.seq;
}

bool Scheduler::HasRunnableWaiting(TenantIndex t, bool include_best_effort) const {
  for (const PendingKey& k : impl_->queue[t]) {
    // The queue is sorted by QoS class: BestEffort comes last.
    if (!include_best_effort && k.qos == static_cast<uint8_t>(QosClass::kBestEffort)) break;
    const WaitReason r = wait_reason(k.id);
    if (r != WaitReason::kLimit && r != WaitReason::kGuarantee) return true;
  }
  return false;
}

std::array<int, kWaitReasonCount> Scheduler::PendingByReason() const {
  std::array<int, kWaitReasonCount> n{};
  for (const auto& [id, job] : impl_->pending) n[static_cast<int>(wait_reason(id))]++;
  return n;
}

bool Scheduler::BelowGuaranteeWithWaiting(TenantIndex t) const {
  const Impl& m = *impl_;
  const Resources prot = m.Protected(t);
  const Resources& g = m.tree->spec(t).guaranteed;
  for (const auto& [gpu, id] : m.by_size[t]) {
    // Sizes ascend: once one does not fit the unused guarantee in GPU milli, none does.
    if (prot[kGpuMilliDim] + gpu > g[kGpuMilliDim]) return false;
    const Resources r = m.ResourcesOf(m.pending.at(id), nullptr);
    bool fits = r[kGpuMilliDim] > 0;
    for (int d = 0; d < kMaxResourceDims && fits; ++d)
      if ((m.quota_dims >> d & 1) && r[d] > 0 && prot[d] + r[d] > g[d]) fits = false;
    if (fits) return true;
  }
  return false;
}

const ClusterSnapshot& Scheduler::cluster() const { return impl_->snap; }
const TenantTree& Scheduler::tenants() const { return *impl_->tree; }
const Resources& Scheduler::usage(TenantIndex t) const { return impl_->usage[t]; }
Resources Scheduler::protected_usage(TenantIndex t) const { return impl_->Protected(t); }
const Resources& Scheduler::capacity() const { return impl_->capacity; }
double Scheduler::dominant_share(TenantIndex t) const { return impl_->share[t]; }
Resources Scheduler::ResourcesOf(const Job& job, const std::vector<Placement>* where) const {
  return impl_->ResourcesOf(job, where);
}
size_t Scheduler::pending_count() const { return impl_->pending.size(); }
size_t Scheduler::running_count() const { return impl_->running.size(); }
int Scheduler::pending_of(TenantIndex t, QosClass q) const {
  return impl_->pending_counts[t][static_cast<int>(q)];
}
bool Scheduler::is_running(JobId id) const { return impl_->running.count(id) > 0; }
bool Scheduler::is_pending(JobId id) const { return impl_->pending.count(id) > 0; }
WaitReason Scheduler::wait_reason(JobId id) const {
  auto it = impl_->reasons.find(id);
  return it == impl_->reasons.end() ? WaitReason::kNone : it->second;
}
const Job* Scheduler::job(JobId id) const {
  if (auto it = impl_->pending.find(id); it != impl_->pending.end()) return &it->second;
  if (auto it = impl_->running.find(id); it != impl_->running.end()) return &it->second.job;
  return nullptr;
}
std::optional<Seconds> Scheduler::start_time(JobId id) const {
  auto it = impl_->running.find(id);
  if (it == impl_->running.end()) return std::nullopt;
  return it->second.start;
}
const std::vector<Placement>* Scheduler::placement_of(JobId id) const {
  auto it = impl_->running.find(id);
  return it == impl_->running.end() ? nullptr : &it->second.pods;
}

}  // namespace tessera::sched
