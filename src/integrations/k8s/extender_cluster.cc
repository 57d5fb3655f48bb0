#include "tessera/integrations/k8s/extender_cluster.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

namespace tessera::k8s {
namespace {

using nlohmann::json;
using placement::ClusterSnapshot;
using placement::GpuBit;
using placement::NodeSpec;
using placement::Placement;
using placement::TaskRequest;

std::vector<std::string> Split(std::string_view line, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t at = line.find(sep, start);
    out.emplace_back(line.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) break;
    start = at + 1;
  }
  return out;
}

// Lines of a CSV file without their \r, skipping blank ones: (line number, text).
std::vector<std::pair<int, std::string_view>> Lines(std::string_view text) {
  std::vector<std::pair<int, std::string_view>> out;
  int number = 0;
  while (!text.empty()) {
    ++number;
    size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!line.empty()) out.emplace_back(number, line);
  }
  return out;
}

StatusOr<int64_t> CsvInt(const std::string& where, const std::string& field, const std::string& text, int64_t lo,
                         int64_t hi) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || p != text.data() + text.size() || v < lo || v > hi) {
    return InvalidArgumentError(where + ": " + field + ": '" + text + "' is not an integer " + std::to_string(lo) +
                                ".." + std::to_string(hi));
  }
  return v;
}

struct Header {
  std::vector<std::string> names;
  std::optional<size_t> Column(std::string_view name) const {
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] == name) return i;
    }
    return std::nullopt;
  }
};

template <typename T>
StatusOr<std::vector<T>> PerGpu(const std::string& where, const std::string& field, const std::string& text,
                                int32_t gpus, int64_t hi) {
  std::vector<T> out;
  if (text.empty()) return out;
  const std::vector<std::string> parts = Split(text, '|');
  if (static_cast<int32_t>(parts.size()) != gpus) {
    return InvalidArgumentError(where + ": " + field + ": " + std::to_string(parts.size()) + " values for " +
                                std::to_string(gpus) + " GPUs ('|'-separated, one per GPU)");
  }
  for (const std::string& p : parts) {
    TESSERA_ASSIGN_OR_RETURN(const int64_t v, CsvInt(where, field, p, 0, hi));
    out.push_back(static_cast<T>(v));
  }
  return out;
}

StatusOr<const json*> Member(const json& object, const char* key, json::value_t type, const std::string& path) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return static_cast<const json*>(nullptr);
  const bool ok = type == json::value_t::number_integer ? it->is_number_integer() : it->type() == type;
  if (!ok) return InvalidArgumentError(path + key + ": wrong type (" + std::string(it->type_name()) + ")");
  return &*it;
}

}  // namespace

StatusOr<std::vector<ClusterNode>> ParseNodeCsv(std::string_view text, std::string_view path) {
  const auto lines = Lines(text);
  const std::string file(path);
  if (lines.empty()) return InvalidArgumentError(file + ": empty (expected a header: sn,cpu_milli,memory_mib,gpu,model)");
  Header h{Split(lines[0].second, ',')};
  std::array<size_t, 5> col{};
  const char* required[] = {"sn", "cpu_milli", "memory_mib", "gpu", "model"};
  for (size_t i = 0; i < 5; ++i) {
    std::optional<size_t> c = h.Column(required[i]);
    if (!c) return InvalidArgumentError(file + ":" + std::to_string(lines[0].first) + ": no column '" + required[i] + "'");
    col[i] = *c;
  }
  const std::optional<size_t> used_milli = h.Column("gpu_used_milli");
  const std::optional<size_t> used_mib = h.Column("gpu_used_mib");
  std::vector<ClusterNode> nodes;
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string where = file + ":" + std::to_string(lines[i].first);
    const std::vector<std::string> f = Split(lines[i].second, ',');
    if (f.size() != h.names.size()) {
      return InvalidArgumentError(where + ": " + std::to_string(f.size()) + " fields, the header has " +
                                  std::to_string(h.names.size()));
    }
    ClusterNode n;
    n.name = f[col[0]];
    if (n.name.empty()) return InvalidArgumentError(where + ": sn: empty");
    TESSERA_ASSIGN_OR_RETURN(n.cpu_milli, CsvInt(where, "cpu_milli", f[col[1]], 0, int64_t{1} << 40));
    TESSERA_ASSIGN_OR_RETURN(n.memory_mib, CsvInt(where, "memory_mib", f[col[2]], 0, int64_t{1} << 40));
    TESSERA_ASSIGN_OR_RETURN(const int64_t gpus, CsvInt(where, "gpu", f[col[3]], 0, placement::kMaxGpusPerNode));
    n.gpu_count = static_cast<int32_t>(gpus);
    n.model = f[col[4]];
    if (used_milli) {
      TESSERA_ASSIGN_OR_RETURN(n.gpu_used_milli, PerGpu<int32_t>(where, "gpu_used_milli", f[*used_milli], n.gpu_count, 1000));
    }
    if (used_mib) {
      TESSERA_ASSIGN_OR_RETURN(n.gpu_used_mib, PerGpu<int64_t>(where, "gpu_used_mib", f[*used_mib], n.gpu_count, int64_t{1} << 40));
    }
    nodes.push_back(std::move(n));
  }
  return nodes;
}

StatusOr<std::vector<TenantQuota>> ParseQuotaCsv(std::string_view text, std::string_view path) {
  const auto lines = Lines(text);
  const std::string file(path);
  if (lines.empty()) return InvalidArgumentError(file + ": empty (expected a header: tenant,limit_gpu_milli)");
  Header h{Split(lines[0].second, ',')};
  const std::optional<size_t> name = h.Column("tenant");
  const std::optional<size_t> limit = h.Column("limit_gpu_milli");
  const std::optional<size_t> used = h.Column("used_gpu_milli");
  if (!name || !limit) {
    return InvalidArgumentError(file + ":" + std::to_string(lines[0].first) + ": no column '" +
                                (name ? "limit_gpu_milli" : "tenant") + "'");
  }
  std::vector<TenantQuota> out;
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string where = file + ":" + std::to_string(lines[i].first);
    const std::vector<std::string> f = Split(lines[i].second, ',');
    if (f.size() != h.names.size()) {
      return InvalidArgumentError(where + ": " + std::to_string(f.size()) + " fields, the header has " +
                                  std::to_string(h.names.size()));
    }
    TenantQuota q;
    q.name = f[*name];
    if (q.name.empty()) return InvalidArgumentError(where + ": tenant: empty");
    if (!f[*limit].empty() && f[*limit] != "-1") {
      TESSERA_ASSIGN_OR_RETURN(q.limit_gpu_milli, CsvInt(where, "limit_gpu_milli", f[*limit], 0, int64_t{1} << 40));
    }
    if (used && !f[*used].empty()) {
      TESSERA_ASSIGN_OR_RETURN(q.used_gpu_milli, CsvInt(where, "used_gpu_milli", f[*used], 0, int64_t{1} << 40));
    }
    out.push_back(std::move(q));
  }
  return out;
}

StatusOr<std::vector<ClusterNode>> ReadControlPlaneNodes(std::string_view body) {
  const json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return InvalidArgumentError("GET /v1/nodes: the answer is not a JSON object");
  TESSERA_ASSIGN_OR_RETURN(const json* list, Member(doc, "nodes", json::value_t::array, ""));
  std::vector<ClusterNode> out;
  if (list == nullptr) return out;
  for (size_t i = 0; i < list->size(); ++i) {
    const json& v = (*list)[i];
    const std::string at = "nodes[" + std::to_string(i) + "].";
    if (!v.is_object()) return InvalidArgumentError(at.substr(0, at.size() - 1) + ": not an object");
    ClusterNode n;
    TESSERA_ASSIGN_OR_RETURN(const json* name, Member(v, "name", json::value_t::string, at));
    if (name == nullptr) return InvalidArgumentError(at + "name: missing");
    n.name = name->get<std::string>();
    TESSERA_ASSIGN_OR_RETURN(const json* state, Member(v, "state", json::value_t::string, at));
    n.schedulable = state == nullptr || state->get<std::string>() == "ready";
    TESSERA_ASSIGN_OR_RETURN(const json* cpu, Member(v, "cpu_milli", json::value_t::number_integer, at));
    if (cpu) n.cpu_milli = cpu->get<int64_t>();
    TESSERA_ASSIGN_OR_RETURN(const json* mem, Member(v, "memory_mib", json::value_t::number_integer, at));
    if (mem) n.memory_mib = mem->get<int64_t>();
    TESSERA_ASSIGN_OR_RETURN(const json* gpus, Member(v, "gpus", json::value_t::array, at));
    if (gpus != nullptr) {
      for (size_t g = 0; g < gpus->size(); ++g) {
        const json& gv = (*gpus)[g];
        const std::string gat = at + "gpus[" + std::to_string(g) + "].";
        if (!gv.is_object()) return InvalidArgumentError(gat.substr(0, gat.size() - 1) + ": not an object");
        TESSERA_ASSIGN_OR_RETURN(const json* model, Member(gv, "model", json::value_t::string, gat));
        if (model == nullptr) return InvalidArgumentError(gat + "model: missing");
        if (g == 0) n.model = model->get<std::string>();
        n.gpu_models.push_back(model->get<std::string>());
        TESSERA_ASSIGN_OR_RETURN(const json* gmem, Member(gv, "memory_mib", json::value_t::number_integer, gat));
        n.gpu_memory_mib.push_back(gmem ? gmem->get<int64_t>() : 0);
        TESSERA_ASSIGN_OR_RETURN(const json* mig, Member(gv, "mig_enabled", json::value_t::boolean, gat));
        if (mig && mig->get<bool>()) n.mig = true;
        TESSERA_ASSIGN_OR_RETURN(const json* alloc, Member(gv, "allocated_milli", json::value_t::number_integer, gat));
        const int64_t a = alloc ? alloc->get<int64_t>() : 0;
        if (a < 0 || a > 1000) return InvalidArgumentError(gat + "allocated_milli: " + std::to_string(a) + " is out of range 0..1000");
        n.gpu_used_milli.push_back(static_cast<int32_t>(a));
      }
      n.gpu_count = static_cast<int32_t>(gpus->size());
      // One model on every GPU: an ordinary node.
      if (std::all_of(n.gpu_models.begin(), n.gpu_models.end(), [&](const std::string& m) { return m == n.model; })) {
        n.gpu_models.clear();
      }
    }
    out.push_back(std::move(n));
  }
  return out;
}

StatusOr<std::vector<std::string>> ReadControlPlaneTenantNames(std::string_view body) {
  const json doc = json::parse(body, nullptr, false);
  if (!doc.is_object()) return InvalidArgumentError("GET /v1/tenants: the answer is not a JSON object");
  TESSERA_ASSIGN_OR_RETURN(const json* list, Member(doc, "tenants", json::value_t::array, ""));
  std::vector<std::string> out;
  if (list == nullptr) return out;
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string at = "tenants[" + std::to_string(i) + "].";
    if (!(*list)[i].is_object()) return InvalidArgumentError(at + ": not an object");
    TESSERA_ASSIGN_OR_RETURN(const json* name, Member((*list)[i], "name", json::value_t::string, at));
    if (name == nullptr) return InvalidArgumentError(at + "name: missing");
    out.push_back(name->get<std::string>());
  }
  return out;
}

StatusOr<TenantQuota> ReadControlPlaneTenant(std::string_view body) {
  const json doc = json::parse(body, nullptr, false);
  if (!doc.is_object()) return InvalidArgumentError("GET /v1/tenants/{name}: the answer is not a JSON object");
  TenantQuota q;
  TESSERA_ASSIGN_OR_RETURN(const json* name, Member(doc, "name", json::value_t::string, ""));
  if (name == nullptr) return InvalidArgumentError("name: missing");
  q.name = name->get<std::string>();
  TESSERA_ASSIGN_OR_RETURN(const json* quota, Member(doc, "quota", json::value_t::object, ""));
  if (quota != nullptr) {
    TESSERA_ASSIGN_OR_RETURN(const json* limit, Member(*quota, "limit", json::value_t::object, "quota."));
    if (limit != nullptr) {
      TESSERA_ASSIGN_OR_RETURN(const json* milli, Member(*limit, "gpu_milli", json::value_t::number_integer, "quota.limit."));
      if (milli) q.limit_gpu_milli = milli->get<int64_t>();
    }
  }
  TESSERA_ASSIGN_OR_RETURN(const json* usage, Member(doc, "usage", json::value_t::object, ""));
  if (usage != nullptr) {
    TESSERA_ASSIGN_OR_RETURN(const json* milli, Member(*usage, "gpu_milli", json::value_t::number_integer, "usage."));
    if (milli) q.used_gpu_milli = milli->get<int64_t>();
  }
  return q;
}

StatusOr<ClusterState> LoadControlPlaneState(const HttpGet& get) {
  auto fetch = [&](const std::string& path) -> StatusOr<std::string> {
    TESSERA_ASSIGN_OR_RETURN(auto answer, get(path));
    if (answer.first != 200) {
      return UnavailableError("GET " + path + ": HTTP " + std::to_string(answer.first) + ": " + answer.second.substr(0, 200));
    }
    return std::move(answer.second);
  };
  ClusterState state;
  TESSERA_ASSIGN_OR_RETURN(const std::string nodes, fetch("/v1/nodes"));
  StatusOr<std::vector<ClusterNode>> n = ReadControlPlaneNodes(nodes);
  if (!n.ok()) return n.status().WithPrefix("GET /v1/nodes");
  state.nodes = std::move(*n);
  TESSERA_ASSIGN_OR_RETURN(const std::string tenants, fetch("/v1/tenants"));
  StatusOr<std::vector<std::string>> names = ReadControlPlaneTenantNames(tenants);
  if (!names.ok()) return names.status().WithPrefix("GET /v1/tenants");
  for (const std::string& name : *names) {
    const std::string path = "/v1/tenants/" + name;  // names are A-Z a-z 0-9 . _ - (no escaping)
    TESSERA_ASSIGN_OR_RETURN(const std::string body, fetch(path));
    StatusOr<TenantQuota> q = ReadControlPlaneTenant(body);
    if (!q.ok()) return q.status().WithPrefix("GET " + path);
    state.tenants.push_back(std::move(*q));
  }
  return state;
}

StatusOr<std::shared_ptr<const ExtenderCluster>> ExtenderCluster::Build(ClusterState state,
                                                                       const GpuModelCatalog& catalog) {
  std::shared_ptr<ExtenderCluster> c(new ExtenderCluster());
  c->catalog_ = &catalog;
  c->nodes_ = std::move(state.nodes);
  c->tenants_ = std::move(state.tenants);
  std::vector<NodeSpec> specs;
  specs.reserve(c->nodes_.size());
  c->first_gpu_.reserve(c->nodes_.size());
  c->views_.assign(c->nodes_.size(), NodeView{});
  for (size_t i = 0; i < c->nodes_.size(); ++i) {
    const ClusterNode& n = c->nodes_[i];
    const std::string where = "node '" + n.name + "'";
    if (!c->index_.emplace(n.name, static_cast<uint32_t>(i)).second) {
      return InvalidArgumentError(where + ": listed twice");
    }
    NodeSpec spec{n.name, CpuMilli{n.cpu_milli}, MiB{n.memory_mib}, n.gpu_count, GpuModelId(), nullptr, {}};
    int64_t model_mib = 0;
    if (n.gpu_count > 0) {
      StatusOr<GpuModelId> id = catalog.Find(n.model);
      if (!id.ok()) return id.status().WithPrefix(where + ": model");
      spec.model = *id;
      model_mib = catalog.info(*id).memory.value();
      if (!n.gpu_models.empty()) {  // a mixed-model node (cluster_snapshot.h): each GPU its own model
        if (n.gpu_models.size() != static_cast<size_t>(n.gpu_count)) {
          return InvalidArgumentError(where + ": " + std::to_string(n.gpu_models.size()) + " GPU models for " +
                                      std::to_string(n.gpu_count) + " GPUs");
        }
        for (size_t g = 0; g < n.gpu_models.size(); ++g) {
          StatusOr<GpuModelId> each = catalog.Find(n.gpu_models[g]);
          if (!each.ok()) return each.status().WithPrefix(where + ": GPU " + std::to_string(g) + "'s model");
          spec.gpu_models.push_back(*each);
        }
        if (n.mig) return InvalidArgumentError(where + ": a node of several GPU models cannot be in MIG mode");
      }
      if (n.mig) {
        if (!catalog.info(*id).mig) return InvalidArgumentError(where + ": model " + n.model + " has no MIG");
        spec.mig = std::make_shared<const MigGeometry>(*catalog.info(*id).mig);
      }
    }
    const auto size = static_cast<size_t>(n.gpu_count);
    c->first_gpu_.push_back(c->free_mib_.size());
    if (!n.gpu_used_milli.empty() && n.gpu_used_milli.size() != size) {
      return InvalidArgumentError(where + ": gpu_used_milli has " + std::to_string(n.gpu_used_milli.size()) + " values for " +
                                  std::to_string(size) + " GPUs");
    }
    if (!n.gpu_used_mib.empty() && n.gpu_used_mib.size() != size) {
      return InvalidArgumentError(where + ": gpu_used_mib has " + std::to_string(n.gpu_used_mib.size()) + " values for " +
                                  std::to_string(size) + " GPUs");
    }
    for (size_t g = 0; g < size; ++g) {
      const int64_t catalog_mib =
          spec.gpu_models.empty() ? model_mib : catalog.info(spec.gpu_models[g]).memory.value();
      const int64_t cap = g < n.gpu_memory_mib.size() && n.gpu_memory_mib[g] > 0 ? n.gpu_memory_mib[g] : catalog_mib;
      const int64_t used = n.gpu_used_mib.empty() ? 0 : n.gpu_used_mib[g];
      if (cap > 0 && used > cap) {
        return InvalidArgumentError(where + ": GPU " + std::to_string(g) + " uses " + std::to_string(used) + " MiB of " +
                                    std::to_string(cap));
      }
      c->capacity_mib_.push_back(cap);
      c->free_mib_.push_back(cap > 0 ? cap - used : -1);
    }
    specs.push_back(std::move(spec));
  }
  TESSERA_ASSIGN_OR_RETURN(ClusterSnapshot snap, ClusterSnapshot::Create(std::move(specs)));
  // The use as placements: a fraction per partly used GPU, a whole GPU per fully used one. MIG
  // GPUs in use are blocked instead (their instances' layout is not known here).
  for (size_t i = 0; i < c->nodes_.size(); ++i) {
    const ClusterNode& n = c->nodes_[i];
    for (size_t g = 0; g < n.gpu_used_milli.size(); ++g) {
      const int32_t used = n.gpu_used_milli[g];
      if (used <= 0) continue;
      if (n.mig) {
        c->views_[i].blocked |= GpuBit(static_cast<int>(g));
        continue;
      }
      const TaskRequest t{.num_gpu = 1, .gpu_milli = GpuMilli{used}};
      TESSERA_RETURN_IF_ERROR(snap.Apply(t, Placement{NodeIndex{static_cast<uint32_t>(i)}, GpuBit(static_cast<int>(g))}));
    }
  }
  c->snapshot_.emplace(std::move(snap));
  std::vector<uint32_t> order(c->nodes_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<uint32_t>(i);
  std::sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) { return c->nodes_[x].name < c->nodes_[y].name; });
  for (size_t r = 0; r < order.size(); ++r) c->views_[order[r]].name_rank = static_cast<uint32_t>(r);
  // A node's shape: its GPU models (one per GPU on a mixed node), MIG mode and GPU count.
  std::map<std::tuple<std::vector<uint32_t>, bool, int32_t>, uint32_t> shapes;
  for (size_t i = 0; i < c->nodes_.size(); ++i) {
    const NodeIndex n{static_cast<uint32_t>(i)};
    const NodeSpec& spec = c->snapshot_->spec(n);
    NodeView& v = c->views_[i];
    v.name_at = static_cast<uint32_t>(c->names_.size());
    v.name_size = static_cast<uint32_t>(c->nodes_[i].name.size());
    c->names_ += c->nodes_[i].name;
    v.schedulable = c->nodes_[i].schedulable;
    std::vector<uint32_t> models;
    if (spec.gpu_count > 0) models.push_back(spec.model.value());
    for (GpuModelId m : spec.gpu_models) models.push_back(m.value());
    const auto key = std::make_tuple(std::move(models), c->nodes_[i].mig, spec.gpu_count);
    v.shape = shapes.emplace(key, static_cast<uint32_t>(shapes.size())).first->second;
    for (int g = 0; g < spec.gpu_count; ++g) {
      const int64_t cap = c->gpu_memory_mib(n, g);
      if (cap <= 0) continue;
      const int64_t free = c->gpu_free_mib(n, g);
      v.min_free_mib = std::min(v.min_free_mib, free);
      if (free < cap && c->snapshot_->gpu_free(n, g) >= 1000) v.whole_short |= GpuBit(g);
    }
  }
  c->shape_count_ = shapes.size();
  return std::shared_ptr<const ExtenderCluster>(std::move(c));
}

std::optional<NodeIndex> ExtenderCluster::Find(std::string_view name) const {
  // index_ holds views into nodes_[i].name (nodes_ does not change once built).
  auto it = index_.find(name);
  if (it == index_.end()) return std::nullopt;
  return NodeIndex{it->second};
}

const TenantQuota* ExtenderCluster::tenant(std::string_view name) const {
  for (const TenantQuota& t : tenants_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

}  // namespace tessera::k8s
