#include "src/daemon/api_codec.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "tessera/api/json_fields.h"
#include "tessera/api/node_wire.h"
#include "tessera/sched/job.h"

namespace tessera::daemon {

using json = nlohmann::json;

Status CheckName(std::string_view name, std::string_view field) {
  const std::string f(field);
  if (name.empty() || name.size() > 63)
    return InvalidArgumentError(f + ": a name has 1..63 characters");
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) return InvalidArgumentError(f + ": '" + std::string(name) + "' may use only A-Z a-z 0-9 . _ -");
  }
  return Status::Ok();
}

namespace {

constexpr int64_t kMaxQuantity = int64_t{1} << 50;

// {"gpu_milli", "gpu_memory_mib", "gpus": {model: n}} with the model names made canonical.
StatusOr<json> DecodeResources(const json& object, const std::string& prefix, const GpuModelCatalog& catalog,
                               std::string* bad_field) {
  api::JsonFields f(object, prefix, bad_field);
  TESSERA_RETURN_IF_ERROR(f.OnlyKnown({"gpu_milli", "gpu_memory_mib", "gpus"}));
  json out = json::object();
  for (const char* dim : {"gpu_milli", "gpu_memory_mib"}) {
    if (!f.Has(dim)) continue;
    TESSERA_ASSIGN_OR_RETURN(const int64_t v, f.Int(dim, 0, kMaxQuantity, 0));
    out[dim] = v;
  }
  TESSERA_ASSIGN_OR_RETURN(const json gpus, f.Object("gpus"));
  if (!gpus.empty()) {
    api::JsonFields g(gpus, prefix + "gpus.", bad_field);
    json models = json::object();
    for (const auto& [model, count] : gpus.items()) {
      StatusOr<GpuModelId> id = catalog.Find(model);
      if (!id.ok()) return g.Fail(model, "unknown GPU model (known: " + catalog.KnownNames() + ")");
      TESSERA_ASSIGN_OR_RETURN(const int64_t n, g.Int(model, 0, 1 << 20, 0));
      models[catalog.info(*id).name] = n;
    }
    out["gpus"] = models;
  }
  return out;
}

StatusOr<json> DecodeQuota(const json& quota, const GpuModelCatalog& catalog, std::string* bad_field) {
  api::JsonFields f(quota, "quota.", bad_field);
  TESSERA_RETURN_IF_ERROR(f.OnlyKnown({"guaranteed", "limit", "weight"}));
  json out = json::object();
  for (const char* part : {"guaranteed", "limit"}) {
    TESSERA_ASSIGN_OR_RETURN(const json r, f.Object(part));
    TESSERA_ASSIGN_OR_RETURN(out[part], DecodeResources(r, "quota." + std::string(part) + ".", catalog, bad_field));
  }
  TESSERA_ASSIGN_OR_RETURN(const double weight, f.Number("weight"));
  if (!std::isnan(weight) && !(weight > 0 && weight <= 1e6)) return f.Fail("weight", "must be > 0 and <= 1000000");
  out["weight"] = std::isnan(weight) ? 1.0 : weight;
  return out;
}

}  // namespace

StatusOr<TenantBody> DecodeTenantBody(std::string_view body, bool create, const GpuModelCatalog& catalog,
                                      std::string* bad_field) {
  if (bad_field) bad_field->clear();
  TESSERA_ASSIGN_OR_RETURN(const json j, api::ParseJsonObject(body));
  api::JsonFields f(j, "", bad_field);
  TESSERA_RETURN_IF_ERROR(f.OnlyKnown({"name", "parent", "quota", "default_qos"}));
  TenantBody out;
  if (create) {
    TESSERA_RETURN_IF_ERROR(f.Require("name"));
    TESSERA_ASSIGN_OR_RETURN(out.name, f.Str("name", 63));
    if (Status st = CheckName(out.name, "name"); !st.ok()) return f.Fail("name", std::string(st.message()).substr(6));
  } else if (f.Has("name")) {
    return f.Fail("name", "a tenant cannot be renamed (create a new one)");
  }
  if (f.Has("parent")) {
    auto it = j.find("parent");
    if (it->is_null() || (it->is_string() && it->get<std::string>().empty())) {
      out.parent = "";
    } else {
      TESSERA_ASSIGN_OR_RETURN(const std::string parent, f.Str("parent", 63));
      out.parent = parent;
    }
  }
  if (f.Has("quota")) {
    TESSERA_ASSIGN_OR_RETURN(const json q, f.Object("quota"));
    TESSERA_ASSIGN_OR_RETURN(out.quota, DecodeQuota(q, catalog, bad_field));
  } else if (create) {
    out.quota = json{{"guaranteed", json::object()}, {"limit", json::object()}, {"weight", 1.0}};
  }
  if (f.Has("default_qos")) {
    TESSERA_ASSIGN_OR_RETURN(const std::string qos, f.Str("default_qos", 32));
    StatusOr<sched::QosClass> q = sched::ParseQos(qos);
    if (!q.ok()) return f.Fail("default_qos", "'" + qos + "' is not Guaranteed, Burstable or BestEffort");
    out.default_qos = std::string(sched::QosName(*q));
  }
  return out;
}

std::string TenantSpecJson(const json& quota, const std::string& default_qos) {
  return json{{"quota", quota}, {"default_qos", default_qos}}.dump();
}

namespace {
sched::Resources ToResources(const json& r, const sched::ResourceSpace& space, int64_t absent) {
  sched::Resources out = sched::Resources::Filled(0);
  for (int d = 0; d < space.dims(); ++d) out[d] = absent;
  if (auto it = r.find("gpu_milli"); it != r.end()) out[sched::kGpuMilliDim] = it->get<int64_t>();
  if (auto it = r.find("gpu_memory_mib"); it != r.end()) out[sched::kGpuMemoryDim] = it->get<int64_t>();
  if (auto g = r.find("gpus"); g != r.end())
    for (const auto& [model, n] : g->items())
      if (std::optional<int> d = space.ModelDim(model)) out[*d] = n.get<int64_t>();
  return out;
}
}  // namespace

StatusOr<sched::TenantTree> BuildTenantTree(const std::map<std::string, store::TenantRecord>& tenants,
                                            const GpuModelCatalog& catalog) {
  (void)catalog;
  std::set<std::string> models;
  std::vector<json> quotas;
  for (const auto& [name, t] : tenants) {
    json spec = json::parse(t.spec_json, nullptr, false);
    if (spec.is_discarded() || !spec.is_object()) return InternalError("tenant '" + name + "': stored spec is not JSON");
    json quota = spec.value("quota", json::object());
    for (const char* part : {"guaranteed", "limit"})
      if (quota.contains(part) && quota[part].contains("gpus"))
        for (const auto& [model, n] : quota[part]["gpus"].items()) models.insert(model);
    quotas.push_back(std::move(quota));
  }
  if (static_cast<int>(models.size()) > sched::kMaxQuotaModels)
    return InvalidArgumentError("quotas name " + std::to_string(models.size()) + " GPU models; at most " +
                                std::to_string(sched::kMaxQuotaModels) + " can have their own quota");
  sched::ResourceSpace space(std::vector<std::string>(models.begin(), models.end()));
  std::vector<sched::TenantSpec> specs;
  size_t i = 0;
  for (const auto& [name, t] : tenants) {
    const json& q = quotas[i++];
    sched::TenantSpec s;
    s.name = name;
    s.parent = t.parent;
    s.guaranteed = ToResources(q.value("guaranteed", json::object()), space, 0);
    s.limit = ToResources(q.value("limit", json::object()), space, sched::kUnlimited);
    s.weight = q.value("weight", 1.0);
    specs.push_back(std::move(s));
  }
  return sched::TenantTree::Create(std::move(specs), space);
}

json TenantView(const store::TenantRecord& t) {
  json spec = json::parse(t.spec_json, nullptr, false);
  if (spec.is_discarded() || !spec.is_object()) spec = json::object();
  json out = {{"name", t.name}, {"parent", t.parent.empty() ? json(nullptr) : json(t.parent)},
              {"quota", spec.value("quota", json::object())},
              {"default_qos", spec.value("default_qos", std::string("Burstable"))},
              {"created_ms", t.created_ms}, {"updated_ms", t.updated_ms}};
  return out;
}

StatusOr<NodeInventory> DecodeNodeInventory(std::string_view node_name, std::string_view body,
                                            const GpuModelCatalog& catalog, std::string* bad_field) {
  TESSERA_ASSIGN_OR_RETURN(const api::NodeInventory wire, api::DecodeNodeInventory(body, bad_field));
  return ResolveNodeInventory(node_name, wire, catalog, bad_field);
}

StatusOr<NodeInventory> ResolveNodeInventory(std::string_view node_name, const api::NodeInventory& wire,
                                             const GpuModelCatalog& catalog, std::string* bad_field) {
  NodeInventory out;
  out.spec.name = std::string(node_name);
  out.spec.cpu = CpuMilli{wire.cpu_milli};
  out.spec.memory = MiB{wire.memory_mib};
  out.agent_id = wire.agent_id;
  // What the wire cannot check: the catalog knows each model, and all of a node's GPUs are in
  // MIG mode or none is. A node may hold several models (each GPU keeps its own, spec.gpu_models;
  // placement keeps a task on GPUs of one model), but then none in MIG mode.
  api::NodeInventory canonical{wire.cpu_milli, wire.memory_mib, {}, "", ""};
  std::optional<GpuModelId> model;
  std::optional<bool> mig;
  std::vector<GpuModelId> models;
  for (size_t i = 0; i < wire.gpus.size(); ++i) {
    const api::InventoryGpu& gpu = wire.gpus[i];
    auto fail = [&](const char* field, const std::string& message) {
      const std::string at = "gpus[" + std::to_string(i) + "]." + field;
      if (bad_field) *bad_field = at;
      return InvalidArgumentError(at + ": " + message);
    };
    StatusOr<GpuModelId> id = catalog.Find(gpu.model);
    if (!id.ok()) return fail("model", "unknown GPU model '" + gpu.model + "' (known: " + catalog.KnownNames() + ")");
    if (!model) model = *id;
    models.push_back(*id);
    if (mig && *mig != gpu.mig_enabled) return fail("mig_enabled", "a node's GPUs are all in MIG mode or none is");
    mig = gpu.mig_enabled;
    if (gpu.mig_enabled && *model != *id)
      return fail("mig_enabled", "a node with GPUs of several models (" + catalog.info(*model).name + ", " +
                                     catalog.info(*id).name + ") cannot be in MIG mode");
    if (gpu.mig_enabled && !catalog.info(*id).mig) return fail("mig_enabled", catalog.info(*id).name + " has no MIG");
    canonical.gpus.push_back({gpu.index, gpu.uuid, catalog.info(*id).name, gpu.memory_mib, gpu.mig_enabled});
    if (gpu.mig_enabled) {
      // The instances that exist: profiles of the model, together a valid layout.
      const MigGeometry& geometry = *catalog.info(*id).mig;
      partition::MigGpuState state;
      for (const api::InventoryMigInstance& m : gpu.mig_instances) {
        StatusOr<int> profile = partition::FindProfileIndex(geometry, m.profile);
        if (!profile.ok()) return fail("mig_instances", std::string(profile.status().message()));
        state.current.push_back({*profile, m.start});
        state.in_use.push_back(m.in_use);
      }
      if (Status v = partition::ValidateLayout(geometry, state.current); !v.ok())
        return fail("mig_instances", std::string(v.message()));
      canonical.gpus.back().mig_instances = gpu.mig_instances;
      out.mig_current.push_back(std::move(state));
    }
  }
  out.spec.gpu_count = static_cast<int32_t>(wire.gpus.size());
  if (model) {
    out.spec.model = *model;
    if (std::any_of(models.begin(), models.end(), [&](GpuModelId m) { return m != *model; }))
      out.spec.gpu_models = std::move(models);
    if (*mig) out.spec.mig = std::make_shared<const MigGeometry>(*catalog.info(*model).mig);
  }
  out.mig_reconfigure = wire.mig_reconfigure && out.spec.mig != nullptr;
  canonical.mig_reconfigure = out.mig_reconfigure;
  // An agent that may not change its MIG layouts: the scheduler takes them as they are.
  if (out.spec.mig && !out.mig_reconfigure)
    for (const partition::MigGpuState& g : out.mig_current) out.spec.mig_fixed.push_back(g.current);
  out.canonical_json = api::EncodeNodeInventory(canonical);
  api::NodeInventory hardware = canonical;
  hardware.mig_reconfigure = false;
  for (api::InventoryGpu& g : hardware.gpus) g.mig_instances.clear();
  out.hardware_json = api::EncodeNodeInventory(hardware);
  return out;
}

json GpuList(placement::GpuSet gpus) {
  json out = json::array();
  for (int g = 0; g < placement::kMaxGpusPerNode; ++g)
    if (gpus >> g & 1) out.push_back(g);
  return out;
}

std::string PlacementJson(const std::vector<sched::PodPlacement>& pods, uint64_t seq) {
  json list = json::array();
  for (const sched::PodPlacement& p : pods)
    list.push_back({{"node", p.node}, {"gpus", GpuList(p.gpus)}, {"mig_start", p.mig_start}});
  return json{{"pods", list}, {"seq", seq}}.dump();
}

StatusOr<StoredPlacement> ParsePlacementJson(std::string_view text) {
  const json j = json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("pods") || !j["pods"].is_array())
    return InvalidArgumentError("stored placement is not {\"pods\": [...]}");
  StoredPlacement out;
  out.seq = j.value("seq", uint64_t{0});
  for (const json& p : j["pods"]) {
    sched::PodPlacement pod;
    pod.node = p.value("node", std::string());
    for (const json& g : p.value("gpus", json::array())) {
      if (!g.is_number_integer() || g.get<int>() < 0 || g.get<int>() >= placement::kMaxGpusPerNode)
        return InvalidArgumentError("stored placement: bad GPU index");
      pod.gpus |= placement::GpuBit(g.get<int>());
    }
    pod.mig_start = p.value("mig_start", -1);
    out.pods.push_back(std::move(pod));
  }
  return out;
}

}  // namespace tessera::daemon
