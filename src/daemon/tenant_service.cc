#include "src/daemon/tenant_service.h"

#include <algorithm>
#include <utility>

#include <nlohmann/json.hpp>

namespace tessera::daemon {

using json = nlohmann::json;

namespace {

void SetField(std::string* bad_field, std::string_view field) {
  if (bad_field) *bad_field = std::string(field);
}

// What keeps tenant `name` in the store, for the refusal of a delete ("1 token (tok_...) and 2
// workloads"); "" when nothing does. Tokens and workloads are never deleted (the audit log names
// them), and both refer to their tenant, so a revoked token or a finished workload counts too.
StatusOr<std::string> WhatKeepsTenant(store::Transaction& tx, const std::string& name) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<store::TokenRecord> all, tx.ListTokens());
  std::vector<std::string> ids;
  for (const store::TokenRecord& t : all)
    if (t.tenant == name) ids.push_back(t.id + (t.revoked ? " revoked" : ""));
  int64_t workloads = 0;
  std::string next;
  do {
    TESSERA_ASSIGN_OR_RETURN(store::WorkloadPage page, tx.ListWorkloadVersions({.tenant = name}, 10000, next));
    workloads += static_cast<int64_t>(page.workloads.size());
    next = page.next_continue;
  } while (!next.empty());
  std::string what;
  if (!ids.empty()) {
    what = std::to_string(ids.size()) + (ids.size() == 1 ? " token (" : " tokens (");
    for (size_t i = 0; i < ids.size() && i < 3; ++i) what += (i ? ", " : "") + ids[i];
    what += ids.size() > 3 ? ", ...)" : ")";
  }
  if (workloads > 0)
    what += (what.empty() ? "" : " and ") + std::to_string(workloads) + (workloads == 1 ? " workload" : " workloads");
  return what;
}

std::string What(std::string_view tenant) { return "tenant '" + std::string(tenant) + "'"; }

}  // namespace

Status CheckIdempotencyKey(std::string_view key) {
  if (key.size() > 255) return InvalidArgumentError("Idempotency-Key: at most 255 characters");
  for (char ch : key)
    if (ch < 0x21 || ch > 0x7e) return InvalidArgumentError("Idempotency-Key: printable ASCII without spaces");
  return Status::Ok();
}

TenantService::TenantService(TransactFn transact, const Clock& clock, TenantWorld world,
                             const GpuModelCatalog& catalog)
    : transact_(std::move(transact)), clock_(clock), world_(std::move(world)), catalog_(catalog) {}

StatusOr<sched::TenantTree> TenantService::Load(std::vector<store::TenantRecord> all) {
  tenants_.clear();
  for (store::TenantRecord& t : all) tenants_[t.name] = std::move(t);
  RefreshParents();
  return BuildTenantTree(tenants_, catalog_);
}

void TenantService::RefreshParents() {
  std::unique_lock<std::shared_mutex> lock(parents_mu_);
  parent_of_.clear();
  for (const auto& [name, t] : tenants_) parent_of_[name] = t.parent;
}

ParentOf TenantService::Parents() const {
  return [this](std::string_view t) -> std::optional<std::string> {
    std::shared_lock<std::shared_mutex> lock(parents_mu_);
    auto it = parent_of_.find(std::string(t));
    if (it == parent_of_.end()) return std::nullopt;
    return it->second;
  };
}

Status TenantService::WhileExists(std::string_view tenant, const std::function<Status()>& write) {
  std::lock_guard<std::mutex> lock(*world_.mu);  // the tenant cannot vanish meanwhile
  if (!tenants_.count(std::string(tenant))) return NotFoundError(What(tenant) + " not found");
  return write();
}

Status TenantService::Apply(std::map<std::string, store::TenantRecord> next, const TenantCaller& caller,
                            std::string_view action, const std::string& name, int ok_code,
                            const std::function<Status(store::Transaction&)>& write, std::string* bad_field) {
  StatusOr<sched::TenantTree> tree = BuildTenantTree(next, catalog_);
  if (!tree.ok()) {
    SetField(bad_field, "quota");
    return tree.status();
  }
  if (Status st = world_.set_tree(std::move(*tree)); !st.ok()) {
    SetField(bad_field, "quota");
    return st;
  }
  const int64_t now = UnixMillis(clock_);
  // The event feed's "tenant.created", "tenant.updated" or "tenant.deleted". A deleted tenant is
  // no longer in anyone's subtree, so its event is scoped to its parent ("" for a root: admins).
  // So is a created one: the feed may publish the event before this service's map holds the new
  // tenant (the commit wakes it), and a scope it cannot place was seen by admins only (under load
  // a tenant-admin's stream missed its new child); nobody's token is scoped to it yet anyway.
  const bool deleted = !next.count(name);
  const std::string kind = action == "tenant.create" ? "tenant.created"
                           : deleted                 ? "tenant.deleted"
                                                     : "tenant.updated";
  std::string scope = name;
  std::string detail;
  if (deleted) scope = tenants_.count(name) ? tenants_.at(name).parent : "";
  else if (action == "tenant.create") scope = next.at(name).parent;
  else if (action == "tenant.create") detail = next.at(name).parent.empty() ? "a root" : "under '" + next.at(name).parent + "'";
  Status st = transact_("tenant", [&](store::Transaction& tx) -> Status {
    TESSERA_RETURN_IF_ERROR(write(tx));
    TESSERA_RETURN_IF_ERROR(tx.AppendObjectEvent({"tenant", name, scope, now, kind, detail}).status());
    return tx.AppendAudit({now, caller.actor, std::string(action), "tenants/" + name, std::to_string(ok_code)}).status();
  });
  if (!st.ok()) {
    // The store refused (a tenant still referenced, ...): the scheduler keeps the old tree.
    if (StatusOr<sched::TenantTree> old = BuildTenantTree(tenants_, catalog_); old.ok())
      (void)world_.set_tree(std::move(*old));
    return st;
  }
  tenants_ = std::move(next);
  RefreshParents();
  world_.changed();
  return Status::Ok();
}

StatusOr<CreatedTenant> TenantService::Create(const TenantCaller& caller, const NewTenantRequest& req,
                                              std::string* bad_field) {
  SetField(bad_field, "");
  const TenantBody& b = req.body;
  const std::string parent = b.parent.value_or("");
  TESSERA_RETURN_IF_ERROR(caller.check(Action::kCreateTenant, parent, What(parent)));
  if (Status st = CheckIdempotencyKey(req.idempotency_key); !st.ok()) {
    SetField(bad_field, "Idempotency-Key");
    return st;
  }
  const json quota = b.quota ? *b.quota : json{{"guaranteed", json::object()}, {"limit", json::object()}, {"weight", 1.0}};
  store::TenantRecord rec;
  rec.name = b.name;
  rec.parent = parent;
  rec.spec_json = TenantSpecJson(quota, b.default_qos.value_or("Burstable"));
  if (!req.idempotency_key.empty()) {
    StatusOr<store::IdempotencyRecord> stored = store::IdempotencyRecord{};
    const Status read = transact_("read", [&](store::Transaction& tx) -> Status {
      stored = tx.GetIdempotency(caller.actor, req.idempotency_key);
      return Status::Ok();
    });
    if (!read.ok()) return read;
    if (stored.ok()) {
      // A retry asks for the same tenant; the same key with another one is a client's mistake,
      // and the first answer would claim a tenant that was never made. The stored answer is the
      // tenant's view, so the request is compared with what it would have answered, but for the
      // times.
      json first = json::parse(stored->body, nullptr, false);
      json again = TenantView(rec);
      for (json* j : {&first, &again})
        if (j->is_object()) {
          j->erase("created_ms");
          j->erase("updated_ms");
        }
      if (stored->status_code == 201 && first != again) {
        SetField(bad_field, "Idempotency-Key");
        return FailedPreconditionError(
            "Idempotency-Key: already used by this token for another request (tenant '" +
            (first.is_object() ? first.value("name", std::string()) : std::string()) +
            "'); a new tenant takes a new key");
      }
      return CreatedTenant{{}, ReplayedAnswer{stored->status_code, stored->body}};
    }
    if (stored.status().code() != StatusCode::kNotFound) return stored.status();
  }
  std::lock_guard<std::mutex> lock(*world_.mu);
  if (!parent.empty() && !tenants_.count(parent)) {
    SetField(bad_field, "parent");
    return InvalidArgumentError("parent: unknown tenant '" + parent + "'");
  }
  if (tenants_.count(b.name)) return AlreadyExistsError("tenant '" + b.name + "' exists");
  rec.created_ms = rec.updated_ms = UnixMillis(clock_);
  auto next = tenants_;
  next[rec.name] = rec;
  const std::string view = TenantView(rec).dump();
  const auto write = [&](store::Transaction& tx) -> Status {
    TESSERA_RETURN_IF_ERROR(tx.CreateTenant(rec));
    if (req.idempotency_key.empty()) return Status::Ok();
    return tx.PutIdempotency({caller.actor, req.idempotency_key, 201, view, rec.created_ms});
  };
  TESSERA_RETURN_IF_ERROR(Apply(std::move(next), caller, "tenant.create", rec.name, 201, write, bad_field));
  return CreatedTenant{std::move(rec), std::nullopt};
}

std::vector<store::TenantRecord> TenantService::List(const std::function<bool(std::string_view name)>& visible) const {
  std::vector<store::TenantRecord> out;
  std::lock_guard<std::mutex> lock(*world_.mu);
  for (const auto& [name, t] : tenants_)
    if (visible(name)) out.push_back(t);
  return out;
}

std::map<std::string, FairShare> TenantService::FairShares(const std::vector<std::string>& names) const {
  std::map<std::string, FairShare> out;
  if (!world_.dominant_share) return out;
  std::lock_guard<std::mutex> lock(*world_.mu);
  // Each sibling group's tenants with their shares, then ranked lowest first (ties: by name).
  std::map<std::string, std::vector<std::pair<double, std::string>>> by_parent;
  for (const auto& [name, t] : tenants_)
    if (std::optional<double> d = world_.dominant_share(name)) by_parent[t.parent].push_back({*d, name});
  std::map<std::string, FairShare> all;
  for (auto& [parent, group] : by_parent) {
    std::sort(group.begin(), group.end());
    for (size_t i = 0; i < group.size(); ++i)
      all[group[i].second] = {group[i].first, static_cast<int>(i) + 1, static_cast<int>(group.size())};
  }
  for (const std::string& n : names)
    if (auto it = all.find(n); it != all.end()) out.insert(*it);
  return out;
}

StatusOr<TenantInfo> TenantService::Get(const TenantCaller& caller, const std::string& name) const {
  TESSERA_RETURN_IF_ERROR(caller.check(Action::kReadTenant, name, What(name)));
  std::lock_guard<std::mutex> lock(*world_.mu);
  auto it = tenants_.find(name);
  if (it == tenants_.end()) return NotFoundError(What(name) + " not found");
  return TenantInfo{it->second, world_.usage(name)};
}

StatusOr<store::TenantRecord> TenantService::Update(const TenantCaller& caller, const std::string& name,
                                                    const TenantBody& b, std::string* bad_field) {
  SetField(bad_field, "");
  TESSERA_RETURN_IF_ERROR(caller.check(Action::kChangeQuota, name, What(name)));
  if (b.parent) TESSERA_RETURN_IF_ERROR(caller.check(Action::kCreateTenant, *b.parent, What(name)));
  std::lock_guard<std::mutex> lock(*world_.mu);
  auto it = tenants_.find(name);
  if (it == tenants_.end()) return NotFoundError(What(name) + " not found");
  store::TenantRecord rec = it->second;
  if (b.parent) {
    if (!b.parent->empty() && !tenants_.count(*b.parent)) {
      SetField(bad_field, "parent");
      return InvalidArgumentError("parent: unknown tenant '" + *b.parent + "'");
    }
    rec.parent = *b.parent;
  }
  json spec = json::parse(rec.spec_json, nullptr, false);
  if (spec.is_discarded()) spec = json::object();
  rec.spec_json = TenantSpecJson(b.quota ? *b.quota : spec.value("quota", json::object()),
                                 b.default_qos.value_or(spec.value("default_qos", std::string("Burstable"))));
  rec.updated_ms = UnixMillis(clock_);
  auto next = tenants_;
  next[name] = rec;
  TESSERA_RETURN_IF_ERROR(Apply(std::move(next), caller, "tenant.update", name, 200,
                                [&](store::Transaction& tx) { return tx.UpdateTenant(rec); }, bad_field));
  return rec;
}

Status TenantService::Delete(const TenantCaller& caller, const std::string& name) {
  TESSERA_RETURN_IF_ERROR(caller.check(Action::kDeleteTenant, name, What(name)));
  std::lock_guard<std::mutex> lock(*world_.mu);
  if (!tenants_.count(name)) return NotFoundError(What(name) + " not found");
  for (const auto& [other, t] : tenants_)
    if (t.parent == name)
      return FailedPreconditionError("tenant '" + name + "' has sub-tenants ('" + other + "', ...)");
  std::string kept;
  const Status read = transact_("read", [&](store::Transaction& tx) -> Status {
    TESSERA_ASSIGN_OR_RETURN(kept, WhatKeepsTenant(tx, name));
    return Status::Ok();
  });
  if (!read.ok()) return read;
  if (!kept.empty())
    return FailedPreconditionError("tenant '" + name + "' has " + kept +
                                   ": tokens (revoked or not) and workloads (finished or not) are kept for the "
                                   "audit log, so a tenant that had any cannot be deleted");
  auto next = tenants_;
  next.erase(name);
  return Apply(std::move(next), caller, "tenant.delete", name, 200,
               [&](store::Transaction& tx) { return tx.DeleteTenant(name); }, nullptr);
}

}  // namespace tessera::daemon
