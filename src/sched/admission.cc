// Admission: what a job must be to be queued (Submit), the queues, and the quota tests a
// cycle applies before it tries to place a job (Entitled, WithinLimits).

#include "src/sched/scheduler_impl.h"

#include <string>

namespace tessera::sched {

Status CheckJobShape(const Scheduler::Impl& m, const Job& job, const std::string& what) {
  if (job.tenant < 0 || job.tenant >= m.tree->size())
    return InvalidArgumentError(what + ": unknown tenant");
  if (!m.tree->is_leaf(job.tenant))
    return InvalidArgumentError(what + ": tenant '" + m.tree->name(job.tenant) +
                                "' has sub-tenants; submit to a leaf (project)");
  if (job.pods < 1) return InvalidArgumentError(what + ": pods must be >= 1");
  TESSERA_RETURN_IF_ERROR(placement::ValidateTask(job.pod).WithPrefix(what + ": "));
  if (m.pending.count(job.id) || m.running.count(job.id))
    return InvalidArgumentError(what + ": duplicate job id");
  return Status::Ok();
}

bool Scheduler::Impl::Entitled(TenantIndex t, const Resources& r, QosClass q) const {
  if (r[kGpuMilliDim] <= 0) return false;
  const Resources prot = q == QosClass::kGuaranteed ? g_usage[t] : Protected(t);
  const Resources& g = tree->spec(t).guaranteed;
  for (int d = 0; d < kMaxResourceDims; ++d)
    if ((quota_dims >> d & 1) && r[d] > 0 && prot[d] + r[d] > g[d]) return false;
  return true;
}

bool Scheduler::Impl::WithinLimits(TenantIndex t, const Resources& r) const {
  for (TenantIndex a : tree->path(t))
    if (!(usage[a] + r).AllLessEqual(tree->spec(a).limit)) return false;
  return true;
}

void Scheduler::Impl::Enqueue(const Job& j) {
  queue[j.tenant].insert(KeyOf(j));
  pending_counts[j.tenant][static_cast<int>(j.qos)]++;
  if (j.qos != QosClass::kBestEffort)
    by_size[j.tenant].insert({ResourcesOf(j, nullptr)[kGpuMilliDim], j.id});
  if (j.pod.num_gpu == 0) ++cpu_only_pending;
  pending.emplace(j.id, j);
}

void Scheduler::Impl::Dequeue(const Job& j) {
  queue[j.tenant].erase(KeyOf(j));
  pending_counts[j.tenant][static_cast<int>(j.qos)]--;
  if (j.qos != QosClass::kBestEffort)
    by_size[j.tenant].erase({ResourcesOf(j, nullptr)[kGpuMilliDim], j.id});
  if (j.pod.num_gpu == 0) --cpu_only_pending;
}

Status Scheduler::CheckSubmit(const Job& job) const {
  const Impl& m = *impl_;
  const std::string what = "job " + std::to_string(job.id);
  TESSERA_RETURN_IF_ERROR(CheckJobShape(m, job, what));
  const Resources r = m.ResourcesOf(job, nullptr);
  for (TenantIndex a : m.tree->path(job.tenant)) {
    if (!r.AllLessEqual(m.tree->spec(a).limit))
      return InvalidArgumentError(what + " can never run: it asks " + m.tree->space().Format(r) +
                                  ", over the limit of tenant '" + m.tree->name(a) + "' (" +
                                  m.tree->space().Format(m.tree->spec(a).limit) + ")");
  }
  if (job.qos == QosClass::kGuaranteed) {
    for (TenantIndex a : m.tree->path(job.tenant)) {
      const Resources& g = m.tree->spec(a).guaranteed;
      for (int d = 0; d < kMaxResourceDims; ++d)
        if ((m.quota_dims >> d & 1) && r[d] > g[d])
          return InvalidArgumentError(
              what + " can never run as Guaranteed: it asks " + m.tree->space().DimName(d) + " " +
              std::to_string(r[d]) + ", more than tenant '" + m.tree->name(a) +
              "' is guaranteed (" + std::to_string(g[d]) + ")");
    }
  }
  const TaskRequest pod = m.EffectivePod(job);
  int nodes_that_fit = 0;
  for (size_t n = 0; n < m.empty.node_count(); ++n)
    if (m.empty.Fits(NodeIndex{static_cast<uint32_t>(n)}, pod)) ++nodes_that_fit;
  if (nodes_that_fit == 0)
    return FailedPreconditionError(what + " can never run: no node of the cluster can hold one pod");
  return Status::Ok();
}

Status Scheduler::Submit(const Job& job) {
  TESSERA_RETURN_IF_ERROR(CheckSubmit(job));
  Impl& m = *impl_;
  m.Enqueue(job);
  m.reasons[job.id] = WaitReason::kCapacity;
  return Status::Ok();
}

}  // namespace tessera::sched
