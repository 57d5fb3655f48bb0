// The tenant hierarchy (organisation -> team -> project, any depth) and each tenant's quota:
// per resource a `guaranteed` amount (never taken away, never over-committed), a `limit` (a hard
// cap, borrowing included) and an over-quota weight (its share of the surplus under weighted
// DRF). Quotas come from a YAML file (config/quota_file.h) or from code.
//
// Rules checked by Create (every problem is listed, one per line, naming the tenant and the
// source line when known):
//   - names are unique and non-empty; a parent must exist; the parent links have no cycle;
//   - quantities are non-negative, weight > 0, guaranteed <= limit;
//   - a parent's guarantee covers the sum of its children's guarantees (no over-commit inside
//     an organisation), and the roots' guarantees fit the cluster's capacity when one is given.
//
// Worked example:
//   acme (guaranteed 32 GPUs)  ->  vision (16), speech (8)     ok: 16 + 8 <= 32
//   acme (guaranteed 16 GPUs)  ->  vision (16), speech (8)     "acme: children guarantee
//                                                               gpu_milli=24000 > its 16000"
// Thread-safety: immutable after Create.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tessera/core/status.h"
#include "tessera/sched/resources.h"

namespace tessera::sched {

using TenantIndex = int32_t;
inline constexpr TenantIndex kNoTenant = -1;

struct TenantSpec {
  std::string name;
  std::string parent;        // empty: a root
  Resources guaranteed;      // zero by default
  Resources limit = Resources::Filled(kUnlimited);
  double weight = 1.0;       // over-quota weight, > 0
  int source_line = 0;       // for messages; 0 = not from a file
};

class TenantTree {
 public:
  // `capacity`, when given, is what the roots' guarantees must fit in. `earlier_problems`
  // (e.g. from reading the file) are reported together with the tree's own.
  static StatusOr<TenantTree> Create(std::vector<TenantSpec> tenants, ResourceSpace space,
                                     std::optional<Resources> capacity = std::nullopt,
                                     std::string_view source = "",
                                     std::vector<std::string> earlier_problems = {});

  int size() const { return static_cast<int>(specs_.size()); }
  const ResourceSpace& space() const { return space_; }
  const TenantSpec& spec(TenantIndex t) const { return specs_[t]; }
  const std::string& name(TenantIndex t) const { return specs_[t].name; }
  TenantIndex parent(TenantIndex t) const { return parent_[t]; }
  const std::vector<TenantIndex>& children(TenantIndex t) const { return children_[t]; }
  bool is_leaf(TenantIndex t) const { return children_[t].empty(); }
  // Root first, `t` last.
  const std::vector<TenantIndex>& path(TenantIndex t) const { return path_[t]; }
  int depth(TenantIndex t) const { return static_cast<int>(path_[t].size()) - 1; }
  const std::vector<TenantIndex>& roots() const { return roots_; }
  std::optional<TenantIndex> Find(std::string_view name) const;

  // Lists every root guarantee that together exceed `capacity` (INVALID_ARGUMENT) — used when
  // the cluster is only known after the quota file was read.
  Status CheckFits(const Resources& capacity) const;

 private:
  std::vector<TenantSpec> specs_;
  ResourceSpace space_;
  std::vector<TenantIndex> parent_;
  std::vector<std::vector<TenantIndex>> children_;
  std::vector<std::vector<TenantIndex>> path_;
  std::vector<TenantIndex> roots_;
  std::unordered_map<std::string, TenantIndex> by_name_;
};

}  // namespace tessera::sched
