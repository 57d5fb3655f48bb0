#include "tessera/sched/tenant.h"

#include <string>

namespace tessera::sched {
namespace {

std::string Where(std::string_view source, const TenantSpec& s) {
  std::string w;
  if (!source.empty()) w += std::string(source) + ":";
  if (s.source_line > 0) w += std::to_string(s.source_line) + ": ";
  else if (!w.empty()) w += " ";
  return w;
}

}  // namespace

StatusOr<TenantTree> TenantTree::Create(std::vector<TenantSpec> tenants, ResourceSpace space,
                                        std::optional<Resources> capacity,
                                        std::string_view source,
                                        std::vector<std::string> problems) {
  size_t structural_from = problems.size();
  if (static_cast<int>(space.models().size()) > kMaxQuotaModels)
    problems.push_back("at most " + std::to_string(kMaxQuotaModels) +
                       " GPU models may carry whole-GPU quotas, got " +
                       std::to_string(space.models().size()));
  TenantTree tree;
  tree.space_ = space;
  const int n = static_cast<int>(tenants.size());
  for (int t = 0; t < n; ++t) {
    const TenantSpec& s = tenants[t];
    const std::string where = Where(source, s);
    if (s.name.empty()) {
      problems.push_back(where + "tenant #" + std::to_string(t + 1) + ": empty name");
      continue;
    }
    if (!tree.by_name_.emplace(s.name, t).second)
      problems.push_back(where + "tenant '" + s.name + "': defined twice");
  }
  const size_t structural = problems.size() - structural_from;
  for (int t = 0; t < n; ++t) {
    const TenantSpec& s = tenants[t];
    const std::string where = Where(source, s);
    if (!(s.weight > 0)) problems.push_back(where + "tenant '" + s.name + "': weight must be > 0");
    for (int d = 0; d < space.dims(); ++d) {
      if (s.guaranteed[d] < 0)
        problems.push_back(where + "tenant '" + s.name + "': negative guaranteed " +
                           space.DimName(d) + " (" + std::to_string(s.guaranteed[d]) + ")");
      if (s.limit[d] < 0)
        problems.push_back(where + "tenant '" + s.name + "': negative limit " + space.DimName(d) +
                           " (" + std::to_string(s.limit[d]) + ")");
      if (s.guaranteed[d] >= 0 && s.limit[d] >= 0 && s.guaranteed[d] > s.limit[d])
        problems.push_back(where + "tenant '" + s.name + "': guaranteed " + space.DimName(d) +
                           " " + std::to_string(s.guaranteed[d]) + " exceeds its limit " +
                           std::to_string(s.limit[d]));
    }
  }
  int unknown_parents = 0;
  tree.parent_.assign(n, kNoTenant);
  tree.children_.assign(n, {});
  for (int t = 0; t < n; ++t) {
    const TenantSpec& s = tenants[t];
    if (s.parent.empty()) continue;
    auto it = tree.by_name_.find(s.parent);
    if (it == tree.by_name_.end()) {
      ++unknown_parents;
      problems.push_back(Where(source, s) + "tenant '" + s.name + "': unknown parent '" +
                         s.parent + "'");
      continue;
    }
    if (it->second == t) {
      problems.push_back(Where(source, s) + "tenant '" + s.name + "': is its own parent");
      continue;
    }
    tree.parent_[t] = it->second;
  }
  // Cycles: walk up from every tenant; a walk longer than n revisits someone.
  std::vector<char> reported(n, 0);
  int structural_cycles = 0;
  for (int t = 0; t < n; ++t) {
    std::vector<int> seen_at(n, -1);
    int cur = t, steps = 0;
    while (cur != kNoTenant && seen_at[cur] < 0) {
      seen_at[cur] = steps++;
      cur = tree.parent_[cur];
    }
    if (cur == kNoTenant || reported[cur]) continue;
    // `cur` is on a cycle: report it once, listing its members.
    std::string cycle = tenants[cur].name;
    reported[cur] = 1;
    for (int c = tree.parent_[cur]; c != cur; c = tree.parent_[c]) {
      reported[c] = 1;
      cycle += " -> " + tenants[c].name;
    }
    cycle += " -> " + tenants[cur].name;
    problems.push_back(Where(source, tenants[cur]) + "parent links form a cycle: " + cycle);
    ++structural_cycles;
  }
  if (structural > 0 || structural_cycles > 0 || unknown_parents > 0) {
    std::string msg = std::to_string(problems.size()) + " problem(s) in the tenant quotas:";
    for (const auto& p : problems) msg += "\n  " + p;
    return InvalidArgumentError(msg);
  }

  tree.specs_ = std::move(tenants);
  tree.path_.assign(n, {});
  for (int t = 0; t < n; ++t) {
    if (tree.parent_[t] == kNoTenant) tree.roots_.push_back(t);
    else tree.children_[tree.parent_[t]].push_back(t);
    std::vector<TenantIndex> up;
    for (int c = t; c != kNoTenant; c = tree.parent_[c]) up.push_back(c);
    tree.path_[t].assign(up.rbegin(), up.rend());
  }
  // Guarantees: children within their parent, roots within the cluster.
  for (int t = 0; t < n; ++t) {
    if (tree.children_[t].empty()) continue;
    Resources sum;
    for (TenantIndex c : tree.children_[t]) sum += tree.specs_[c].guaranteed;
    for (int d = 0; d < space.dims(); ++d)
      if (sum[d] > tree.specs_[t].guaranteed[d])
        problems.push_back(Where(source, tree.specs_[t]) + "tenant '" + tree.specs_[t].name +
                           "': its children's guarantees add up to " + space.DimName(d) + " " +
                           std::to_string(sum[d]) + ", more than its own guarantee " +
                           std::to_string(tree.specs_[t].guaranteed[d]));
  }
  if (capacity) {
    Status fits = tree.CheckFits(*capacity);
    if (!fits.ok()) problems.push_back(std::string(fits.message()));
  }
  if (!problems.empty()) {
    std::string msg = std::to_string(problems.size()) + " problem(s) in the tenant quotas:";
    for (const auto& p : problems) msg += "\n  " + p;
    return InvalidArgumentError(msg);
  }
  return tree;
}

Status TenantTree::CheckFits(const Resources& capacity) const {
  Resources sum;
  for (TenantIndex r : roots_) sum += specs_[r].guaranteed;
  std::string msg;
  for (int d = 0; d < space_.dims(); ++d)
    if (sum[d] > capacity[d]) {
      if (!msg.empty()) msg += "; ";
      msg += "guarantees over capacity: the top-level tenants are guaranteed " +
             space_.DimName(d) + " " + std::to_string(sum[d]) + " but the cluster has " +
             std::to_string(capacity[d]);
    }
  if (msg.empty()) return Status::Ok();
  return InvalidArgumentError(msg);
}

std::optional<TenantIndex> TenantTree::Find(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

}  // namespace tessera::sched
