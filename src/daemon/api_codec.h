// The control plane's JSON vocabulary besides workload requests (workload_request.h): tenant
// bodies and the tenant tree they make, node inventories (what an agent registers), placements
// as stored, and the views GET returns. Pure functions; the handlers (control_plane*.cc) call them.
//
// Tenant body (POST /v1/tenants; PATCH takes the same fields but name, each optional):
//   {"name": "vision", "parent": "acme",
//    "quota": {"guaranteed": {"gpu_milli": 8000, "gpu_memory_mib": 655360, "gpus": {"A100-80GB": 8}},
//              "limit": {"gpu_milli": 16000}, "weight": 2},
//    "default_qos": "Burstable"}
// The quota file's vocabulary (config/quota_file.h): a dimension a guarantee leaves out is 0, one
// a limit leaves out is unlimited; weight > 0 (default 1). `{"quota": {}}` is a tenant with none.
// Names: 1..63 characters of [A-Za-z0-9._-] (they appear in URLs and metric labels).
//
// Node inventory (POST /v1/nodes/{name}/register): the wire message and its strict codec are
// api::NodeInventory (tessera/api/node_wire.h); DecodeNodeInventory here adds what the catalog
// decides: each GPU's model is a catalog or NVML name (canonicalised; unknown -> 400 naming
// gpus[i].model); all GPUs are in MIG mode or none (400 naming gpus[i].mig_enabled). A node may
// hold several models, e.g. H100-80GB on GPUs 0-1 and A100-40GB on 2-5: spec.model is GPU 0's,
// spec.gpu_models holds each GPU's (placement puts a task on GPUs of one model it allows,
// placement/cluster_snapshot.h), and such a node cannot be in MIG mode. A MIG GPU's instances (mig_instances) must be
// profiles of its model that make a valid layout (400 naming gpus[i].mig_instances). A MIG node
// whose agent may not reconfigure MIG (no "mig_reconfigure") has its layouts fixed for the
// scheduler (NodeSpec::mig_fixed: MIG work only on the instances that exist).
//
// Stored placement: {"pods": [{"node": "n1", "gpus": [0, 1], "mig_start": -1}], "seq": 41}.
//
// Thread-safety: pure functions.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/api/node_wire.h"
#include "tessera/core/gpu_model.h"
#include "tessera/core/status.h"
#include "tessera/partition/mig_planner.h"
#include "tessera/placement/cluster_snapshot.h"
#include "tessera/sched/live_scheduler.h"
#include "tessera/sched/tenant.h"
#include "tessera/store/store.h"

namespace tessera::daemon {

// Valid tenant or node name (see above); the message names `field`.
Status CheckName(std::string_view name, std::string_view field);

struct TenantBody {
  std::string name;
  std::optional<std::string> parent;  // absent: unchanged (PATCH) / a root (POST)
  std::optional<nlohmann::json> quota;  // normalised {"guaranteed", "limit", "weight"}
  std::optional<std::string> default_qos;
};
// `create`: POST (name required) or PATCH (name refused: renaming is not supported).
StatusOr<TenantBody> DecodeTenantBody(std::string_view body, bool create, const GpuModelCatalog& catalog,
                                      std::string* bad_field);

// The tenant record's spec_json from a body's quota and default QoS.
std::string TenantSpecJson(const nlohmann::json& quota, const std::string& default_qos);
// The tree of every stored tenant (their quotas in one ResourceSpace: the models any quota
// names). INVALID_ARGUMENT with TenantTree::Create's problems (a child over its parent, ...).
StatusOr<sched::TenantTree> BuildTenantTree(const std::map<std::string, store::TenantRecord>& tenants,
                                            const GpuModelCatalog& catalog);
// GET view: {"name", "parent", "quota", "default_qos", "created_ms", "updated_ms"}.
nlohmann::json TenantView(const store::TenantRecord& tenant);

struct NodeInventory {
  placement::NodeSpec spec;
  // The inventory as stored (api::EncodeNodeInventory, model names canonical; no agent_id):
  // compared byte for byte when the node registers again.
  std::string canonical_json;
  // The registering agent's instance id ("" when the body has none): the same across the
  // agent's restarts, another for another agent (see RegisterNode).
  std::string agent_id;
  // canonical_json without the MIG instances and the reconfigure flag: the node's hardware. Two
  // registrations with the same hardware differ at most in what the agent did to its MIG layouts.
  std::string hardware_json;
  // MIG nodes: per GPU, the instances that exist (in use or not), as registered.
  std::vector<partition::MigGpuState> mig_current;
  bool mig_reconfigure = false;
};
StatusOr<NodeInventory> DecodeNodeInventory(std::string_view node_name, std::string_view body,
                                            const GpuModelCatalog& catalog, std::string* bad_field);
// The same for an inventory already decoded (api::DecodeNodeInventory): the catalog's checks.
StatusOr<NodeInventory> ResolveNodeInventory(std::string_view node_name, const api::NodeInventory& wire,
                                             const GpuModelCatalog& catalog, std::string* bad_field);

std::string PlacementJson(const std::vector<sched::PodPlacement>& pods, uint64_t seq);
struct StoredPlacement {
  std::vector<sched::PodPlacement> pods;
  uint64_t seq = 0;
};
StatusOr<StoredPlacement> ParsePlacementJson(std::string_view text);
// [0, 2] for GPUs 0 and 2.
nlohmann::json GpuList(placement::GpuSet gpus);

}  // namespace tessera::daemon
