#include "tessera/config/quota_file.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <sstream>
#include <vector>

namespace tessera::config {

using sched::Resources;
using sched::ResourceSpace;
using sched::TenantSpec;
using sched::TenantTree;
using sched::kFirstModelDim;
using sched::kGpuMemoryDim;
using sched::kGpuMilliDim;
using sched::kMaxQuotaModels;
using sched::kUnlimited;

namespace {

// Collects problems while walking the YAML tree.
struct Walk {
  std::string source;
  const GpuModelCatalog* catalog;
  std::vector<std::string> problems;
  std::vector<std::string> models;  // in order of first use

  std::string At(const YAML::Node& n) const {
    return source + ":" + std::to_string(n.Mark().line + 1) + ": ";
  }
  void Problem(const YAML::Node& n, const std::string& what) { problems.push_back(At(n) + what); }

  std::optional<int64_t> Integer(const YAML::Node& n, const std::string& field) {
    if (!n.IsScalar()) {
      Problem(n, field + ": expected a non-negative integer");
      return std::nullopt;
    }
    const std::string& s = n.Scalar();
    int64_t v = 0;
    bool ok = !s.empty() && s.size() <= 18;
    size_t i = 0;
    bool neg = false;
    if (ok && (s[0] == '-' || s[0] == '+')) {
      neg = s[0] == '-';
      i = 1;
      ok = s.size() > 1;
    }
    for (; ok && i < s.size(); ++i) {
      if (s[i] < '0' || s[i] > '9') ok = false;
      else v = v * 10 + (s[i] - '0');
    }
    if (!ok) {
      Problem(n, field + ": expected an integer, got '" + s + "'");
      return std::nullopt;
    }
    if (neg) {
      Problem(n, field + ": negative quantity " + s);
      return std::nullopt;
    }
    return v;
  }

  int ModelIndex(const std::string& model) {
    for (size_t i = 0; i < models.size(); ++i)
      if (models[i] == model) return static_cast<int>(i);
    models.push_back(model);
    return static_cast<int>(models.size()) - 1;
  }

  // Reads {gpu_milli, gpu_memory_mib, gpus: {model: n}} into `out` (model dims by ModelIndex,
  // remapped once all models are known).
  void Quantities(const YAML::Node& n, const std::string& field, Resources& out,
                  std::vector<std::pair<int, int64_t>>& model_counts) {
    if (!n.IsMap()) {
      Problem(n, field + ": expected a map like {gpu_milli: 8000}");
      return;
    }
    for (const auto& kv : n) {
      const std::string key = kv.first.Scalar();
      if (key == "gpu_milli" || key == "gpu_memory_mib") {
        if (auto v = Integer(kv.second, field + "." + key))
          out[key == "gpu_milli" ? kGpuMilliDim : kGpuMemoryDim] = *v;
      } else if (key == "gpus") {
        if (!kv.second.IsMap()) {
          Problem(kv.second, field + ".gpus: expected a map of GPU model to count");
          continue;
        }
        for (const auto& m : kv.second) {
          const std::string model = m.first.Scalar();
          if (!catalog->Find(model).ok()) {
            Problem(m.first, field + ".gpus: unknown GPU model '" + model + "' (known: " +
                                 catalog->KnownNames() + ")");
            continue;
          }
          if (auto v = Integer(m.second, field + ".gpus." + model))
            model_counts.emplace_back(ModelIndex(model), *v);
        }
      } else {
        Problem(kv.first, field + ": unknown key '" + key +
                              "' (expected gpu_milli, gpu_memory_mib, gpus)");
      }
    }
  }
};

struct PendingTenant {
  TenantSpec spec;
  std::vector<std::pair<int, int64_t>> guaranteed_models, limit_models;
};

void ApplyModels(Resources& r, const std::vector<std::pair<int, int64_t>>& counts) {
  for (auto [m, v] : counts)
    if (m < kMaxQuotaModels) r[kFirstModelDim + m] = v;
}

}  // namespace

StatusOr<QuotaFile> ParseQuotaYaml(std::string_view text, std::string_view source,
                                   const GpuModelCatalog& catalog) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError(std::string(source) + ":" + std::to_string(e.mark.line + 1) +
                                ": not valid YAML: " + e.msg);
  }
  Walk w{std::string(source), &catalog, {}, {}};
  std::vector<PendingTenant> pending;
  std::optional<Resources> capacity;
  std::vector<std::pair<int, int64_t>> capacity_models;
  try {
    if (!root.IsMap()) {
      return InvalidArgumentError(std::string(source) +
                                  ":1: expected a map with a 'tenants' list");
    }
    for (const auto& kv : root) {
      const std::string key = kv.first.Scalar();
      if (key == "capacity") {
        Resources c = Resources::Filled(kUnlimited);
        w.Quantities(kv.second, "capacity", c, capacity_models);
        capacity = c;
      } else if (key != "tenants") {
        w.Problem(kv.first, "unknown top-level key '" + key + "' (expected tenants, capacity)");
      }
    }
    const YAML::Node tenants = root["tenants"];
    if (!tenants) {
      w.problems.push_back(std::string(source) + ":1: missing 'tenants' list");
    } else if (!tenants.IsSequence()) {
      w.Problem(tenants, "tenants: expected a list");
    } else {
      for (const auto& t : tenants) {
        PendingTenant p;
        p.spec.source_line = t.Mark().line + 1;
        if (!t.IsMap()) {
          w.Problem(t, "tenant entry: expected a map with at least 'name'");
          continue;
        }
        for (const auto& kv : t) {
          const std::string key = kv.first.Scalar();
          if (key == "name" || key == "parent") {
            if (!kv.second.IsScalar() || kv.second.Scalar().empty()) {
              w.Problem(kv.second, key + ": expected a non-empty name");
              continue;
            }
            (key == "name" ? p.spec.name : p.spec.parent) = kv.second.Scalar();
          } else if (key == "weight") {
            double v = 0;
            std::istringstream in(kv.second.IsScalar() ? kv.second.Scalar() : "");
            if (!(in >> v) || !in.eof() || !(v > 0) || v > 1e6)
              w.Problem(kv.second, "tenant '" + p.spec.name +
                                       "': weight must be a number in (0, 1e6]");
            else p.spec.weight = v;
          } else if (key == "guaranteed") {
            w.Quantities(kv.second, "tenant '" + p.spec.name + "' guaranteed", p.spec.guaranteed,
                         p.guaranteed_models);
          } else if (key == "limit") {
            w.Quantities(kv.second, "tenant '" + p.spec.name + "' limit", p.spec.limit,
                         p.limit_models);
          } else {
            w.Problem(kv.first, "tenant '" + p.spec.name + "': unknown key '" + key +
                                    "' (expected name, parent, weight, guaranteed, limit)");
          }
        }
        if (p.spec.name.empty()) w.Problem(t, "tenant entry without a name");
        pending.push_back(std::move(p));
      }
    }
  } catch (const YAML::Exception& e) {
    w.problems.push_back(std::string(source) + ":" + std::to_string(e.mark.line + 1) + ": " +
                         e.msg);
  }
  if (static_cast<int>(w.models.size()) > kMaxQuotaModels)
    w.problems.push_back(std::string(source) + ": quotas name " +
                         std::to_string(w.models.size()) + " GPU models; at most " +
                         std::to_string(kMaxQuotaModels) + " are supported");
  std::vector<TenantSpec> specs;
  for (auto& p : pending) {
    ApplyModels(p.spec.guaranteed, p.guaranteed_models);
    ApplyModels(p.spec.limit, p.limit_models);
    specs.push_back(std::move(p.spec));
  }
  if (capacity) ApplyModels(*capacity, capacity_models);
  if (static_cast<int>(w.models.size()) > kMaxQuotaModels) w.models.resize(kMaxQuotaModels);
  // Problems found while reading are listed together with the tree's own (cycles, parents,
  // guarantees); a bad value was left at its default so the rest can still be checked.
  TESSERA_ASSIGN_OR_RETURN(TenantTree tree,
                           TenantTree::Create(std::move(specs), ResourceSpace(w.models), capacity,
                                              source, std::move(w.problems)));
  return QuotaFile{std::move(tree), capacity};
}

StatusOr<QuotaFile> LoadQuotaFile(const std::string& path, const GpuModelCatalog& catalog) {
  std::ifstream in(path);
  if (!in) return NotFoundError("cannot read quota file '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseQuotaYaml(ss.str(), path, catalog);
}

}  // namespace tessera::config
