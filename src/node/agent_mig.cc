// The agent's MIG layouts (tessera/node/agent.h, "MIG"): the desired state's target layout per
// MIG GPU compared with the instances that exist, applied with --allow-mig-reconfigure through
// enforce/mig_apply.h, else reported as the node's "mig_layout" condition.
//
// Worked example (H100-80GB GPU 0, empty; a workload placed on 3g.40gb@0):
//   desired gpus [{"index": 0, "mig_layout": "3g.40gb@0"}], the GPU has ""
//   with the flag:    steps [create 3g.40gb@0 on GPU 0] pass the model check and the driver's
//                     preflight, are applied, the inventory is read again and registered; the
//                     workload's instance now exists and Hold starts it; condition ok.
//   without it:       nothing changes; condition {"mig_layout", ok false, "GPU 0: layout differs,
//                     not applied: has '', desired '3g.40gb@0' (the agent runs without
//                     --allow-mig-reconfigure)"}; the workload waits (Hold: no instance).
//   GPU 0 has 1g.10gb@0 with a process in it, desired "7g.80gb@0": not applied even with the flag
//                     ("1g.10gb@0 is in use"): an instance in use is never destroyed.
//   GPU 0 has 3g.40gb@4 with no process, and a tenant of the node directory (a DRA claim prepared
//                     for a pod whose container has not started, a Slurm task) holds its MIG
//                     device UUID: kept the same way ("3g.40gb@4 in use").
#include <algorithm>
#include <optional>
#include <set>
#include <utility>

#include "src/node/agent_impl.h"
#include "tessera/core/gpu_model.h"
#include "tessera/enforce/mig_apply.h"
#include "tessera/node/agent.h"
#include "tessera/node/launcher.h"
#include "tessera/partition/mig_layout.h"

namespace tessera::node {

namespace {

std::string LayoutText(const std::vector<api::InventoryMigInstance>& instances) {
  std::string out;
  for (const api::InventoryMigInstance& m : instances)
    out += (out.empty() ? "" : ",") + m.profile + "@" + std::to_string(m.start);
  return out;
}

}  // namespace

Status Agent::MigInstanceReady(const api::DesiredWorkload& d) const {
  const api::DesiredPod& pod = d.pods.front();
  if (d.mig_profile.empty() || pod.mig_start < 0 || pod.gpus.empty()) return Status::Ok();
  const int gpu = pod.gpus.front();
  if (gpu < 0 || gpu >= static_cast<int>(inventory_.gpus.size())) return Status::Ok();  // Hold refuses it
  const InventoryGpu& g = inventory_.gpus[static_cast<size_t>(gpu)];
  if (!g.mig_enabled) return Status::Ok();
  for (const api::InventoryMigInstance& m : g.mig_instances)
    if (m.profile == d.mig_profile && m.start == pod.mig_start) return Status::Ok();
  return FailedPreconditionError("waiting for MIG instance " + d.mig_profile + "@" + std::to_string(pod.mig_start) +
                                 " on GPU " + std::to_string(gpu) + ", which does not exist yet (GPU has '" +
                                 LayoutText(g.mig_instances) + "'; see the node's mig_layout condition)");
}

Status Agent::ReconcileMig(const std::vector<api::DesiredGpu>& desired) {
  if (desired.empty()) {
    mig_condition_.reset();
    return Status::Ok();
  }
  const GpuModelCatalog& catalog = GpuModelCatalog::Builtin();
  std::vector<std::string> problems;
  // The MIG device UUIDs the node directory's tenants hold (TenantEntry::mig_instance): read once,
  // when an instance is about to be destroyed. Registered entries count, live or not: a holder
  // that restarts (the DRA driver) joins its slot again. Unreadable: nothing may be destroyed.
  std::optional<StatusOr<std::set<std::string>>> tenant_instances;
  auto held_by_tenant = [&](int gpu, int start) -> StatusOr<bool> {
    if (!tenant_instances) {
      StatusOr<std::vector<TenantEntry>> entries = node_.RegistryEntries();
      if (!entries.ok()) {
        tenant_instances = entries.status();
      } else {
        std::set<std::string> held;
        for (const TenantEntry& e : *entries)
          if (!e.mig_instance.empty()) held.insert(e.mig_instance);
        tenant_instances = std::move(held);
      }
    }
    if (!tenant_instances->ok()) return tenant_instances->status();
    if ((*tenant_instances)->empty()) return false;
    StatusOr<std::string> uuid = MigInstanceUuid(*options_.mig_nvml, gpu, start);
    return uuid.ok() && (*tenant_instances)->count(*uuid) > 0;
  };
  bool changed = false;
  for (const api::DesiredGpu& want : desired) {
    const std::string at = "GPU " + std::to_string(want.index) + ": ";
    if (want.index >= static_cast<int>(inventory_.gpus.size())) {
      problems.push_back(at + "this node does not have it");
      continue;
    }
    InventoryGpu& gpu = inventory_.gpus[static_cast<size_t>(want.index)];
    StatusOr<GpuModelId> model = catalog.Find(gpu.model);
    if (!gpu.mig_enabled || !model.ok() || !catalog.info(*model).mig) {
      problems.push_back(at + "not in MIG mode");
      continue;
    }
    const MigGeometry& geometry = *catalog.info(*model).mig;
    StatusOr<partition::MigLayout> target = partition::ParseLayout(geometry, want.mig_layout);
    if (target.ok()) {
      if (Status v = partition::ValidateLayout(geometry, *target); !v.ok()) target = v;
    }
    if (!target.ok()) {
      problems.push_back(at + "desired layout '" + want.mig_layout + "': " + std::string(target.status().message()));
      continue;
    }
    // What exists now: from the driver when the agent has NVML, else what was discovered.
    if (options_.mig_nvml != nullptr) {
      StatusOr<std::vector<api::InventoryMigInstance>> now =
          DiscoverMigInstances(*options_.mig_nvml, static_cast<uint32_t>(want.index), geometry);
      if (!now.ok()) {
        problems.push_back(at + std::string(now.status().message()));
        continue;
      }
      gpu.mig_instances = std::move(*now);
    }
    const std::string desired_text = partition::FormatLayout(geometry, *target);
    const std::string has = LayoutText(gpu.mig_instances);
    if (has == desired_text) continue;
    if (!options_.allow_mig_reconfigure || options_.mig_nvml == nullptr) {
      problems.push_back(at + "layout differs, not applied: has '" + has + "', desired '" + desired_text + "' (" +
                         (options_.allow_mig_reconfigure ? "the agent has no NVML"
                                                         : "the agent runs without --allow-mig-reconfigure") +
                         ")");
      continue;
    }
    // Destroy what the target lacks, create what it adds (the planner's order: destroys first).
    // An instance in use (a process runs in it, or a workload held here has its profile on this
    // GPU) is never destroyed: the GPU keeps its layout and the condition says why.
    std::set<std::pair<int, int>> wanted;
    for (const partition::MigInstance& m : *target) wanted.insert({m.profile, m.start});
    std::vector<enforce::MigStep> steps;
    std::string refused;
    for (const api::InventoryMigInstance& m : gpu.mig_instances) {
      StatusOr<int> profile = partition::FindProfileIndex(geometry, m.profile);
      if (profile.ok() && wanted.erase({*profile, m.start})) continue;  // kept
      bool held_here = false;
      for (const auto& [id, w] : held_)
        held_here |= !w.ended && w.partition == m.profile &&
                     std::find(w.gpus.begin(), w.gpus.end(), want.index) != w.gpus.end();
      if (!m.in_use && !held_here) {
        StatusOr<bool> tenant = held_by_tenant(want.index, m.start);
        if (!tenant.ok()) {
          problems.push_back(at + "the node directory's tenants cannot be read, so no instance is destroyed: " +
                             std::string(tenant.status().message()));
          refused = "-";
          break;
        }
        held_here = *tenant;
      }
      // A profile the catalog does not know cannot be destroyed by name either: kept, and said.
      if (m.in_use || held_here || !profile.ok()) {
        refused += (refused.empty() ? "" : ", ") + m.profile + "@" + std::to_string(m.start);
        continue;
      }
      StatusOr<enforce::MigStep> step = enforce::CatalogMigStep(geometry, enforce::MigStep::Kind::kDestroy,
                                                                static_cast<uint32_t>(want.index), *profile, m.start);
      if (!step.ok()) {
        refused += (refused.empty() ? "" : ", ") + m.profile + "@" + std::to_string(m.start);
        continue;
      }
      steps.push_back(std::move(*step));
    }
    if (refused == "-") continue;  // said above
    if (!refused.empty()) {
      problems.push_back(at + "layout differs, not applied: has '" + has + "', desired '" + desired_text + "' (" +
                         refused + " in use: never destroyed)");
      continue;
    }
    Status made = Status::Ok();
    for (const partition::MigInstance& m : *target) {
      if (!wanted.count({m.profile, m.start})) continue;  // exists already
      StatusOr<enforce::MigStep> step = enforce::CatalogMigStep(geometry, enforce::MigStep::Kind::kCreate,
                                                                static_cast<uint32_t>(want.index), m.profile, m.start);
      if (!step.ok()) made = step.status();
      else steps.push_back(std::move(*step));
    }
    if (made.ok()) made = enforce::CheckMigStepsModel(*options_.mig_nvml, catalog, *model, steps);
    if (made.ok()) made = enforce::ApplyMigSteps(*options_.mig_nvml, steps).status();
    // Whatever happened, the GPU's instances are read again (a failed step may have applied some).
    StatusOr<std::vector<api::InventoryMigInstance>> after =
        DiscoverMigInstances(*options_.mig_nvml, static_cast<uint32_t>(want.index), geometry);
    if (after.ok() && LayoutText(*after) != has) {
      gpu.mig_instances = std::move(*after);
      changed = true;
    }
    if (!made.ok()) {
      problems.push_back(at + "applying '" + desired_text + "' failed: " + std::string(made.message()));
      continue;
    }
    ++stats_.mig_reconfigurations;
    stats_.mig_steps += static_cast<int64_t>(steps.size());
    Log(at + "MIG layout '" + desired_text + "' applied (was '" + has + "', " + std::to_string(steps.size()) +
        (steps.size() == 1 ? " step)" : " steps)"));
  }
  std::string detail;
  for (const std::string& p : problems) detail += (detail.empty() ? "" : "; ") + p;
  if (detail.size() > 1000) detail = detail.substr(0, 997) + "...";
  if (!problems.empty() && (!mig_condition_ || mig_condition_->detail != detail)) Log("mig_layout: " + detail);
  mig_condition_ = api::NodeCondition{std::string(api::kConditionMigLayout), problems.empty(), detail};
  if (changed) {  // the control plane learns the new instances from a registration
    registered_ = false;
    TESSERA_RETURN_IF_ERROR(Register());
  }
  return Status::Ok();
}

}  // namespace tessera::node
