#include "tessera/sched/live_scheduler.h"

#include <algorithm>
#include <map>
#include <set>

#include "tessera/core/gpu_model.h"
#include "tessera/core/lifecycle_state.h"

namespace tessera::sched {

using placement::NodeSpec;
using placement::Placement;

std::string_view NodeStateName(NodeState s) {  // the names of the lifecycle states (one mapping)
  return tessera::NodeStateName(s == NodeState::kCordoned ? tessera::NodeState::kCordoned : tessera::NodeState::kReady);
}

namespace {
// A pending job whose wait reason no cycle has reported yet.
constexpr auto kNotReported = static_cast<WaitReason>(0xff);

// What the roots' guarantees must fit: the nodes' capacity in the tree's resource space (as
// Scheduler::Create computes it).
Resources CapacityOf(const std::vector<NodeSpec>& nodes, const ResourceSpace& space) {
  Resources cap;
  const auto& catalog = GpuModelCatalog::Builtin();
  for (const NodeSpec& n : nodes) {
    cap[kGpuMilliDim] += static_cast<int64_t>(n.gpu_count) * kWholeGpu.value();
    if (!n.model.valid()) continue;
    for (int g = 0; g < n.gpu_count; ++g) {
      const GpuModelInfo& info = catalog.info(placement::GpuModelOf(n, g));
      cap[kGpuMemoryDim] += info.memory.value();
      if (auto dim = space.ModelDim(info.name)) cap[*dim] += 1;
    }
  }
  return cap;
}
}  // namespace

struct LiveScheduler::State {
  SchedulerOptions options;
  LiveAffinity affinity;
  LiveOptions live;
  // The tree the core points at, and the one SetTenants gave for the next rebuild.
  std::unique_ptr<TenantTree> tree, next_tree;
  struct NodeEntry {
    NodeSpec spec;
    bool cordoned = false;
  };
  std::vector<NodeEntry> nodes;  // the world, in join order
  std::unique_ptr<Scheduler> core;
  // The core's nodes by index, and their index by name: the world as of the last rebuild.
  std::vector<std::string> core_names;
  std::unordered_map<std::string, uint32_t> core_index;
  bool dirty = false;  // the world changed since the last rebuild
  std::unordered_map<JobId, LiveJob> jobs;  // every pending and running job
  // Pending jobs and the wait reason last reported for each (kNotReported: none yet).
  std::unordered_map<JobId, WaitReason> pending;
  std::vector<LiveRejection> rejected;  // for the next cycle's result
  std::unordered_map<std::string, int32_t> classes, labels;  // interned affinity vocabulary
  Status error = Status::Ok();

  int32_t Intern(std::unordered_map<std::string, int32_t>& table, const std::string& s) {
    if (s.empty()) return -1;
    return table.emplace(s, static_cast<int32_t>(table.size())).first->second;
  }

  StatusOr<Job> ToCore(const LiveJob& j) {
    const std::optional<TenantIndex> t = tree->Find(j.tenant);
    if (!t) return NotFoundError("job " + std::to_string(j.id) + ": unknown tenant '" + j.tenant + "'");
    Job c;
    c.id = j.id;
    c.tenant = *t;
    c.qos = j.qos;
    c.priority = j.priority;
    c.pods = j.pods;
    c.pod = j.pod;
    c.gpu_memory = j.gpu_memory;
    c.workload_class = Intern(classes, j.workload_class);
    c.label = Intern(labels, j.label);
    c.submit = j.submit;
    return c;
  }

  PodPlacement ToLive(const Placement& p) const {
    return {core_names[p.node.value()], p.gpus, p.mig_start};
  }
  std::vector<PodPlacement> ToLive(const std::vector<Placement>& ps) const {
    std::vector<PodPlacement> out;
    out.reserve(ps.size());
    for (const Placement& p : ps) out.push_back(ToLive(p));
    return out;
  }

  SchedulerOptions CoreOptions() {
    SchedulerOptions o = options;
    o.affinity = {};
    o.affinity.labels_apart = affinity.labels_apart;
    for (const auto& [x, y] : affinity.tenants_apart) {
      auto a = tree->Find(x), b = tree->Find(y);
      if (a && b) o.affinity.tenants_apart.push_back({*a, *b});
    }
    // Classes are interned on first use; a rule may name them before any job does.
    for (const auto& [x, y] : affinity.classes_apart)
      o.affinity.classes_apart.push_back({Intern(classes, x), Intern(classes, y)});
    return o;
  }

  std::vector<NodeSpec> Specs() const {
    std::vector<NodeSpec> specs;
    specs.reserve(nodes.size());
    for (const NodeEntry& n : nodes) specs.push_back(n.spec);
    return specs;
  }

  void IndexNodes() {
    core_names.clear();
    core_index.clear();
    for (const NodeEntry& n : nodes) {
      core_index.emplace(n.spec.name, static_cast<uint32_t>(core_names.size()));
      core_names.push_back(n.spec.name);
    }
  }

  StatusOr<std::vector<Placement>> ToCore(JobId id, const std::vector<PodPlacement>& ps) const {
    std::vector<Placement> out;
    for (const PodPlacement& p : ps) {
      auto it = core_index.find(p.node);
      if (it == core_index.end())
        return NotFoundError("job " + std::to_string(id) + ": unknown node '" + p.node + "'");
      out.push_back(Placement{NodeIndex{it->second}, p.gpus, p.mig_start});
    }
    return out;
  }

  void SetError(const Status& st) {
    if (!st.ok() && error.ok()) error = st;
  }

  // Applies recorded world changes: a fresh core over the current nodes and tree, given what
  // ran (Adopt) and what waited (SubmitRestored) in the old one. Jobs lost with a removed node
  // are no longer in `jobs` and are left out.
  void Flush() {
    if (!dirty) return;
    dirty = false;
    std::unique_ptr<TenantTree> old_tree;
    if (next_tree) {
      old_tree = std::move(tree);
      tree = std::move(next_tree);
    }
    auto fresh = Scheduler::Create(tree.get(), Specs(), CoreOptions());
    if (!fresh.ok()) {
      // Every input was checked when it came in: a bug. Keep the old core (and its tree).
      if (old_tree) tree = std::move(old_tree);
      SetError(fresh.status().WithPrefix("live scheduler: rebuilding: "));
      return;
    }
    std::unique_ptr<Scheduler> old = std::move(core);
    const std::vector<std::string> old_names = core_names;
    core = std::move(*fresh);
    IndexNodes();
    for (JobId id : old->running_jobs()) {
      auto j = jobs.find(id);
      if (j == jobs.end()) continue;  // lost with its node
      std::vector<PodPlacement> pods;
      for (const Placement& p : *old->placement_of(id))
        pods.push_back({old_names[p.node.value()], p.gpus, p.mig_start});
      StatusOr<Job> c = ToCore(j->second);
      StatusOr<std::vector<Placement>> where = ToCore(id, pods);
      Status st = !c.ok() ? c.status() : !where.ok() ? where.status() : Status::Ok();
      if (st.ok()) st = core->Adopt(*c, *where, *old->start_time(id), old->placed_seq(id));
      SetError(st.WithPrefix("live scheduler: rebuilding: cannot adopt a running job: "));
    }
    for (JobId id : old->pending_jobs()) {
      auto j = jobs.find(id);
      if (j == jobs.end()) continue;
      StatusOr<Job> c = ToCore(j->second);
      Status st = c.ok() ? core->SubmitRestored(*c, old->wait_reason(id)) : c.status();
      if (!st.ok()) {
        rejected.push_back({id, st.message()});
        jobs.erase(j);
        pending.erase(id);
      }
    }
    for (size_t n = 0; n < nodes.size(); ++n)
      if (nodes[n].cordoned) SetError(core->SetCordoned(NodeIndex{static_cast<uint32_t>(n)}, true));
    SetError(core->RestoreFairShareMemory(CarryMemory(old->fair_share_memory(), old->tenants())));
  }

  // The old core's fair-share memory for the current tree: a tenant whose subtree holds the
  // same leaves (by name) as before keeps its value exactly; any other gets the sum of its
  // leaves' (decay is linear in usage and usage lives in leaves; a new leaf starts at 0).
  Scheduler::FairShareMemory CarryMemory(const Scheduler::FairShareMemory& old,
                                         const TenantTree& old_tree) const {
    if (&old_tree == tree.get()) return old;
    const auto leaves_under = [](const TenantTree& tr) {
      std::vector<std::vector<std::string>> out(static_cast<size_t>(tr.size()));
      for (TenantIndex t = 0; t < tr.size(); ++t)
        if (tr.is_leaf(t))
          for (TenantIndex a : tr.path(t)) out[a].push_back(tr.name(t));
      for (auto& names : out) std::sort(names.begin(), names.end());
      return out;
    };
    const auto now_leaves = leaves_under(*tree), old_leaves = leaves_under(old_tree);
    Scheduler::FairShareMemory out{old.started, old.last_decay, {}};
    out.decayed.assign(static_cast<size_t>(tree->size()), {});
    for (TenantIndex t = 0; t < tree->size(); ++t) {
      const std::optional<TenantIndex> was = old_tree.Find(tree->name(t));
      if (was && old_leaves[*was] == now_leaves[t]) {
        out.decayed[t] = old.decayed[*was];
        continue;
      }
      for (const std::string& leaf : now_leaves[t])
        if (const std::optional<TenantIndex> w = old_tree.Find(leaf); w && old_tree.is_leaf(*w))
          for (int d = 0; d < kMaxResourceDims; ++d) out.decayed[t][d] += old.decayed[*w][d];
    }
    return out;
  }

  StatusOr<size_t> FindNode(std::string_view name) const {
    for (size_t n = 0; n < nodes.size(); ++n)
      if (nodes[n].spec.name == name) return n;
    return NotFoundError("unknown node '" + std::string(name) + "'");
  }

  // The running jobs with a pod on `name` in the core (ascending id).
  std::vector<JobId> JobsOn(const std::string& name) const {
    std::vector<JobId> out;
    auto at = core_index.find(name);
    if (at == core_index.end()) return out;
    for (JobId id : core->running_jobs()) {
      if (!jobs.count(id)) continue;
      for (const Placement& p : *core->placement_of(id))
        if (p.node.value() == at->second) {
          out.push_back(id);
          break;
        }
    }
    std::sort(out.begin(), out.end());
    return out;
  }
};

LiveScheduler::LiveScheduler(std::unique_ptr<State> state) : s_(std::move(state)) {}
LiveScheduler::~LiveScheduler() = default;

namespace {
Status CheckNodeNames(const std::vector<NodeSpec>& nodes) {
  std::set<std::string> seen;
  for (const NodeSpec& n : nodes) {
    if (n.name.empty()) return InvalidArgumentError("a node has no name");
    if (!seen.insert(n.name).second) return InvalidArgumentError("node '" + n.name + "' is listed twice");
  }
  return Status::Ok();
}
}  // namespace

StatusOr<std::unique_ptr<LiveScheduler>> LiveScheduler::Create(TenantTree tenants,
                                                               std::vector<NodeSpec> nodes,
                                                               SchedulerOptions options,
                                                               LiveAffinity affinity,
                                                               LiveOptions live) {
  if (!options.affinity.empty())
    return InvalidArgumentError("live scheduler: give affinity rules by name (LiveAffinity), not by index");
  TESSERA_RETURN_IF_ERROR(CheckNodeNames(nodes));
  for (const auto& [x, y] : affinity.tenants_apart)
    for (const std::string& name : {x, y})
      if (!tenants.Find(name))
        return InvalidArgumentError("live scheduler: affinity rule names unknown tenant '" + name + "'");
  if (live.guarantees_must_fit)
    TESSERA_RETURN_IF_ERROR(tenants.CheckFits(CapacityOf(nodes, tenants.space())));
  auto s = std::make_unique<State>();
  s->live = live;
  s->options = std::move(options);
  s->affinity = std::move(affinity);
  s->tree = std::make_unique<TenantTree>(std::move(tenants));
  for (NodeSpec& n : nodes) s->nodes.push_back({std::move(n), false});
  TESSERA_ASSIGN_OR_RETURN(s->core, Scheduler::Create(s->tree.get(), s->Specs(), s->CoreOptions()));
  s->IndexNodes();
  return std::unique_ptr<LiveScheduler>(new LiveScheduler(std::move(s)));
}

Status LiveScheduler::Submit(const LiveJob& job) {
  s_->Flush();
  TESSERA_ASSIGN_OR_RETURN(Job c, s_->ToCore(job));
  TESSERA_RETURN_IF_ERROR(s_->core->Submit(c));
  s_->jobs[job.id] = job;
  s_->pending[job.id] = kNotReported;
  return Status::Ok();
}

Status LiveScheduler::CheckSubmit(const LiveJob& job) {
  s_->Flush();
  TESSERA_ASSIGN_OR_RETURN(Job c, s_->ToCore(job));
  return s_->core->CheckSubmit(c);
}

LiveCycleResult LiveScheduler::Cycle(Seconds now) {
  State& s = *s_;
  s.Flush();
  LiveCycleResult out;
  out.rejected = std::move(s.rejected);
  s.rejected.clear();
  CycleResult r = s.core->Cycle(now);
  s.SetError(r.error);
  out.error = s.error;
  out.attempts = r.attempts;
  for (const PreemptEvent& p : r.preempted) s.pending[p.victim] = kNotReported;
  for (const StartEvent& e : r.started) {
    out.started.push_back({e.job, s.ToLive(e.pods), e.seq});
    s.pending.erase(e.job);
  }
  out.preempted = std::move(r.preempted);
  for (const MoveEvent& m : r.moves)
    out.moves.push_back({m.job, m.pod, s.ToLive(m.from), s.ToLive(m.to), m.for_job, m.restart, m.seq});
  for (auto& [id, last] : s.pending) {
    const WaitReason now_reason = s.core->wait_reason(id);
    if (now_reason == last) continue;
    last = now_reason;
    out.waits.push_back({id, now_reason});
  }
  std::sort(out.waits.begin(), out.waits.end(),
            [](const LiveWait& a, const LiveWait& b) { return a.job < b.job; });
  return out;
}

Status LiveScheduler::Complete(JobId id, Seconds now) {
  s_->Flush();
  if (!s_->jobs.count(id) || !s_->core->is_running(id))
    return NotFoundError("job " + std::to_string(id) + " is not running");
  TESSERA_RETURN_IF_ERROR(s_->core->Complete(id, now));
  s_->jobs.erase(id);
  return Status::Ok();
}

Status LiveScheduler::Cancel(JobId id) {
  s_->Flush();
  TESSERA_RETURN_IF_ERROR(s_->core->Cancel(id));
  s_->jobs.erase(id);
  s_->pending.erase(id);
  return Status::Ok();
}

Status LiveScheduler::AddNode(NodeSpec node) {
  State& s = *s_;
  if (node.name.empty()) return InvalidArgumentError("a node has no name");
  if (s.FindNode(node.name).ok()) return InvalidArgumentError("node '" + node.name + "' already exists");
  // Checked now (the spec alone), so that a bad node is refused here, not at the rebuild.
  TESSERA_RETURN_IF_ERROR(placement::ClusterSnapshot::Create({node}).status().WithPrefix(
      "node '" + node.name + "': "));
  s.nodes.push_back({std::move(node), false});
  s.dirty = true;
  return Status::Ok();
}

StatusOr<std::vector<JobId>> LiveScheduler::RemoveNode(std::string_view name) {
  State& s = *s_;
  TESSERA_ASSIGN_OR_RETURN(size_t n, s.FindNode(name));
  std::vector<JobId> lost = s.JobsOn(std::string(name));
  for (JobId id : lost) s.jobs.erase(id);
  s.nodes.erase(s.nodes.begin() + static_cast<std::ptrdiff_t>(n));
  s.dirty = true;
  return lost;
}

Status LiveScheduler::Cordon(std::string_view name) {
  State& s = *s_;
  TESSERA_ASSIGN_OR_RETURN(size_t n, s.FindNode(name));
  s.nodes[n].cordoned = true;
  if (!s.dirty) return s.core->SetCordoned(NodeIndex{static_cast<uint32_t>(n)}, true);
  return Status::Ok();
}

Status LiveScheduler::Uncordon(std::string_view name) {
  State& s = *s_;
  TESSERA_ASSIGN_OR_RETURN(size_t n, s.FindNode(name));
  s.nodes[n].cordoned = false;
  if (!s.dirty) return s.core->SetCordoned(NodeIndex{static_cast<uint32_t>(n)}, false);
  return Status::Ok();
}

StatusOr<std::vector<JobId>> LiveScheduler::Drain(std::string_view name) {
  State& s = *s_;
  s.Flush();
  TESSERA_RETURN_IF_ERROR(Cordon(name));
  std::vector<JobId> drained = s.JobsOn(std::string(name));
  for (JobId id : drained) {
    const Job job = *s.core->job(id);
    TESSERA_RETURN_IF_ERROR(s.core->Complete(id, Seconds{0}));
    // The same world admitted it before: Submit can refuse it only if the job's shape fits no
    // node any more, which a cordon does not change.
    if (Status st = s.core->Submit(job); !st.ok()) {
      s.rejected.push_back({id, st.message()});
      s.jobs.erase(id);
      continue;
    }
    s.pending[id] = kNotReported;
  }
  return drained;
}

Status LiveScheduler::SetTenants(TenantTree tenants) {
  State& s = *s_;
  if (s.live.guarantees_must_fit)
    TESSERA_RETURN_IF_ERROR(tenants.CheckFits(CapacityOf(s.Specs(), tenants.space())));
  std::map<std::string, int> jobs_of;
  for (const auto& [id, job] : s.jobs) jobs_of[job.tenant]++;
  for (const auto& [name, count] : jobs_of) {
    const std::optional<TenantIndex> t = tenants.Find(name);
    if (!t)
      return FailedPreconditionError("tenant '" + name + "' has " + std::to_string(count) +
                                     " pending or running job(s) and would be removed");
    if (!tenants.is_leaf(*t))
      return FailedPreconditionError("tenant '" + name + "' has " + std::to_string(count) +
                                     " pending or running job(s) and would get sub-tenants");
  }
  s.next_tree = std::make_unique<TenantTree>(std::move(tenants));
  s.dirty = true;
  return Status::Ok();
}

Status LiveScheduler::Adopt(const LiveJob& job, const std::vector<PodPlacement>& pods, Seconds start,
                            uint64_t seq) {
  s_->Flush();
  TESSERA_ASSIGN_OR_RETURN(Job c, s_->ToCore(job));
  TESSERA_ASSIGN_OR_RETURN(std::vector<Placement> where, s_->ToCore(job.id, pods));
  TESSERA_RETURN_IF_ERROR(s_->core->Adopt(c, std::move(where), start, seq));
  s_->jobs[job.id] = job;
  return Status::Ok();
}

Status LiveScheduler::SubmitRestored(const LiveJob& job, WaitReason last_reason) {
  s_->Flush();
  TESSERA_ASSIGN_OR_RETURN(Job c, s_->ToCore(job));
  TESSERA_RETURN_IF_ERROR(s_->core->SubmitRestored(c, last_reason));
  s_->jobs[job.id] = job;
  s_->pending[job.id] = last_reason;  // the caller persisted it: already reported
  return Status::Ok();
}

bool LiveScheduler::is_running(JobId id) {
  s_->Flush();
  return s_->core->is_running(id);
}
bool LiveScheduler::is_pending(JobId id) {
  s_->Flush();
  return s_->core->is_pending(id);
}
WaitReason LiveScheduler::wait_reason(JobId id) {
  s_->Flush();
  return s_->core->is_pending(id) ? s_->core->wait_reason(id) : WaitReason::kNone;
}
std::vector<PodPlacement> LiveScheduler::placement_of(JobId id) {
  s_->Flush();
  const std::vector<Placement>* p = s_->core->placement_of(id);
  return p == nullptr ? std::vector<PodPlacement>{} : s_->ToLive(*p);
}
std::optional<Seconds> LiveScheduler::start_time(JobId id) {
  s_->Flush();
  return s_->core->start_time(id);
}
uint64_t LiveScheduler::placed_seq(JobId id) {
  s_->Flush();
  return s_->core->placed_seq(id);
}
std::vector<JobId> LiveScheduler::running_jobs() {
  s_->Flush();
  return s_->core->running_jobs();
}
std::vector<JobId> LiveScheduler::pending_jobs() {
  s_->Flush();
  return s_->core->pending_jobs();
}

StatusOr<Resources> LiveScheduler::usage(std::string_view tenant) {
  s_->Flush();
  const std::optional<TenantIndex> t = s_->tree->Find(tenant);
  if (!t) return NotFoundError("unknown tenant '" + std::string(tenant) + "'");
  return s_->core->usage(*t);
}

StatusOr<double> LiveScheduler::dominant_share(std::string_view tenant) {
  s_->Flush();
  const std::optional<TenantIndex> t = s_->tree->Find(tenant);
  if (!t) return NotFoundError("unknown tenant '" + std::string(tenant) + "'");
  return s_->core->dominant_share(*t);
}

const TenantTree& LiveScheduler::tenants() const {
  return s_->next_tree ? *s_->next_tree : *s_->tree;
}

std::vector<LiveScheduler::NodeView> LiveScheduler::nodes() {
  State& s = *s_;
  s.Flush();
  std::vector<NodeView> out(s.nodes.size());
  const placement::ClusterSnapshot& snap = s.core->cluster();
  for (size_t n = 0; n < s.nodes.size(); ++n) {
    const NodeIndex ni{static_cast<uint32_t>(n)};
    NodeView& v = out[n];
    v.name = s.nodes[n].spec.name;
    v.state = s.nodes[n].cordoned ? NodeState::kCordoned : NodeState::kReady;
    v.gpu_count = snap.gpu_count(ni);
    for (int g = 0; g < v.gpu_count; ++g) v.gpu_free_milli.push_back(snap.gpu_free(ni, g));
  }
  for (JobId id : s.core->running_jobs())
    for (const Placement& p : *s.core->placement_of(id)) {
      auto& list = out[p.node.value()].jobs;
      if (list.empty() || list.back() != id) list.push_back(id);
    }
  for (NodeView& v : out) {
    std::sort(v.jobs.begin(), v.jobs.end());
    v.jobs.erase(std::unique(v.jobs.begin(), v.jobs.end()), v.jobs.end());
  }
  return out;
}

std::optional<LiveScheduler::NodeView> LiveScheduler::node(const std::string& name) {
  State& s = *s_;
  s.Flush();
  auto at = s.core_index.find(name);
  if (at == s.core_index.end()) return std::nullopt;
  const NodeIndex ni{at->second};
  const placement::ClusterSnapshot& snap = s.core->cluster();
  NodeView v;
  v.name = s.nodes[at->second].spec.name;
  v.state = s.nodes[at->second].cordoned ? NodeState::kCordoned : NodeState::kReady;
  v.gpu_count = snap.gpu_count(ni);
  for (int g = 0; g < v.gpu_count; ++g) v.gpu_free_milli.push_back(snap.gpu_free(ni, g));
  for (JobId id : s.core->running_jobs())
    for (const Placement& p : *s.core->placement_of(id))
      if (p.node == ni && (v.jobs.empty() || v.jobs.back() != id)) v.jobs.push_back(id);
  std::sort(v.jobs.begin(), v.jobs.end());
  v.jobs.erase(std::unique(v.jobs.begin(), v.jobs.end()), v.jobs.end());
  return v;
}

const Scheduler& LiveScheduler::core() {
  s_->Flush();
  return *s_->core;
}

}  // namespace tessera::sched
