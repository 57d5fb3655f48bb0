// MIG layouts from the control plane (issue 32): each MIG node's target layout per GPU, sent in
// its desired state ("gpus": [{"index", "mig_layout"}]); and the wait reason of MIG work that waits
// for a layout no agent may apply.
//
// The target of a MIG GPU is the MIG planner's (partition/mig_planner.h) over
//   current  = the instances the running workloads' pods hold there (in use), the instances the
//              agent registered in use, and its free ones that still fit next to those;
//   demand   = on a node whose agent may not reconfigure MIG: one instance per GPU of each pending
//              (or parked) MIG workload of the node's model (the scheduler places them only on
//              instances that exist, so the layout is what would let them start); on a node whose
//              agent may: none (the scheduler cuts its GPUs freely, and the running workloads'
//              instances are the demand it placed).
// The planner never touches an instance in use, so the target keeps every running workload's.
// Without demand the target is `current` itself (free instances are kept while they fit).
//
// Worked example (n1: one H100-80GB in MIG mode, no instance yet):
//   with --allow-mig-reconfigure: workload 7 (3g.40gb) is placed at GPU 0 slice 0; the target is
//     "3g.40gb@0"; the agent creates it and starts 7.
//   without: no instance exists, so 7 fits nowhere and waits ("no_fitting_node: MIG layout not
//     applied: node 'n1' takes MIG work only on the instances it has ..."); the target is the planner's for the pending demand {3g.40gb: 1}: "3g.40gb@0";
//     the agent reports "layout differs, not applied" (node condition mig_layout).
#include <map>
#include <string>
#include <vector>

#include "src/daemon/api_codec.h"
#include "src/daemon/control_plane_impl.h"
#include "tessera/api/node_wire.h"
#include "tessera/partition/mig_planner.h"

namespace tessera::daemon {

std::vector<api::DesiredGpu> ControlPlane::Impl::DesiredMigLayouts(const std::string& name, const KnownNode& node) {
  std::vector<api::DesiredGpu> out;
  const placement::NodeSpec& spec = node.spec;
  if (!spec.mig || spec.gpu_count <= 0) return out;
  const MigGeometry& geometry = *spec.mig;
  auto cached = mig_inventory_cache.find(name);
  if (cached == mig_inventory_cache.end() || cached->second.first != node.record.inventory_json) {
    std::string field;
    StatusOr<NodeInventory> decoded = DecodeNodeInventory(name, node.record.inventory_json, catalog, &field);
    if (!decoded.ok()) {
      if (cached != mig_inventory_cache.end()) mig_inventory_cache.erase(cached);
      return out;
    }
    cached = mig_inventory_cache.insert_or_assign(name, std::make_pair(node.record.inventory_json, *std::move(decoded))).first;
  }
  const NodeInventory* inv = &cached->second.second;
  std::vector<partition::MigGpuState> gpus(static_cast<size_t>(spec.gpu_count));
  auto add = [&](partition::MigGpuState& g, const partition::MigInstance& inst, bool in_use) {
    for (size_t k = 0; k < g.current.size(); ++k)
      if (g.current[k] == inst) {
        g.in_use[k] = g.in_use[k] || in_use;
        return;
      }
    if (!partition::CanAdd(geometry, g.current, inst)) return;
    g.current.push_back(inst);
    g.in_use.push_back(in_use);
  };
  // The running workloads' instances first: they are in use whatever the agent last said.
  if (const std::optional<sched::LiveScheduler::NodeView> v = live->node(name)) {
    for (sched::JobId id : v->jobs) {
      auto job = jobs.find(id);
      if (job == jobs.end() || job->second.shape.job.pod.mig_profile < 0) continue;
      for (const sched::PodPlacement& p : live->placement_of(id)) {
        if (p.node != name || p.mig_start < 0) continue;
        for (int g = 0; g < spec.gpu_count; ++g)
          if (p.gpus >> g & 1)
            add(gpus[static_cast<size_t>(g)], {job->second.shape.job.pod.mig_profile, p.mig_start}, true);
      }
    }
  }
  for (size_t g = 0; g < inv->mig_current.size() && g < gpus.size(); ++g) {
    const partition::MigGpuState& reported = inv->mig_current[g];
    for (int pass = 0; pass < 2; ++pass)  // in use first, so that a free one never displaces them
      for (size_t k = 0; k < reported.current.size(); ++k) {
        const bool in_use = k < reported.in_use.size() && reported.in_use[k];
        if (in_use == (pass == 0)) add(gpus[g], reported.current[k], in_use);
      }
  }
  std::map<std::string, int> demand;
  if (!inv->mig_reconfigure) {
    std::vector<sched::JobId> waiting = live->pending_jobs();
    waiting.insert(waiting.end(), parked.begin(), parked.end());  // those no node can hold as it is
    for (sched::JobId id : waiting) {
      auto job = jobs.find(id);
      if (job == jobs.end()) continue;
      const placement::TaskRequest& pod = job->second.shape.job.pod;
      if (pod.mig_profile < 0 || !pod.AllowsModel(ModelBit(spec.model)) ||
          static_cast<size_t>(pod.mig_profile) >= geometry.profiles.size())
        continue;
      demand[geometry.profiles[static_cast<size_t>(pod.mig_profile)].name] += std::max(1, pod.num_gpu);
    }
  }
  // No demand: the layout is what is in use plus the free instances that fit (the planner would
  // destroy free instances nobody asked for; an operator's are kept until they are in the way).
  StatusOr<partition::MigPlan> plan =
      demand.empty() ? StatusOr<partition::MigPlan>(InvalidArgumentError("no demand"))
                     : partition::PlanMig(geometry, gpus, demand);
  for (int g = 0; g < spec.gpu_count; ++g) {
    const partition::MigLayout& layout =
        plan.ok() ? plan->layouts[static_cast<size_t>(g)] : gpus[static_cast<size_t>(g)].current;
    out.push_back({g, partition::FormatLayout(geometry, layout)});
  }
  return out;
}

std::string ControlPlane::Impl::MigWaitNote(const placement::TaskRequest& pod) const {
  if (pod.mig_profile < 0) return "";
  std::string fixed;
  for (const auto& [name, node] : nodes)
    if (node.spec.mig && !node.spec.mig_fixed.empty() && pod.AllowsModel(ModelBit(node.spec.model)))
      fixed += (fixed.empty() ? "'" : ", '") + name + "'";
  if (fixed.empty()) return "";
  const bool several = fixed.find(',') != std::string::npos;
  return std::string(": MIG layout not applied: node") + (several ? "s " : " ") + fixed + (several ? " take" : " takes") +
         " MIG work only on the instances " + (several ? "they have" : "it has") +
         " (the agent runs without --allow-mig-reconfigure; see the node's mig_layout condition)";
}

std::string ControlPlane::Impl::WaitReasonText(sched::JobId id, sched::WaitReason reason) const {
  std::string text(sched::WaitReasonName(reason));
  auto job = jobs.find(id);
  if (reason != sched::WaitReason::kCapacity || job == jobs.end()) return text;
  return text + MigWaitNote(job->second.shape.job.pod);
}

}  // namespace tessera::daemon
