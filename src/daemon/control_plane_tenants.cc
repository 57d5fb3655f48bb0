// /v1/tenants and /v1/tokens.
#include <algorithm>
#include <optional>
#include <utility>
#include <nlohmann/json.hpp>

#include "src/daemon/api_codec.h"
#include "tessera/api/json_fields.h"
#include "src/daemon/control_plane_impl.h"
#include "src/daemon/tokens.h"

namespace tessera::daemon {

using json = nlohmann::json;

namespace {

// What keeps tenant `name` in the store, for the 409 of a DELETE ("1 token (tok_...) and 2
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

}  // namespace

StatusOr<std::string> ControlPlane::Impl::IdempotencyKey(const HttpRequest& r) const {
  std::string key = r.Header("idempotency-key");
  if (key.empty()) return key;
  if (key.size() > 255) return InvalidArgumentError("Idempotency-Key: at most 255 characters");
  for (char ch : key)
    if (ch < 0x21 || ch > 0x7e) return InvalidArgumentError("Idempotency-Key: printable ASCII without spaces");
  return key;
}

std::optional<HttpResponse> ControlPlane::Impl::StoredAnswer(const Caller& c, const std::string& key) {
  if (key.empty()) return std::nullopt;
  StatusOr<store::IdempotencyRecord> rec = store::IdempotencyRecord{};
  Status st = Transact("read", [&](store::Transaction& tx) -> Status {
    rec = tx.GetIdempotency(c.token_id, key);
    return Status::Ok();
  });
  if (!st.ok()) return ErrorResponse(st);
  if (!rec.ok()) {
    if (rec.status().code() == StatusCode::kNotFound) return std::nullopt;
    return ErrorResponse(rec.status());
  }
  HttpResponse out = HttpResponse::Json(rec->status_code, rec->body);
  out.headers.push_back({"Idempotent-Replayed", "true"});
  return out;
}

HttpResponse ControlPlane::Impl::ApplyTenants(std::map<std::string, store::TenantRecord> next, const Caller& c,
                                              const std::string& action, const std::string& name, int ok_code,
                                              const std::function<Status(store::Transaction&)>& write,
                                              json answer) {
  StatusOr<sched::TenantTree> tree = BuildTenantTree(next, catalog);
  if (!tree.ok()) return ErrorResponse(tree.status(), "quota");
  if (Status st = live->SetTenants(std::move(*tree)); !st.ok()) return ErrorResponse(st, "quota");
  const int64_t now = NowMs();
  const std::string body = answer.dump();
  // The event feed's "tenant.created", "tenant.updated" or "tenant.deleted". A deleted tenant is
  // no longer in anyone's subtree, so its event is scoped to its parent ("" for a root: admins).
  const bool deleted = !next.count(name);
  const std::string kind = action == "tenant.create" ? "tenant.created"
                           : deleted                 ? "tenant.deleted"
                                                     : "tenant.updated";
  std::string scope = name;
  std::string detail;
  if (deleted) scope = tenants.count(name) ? tenants.at(name).parent : "";
  else if (action == "tenant.create") detail = next.at(name).parent.empty() ? "a root" : "under '" + next.at(name).parent + "'";
  Status st = Transact("tenant", [&](store::Transaction& tx) -> Status {
    TESSERA_RETURN_IF_ERROR(write(tx));
    TESSERA_RETURN_IF_ERROR(tx.AppendObjectEvent({"tenant", name, scope, now, kind, detail}).status());
    return tx.AppendAudit({now, c.token_id, action, "tenants/" + name, std::to_string(ok_code)}).status();
  });
  if (!st.ok()) {
    // The store refused (a tenant still referenced, ...): the scheduler keeps the old tree.
    if (StatusOr<sched::TenantTree> old = BuildTenantTree(tenants, catalog); old.ok())
      (void)live->SetTenants(std::move(*old));
    return ErrorResponse(st);
  }
  tenants = std::move(next);
  RefreshParents();
  UpdateGauges();
  wake = true;
  wake_cv.notify_one();
  return HttpResponse::Json(ok_code, body);
}

HttpResponse ControlPlane::Impl::CreateTenant(const HttpRequest& r, const Caller& c) {
  std::string field;
  StatusOr<TenantBody> b = DecodeTenantBody(r.body, /*create=*/true, catalog, &field);
  if (!b.ok()) return ErrorResponse(b.status(), field);
  const std::string parent = b->parent.value_or("");
  if (auto denied = Scope(c, parent, "tenant '" + parent + "'")) return *denied;
  StatusOr<std::string> key = IdempotencyKey(r);
  if (!key.ok()) return ErrorResponse(key.status(), "Idempotency-Key");
  if (auto stored = StoredAnswer(c, *key)) {
    // A retry asks for the same tenant; the same key with another one is a client's mistake, and
    // the first answer would claim a tenant that was never made: 422 (the IETF Idempotency-Key
    // draft's answer to a reused key). The stored answer is the tenant's view, so the request
    // is compared with what it would have answered, but for the times.
    store::TenantRecord asked;
    asked.name = b->name;
    asked.parent = parent;
    asked.spec_json = TenantSpecJson(*b->quota, b->default_qos.value_or("Burstable"));
    json first = json::parse(stored->body, nullptr, false);
    json again = TenantView(asked);
    for (json* j : {&first, &again})
      if (j->is_object()) {
        j->erase("created_ms");
        j->erase("updated_ms");
      }
    if (stored->status == 201 && first != again)
      return HttpResponse::Error(422, "idempotency_key_reused",
                                 "Idempotency-Key: already used by this token for another request (tenant '" +
                                     (first.is_object() ? first.value("name", std::string()) : std::string()) +
                                     "'); a new tenant takes a new key",
                                 "Idempotency-Key");
    return *stored;
  }
  std::lock_guard<std::mutex> lock(mu);
  if (!parent.empty() && !tenants.count(parent))
    return HttpResponse::Error(400, "invalid_argument", "parent: unknown tenant '" + parent + "'", "parent");
  if (tenants.count(b->name))
    return HttpResponse::Error(409, "already_exists", "tenant '" + b->name + "' exists");
  store::TenantRecord rec;
  rec.name = b->name;
  rec.parent = parent;
  rec.spec_json = TenantSpecJson(*b->quota, b->default_qos.value_or("Burstable"));
  rec.created_ms = rec.updated_ms = NowMs();
  auto next = tenants;
  next[rec.name] = rec;
  const json view = TenantView(rec);
  return ApplyTenants(std::move(next), c, "tenant.create", rec.name, 201, [&](store::Transaction& tx) -> Status {
    TESSERA_RETURN_IF_ERROR(tx.CreateTenant(rec));
    if (key->empty()) return Status::Ok();
    return tx.PutIdempotency({c.token_id, *key, 201, view.dump(), rec.created_ms});
  }, view);
}

HttpResponse ControlPlane::Impl::ListTenants(const HttpRequest&, const Caller& c) {
  const ParentOf parents = Parents();
  json list = json::array();
  std::lock_guard<std::mutex> lock(mu);
  for (const auto& [name, t] : tenants) {
    const bool visible = SeesAllTenants(c.principal) || InSubtree(name, c.principal.tenant, parents);
    if (visible) list.push_back(TenantView(t));
  }
  return HttpResponse::Json(200, json{{"tenants", list}}.dump());
}

HttpResponse ControlPlane::Impl::GetTenant(const HttpRequest& r, const Caller&) {
  const std::string name = r.path_params.at("name");
  std::lock_guard<std::mutex> lock(mu);
  auto it = tenants.find(name);
  if (it == tenants.end()) return NotFound("tenant '" + name + "'");
  json view = TenantView(it->second);
  if (StatusOr<sched::Resources> use = live->usage(name); use.ok()) {
    const sched::ResourceSpace& space = live->tenants().space();
    json u = json::object();
    for (int dim = 0; dim < space.dims(); ++dim) u[space.DimName(dim)] = (*use)[dim];
    view["usage"] = u;
  }
  return HttpResponse::Json(200, view.dump());
}

HttpResponse ControlPlane::Impl::PatchTenant(const HttpRequest& r, const Caller& c) {
  const std::string name = r.path_params.at("name");
  std::string field;
  StatusOr<TenantBody> b = DecodeTenantBody(r.body, /*create=*/false, catalog, &field);
  if (!b.ok()) return ErrorResponse(b.status(), field);
  // kChangeQuota on `name` is the route's (the wrapper's); moving it also creates below the new parent.
  if (b->parent)
    if (auto denied = Scope(c, *b->parent, "tenant '" + name + "'", Action::kCreateTenant)) return *denied;
  std::lock_guard<std::mutex> lock(mu);
  auto it = tenants.find(name);
  if (it == tenants.end()) return NotFound("tenant '" + name + "'");
  store::TenantRecord rec = it->second;
  if (b->parent) {
    if (!b->parent->empty() && !tenants.count(*b->parent))
      return HttpResponse::Error(400, "invalid_argument", "parent: unknown tenant '" + *b->parent + "'", "parent");
    rec.parent = *b->parent;
  }
  json spec = json::parse(rec.spec_json, nullptr, false);
  if (spec.is_discarded()) spec = json::object();
  rec.spec_json = TenantSpecJson(b->quota ? *b->quota : spec.value("quota", json::object()),
                                 b->default_qos.value_or(spec.value("default_qos", std::string("Burstable"))));
  rec.updated_ms = NowMs();
  auto next = tenants;
  next[name] = rec;
  return ApplyTenants(std::move(next), c, "tenant.update", name, 200,
                      [&](store::Transaction& tx) { return tx.UpdateTenant(rec); }, TenantView(rec));
}

HttpResponse ControlPlane::Impl::DeleteTenant(const HttpRequest& r, const Caller& c) {
  const std::string name = r.path_params.at("name");
  std::lock_guard<std::mutex> lock(mu);
  if (!tenants.count(name)) return NotFound("tenant '" + name + "'");
  for (const auto& [other, t] : tenants)
    if (t.parent == name)
      return HttpResponse::Error(409, "conflict", "tenant '" + name + "' has sub-tenants ('" + other + "', ...)");
  std::string kept;
  Status st = Transact("read", [&](store::Transaction& tx) -> Status {
    TESSERA_ASSIGN_OR_RETURN(kept, WhatKeepsTenant(tx, name));
    return Status::Ok();
  });
  if (!st.ok()) return ErrorResponse(st);
  if (!kept.empty())
    return HttpResponse::Error(409, "conflict",
                               "tenant '" + name + "' has " + kept +
                                   ": tokens (revoked or not) and workloads (finished or not) are kept for the "
                                   "audit log, so a tenant that had any cannot be deleted");
  auto next = tenants;
  next.erase(name);
  return ApplyTenants(std::move(next), c, "tenant.delete", name, 200,
                      [&](store::Transaction& tx) { return tx.DeleteTenant(name); },
                      json{{"name", name}, {"deleted", true}});
}

namespace {

json TokenView(const store::TokenRecord& t) {
  json j = {{"id", t.id}, {"role", t.role}, {"tenant", t.tenant.empty() ? json(nullptr) : json(t.tenant)},
            {"node", t.node.empty() ? json(nullptr) : json(t.node)}, {"revoked", t.revoked},
            {"created_ms", t.created_ms}};
  j["expires_ms"] = t.expires_ms ? json(*t.expires_ms) : json(nullptr);
  return j;
}

}  // namespace

TokenCaller ControlPlane::Impl::TokenCallerOf(const Caller& c) const {
  return {c.token_id, [this, &c](Action action, std::string_view tenant, Role new_token_role) {
            return Check(c, tenant, "tenant '" + std::string(tenant) + "'", action, new_token_role);
          }};
}

HttpResponse ControlPlane::Impl::CreateToken(const HttpRequest& r, const Caller& c) {
  if (!r.Header("idempotency-key").empty())
    return HttpResponse::Error(400, "invalid_argument",
                               "Idempotency-Key: not taken on /v1/tokens (a token's secret is never stored, so "
                               "its answer cannot be replayed)",
                               "Idempotency-Key");
  std::string field;
  StatusOr<json> j = api::ParseJsonObject(r.body);
  if (!j.ok()) return ErrorResponse(j.status());
  api::JsonFields f(*j, "", &field);
  if (Status st = f.OnlyKnown({"role", "tenant", "node", "expires_in_s"}); !st.ok()) return ErrorResponse(st, field);
  if (Status st = f.Require("role"); !st.ok()) return ErrorResponse(st, field);
  StatusOr<std::string> role_name = f.Str("role", 32);
  if (!role_name.ok()) return ErrorResponse(role_name.status(), field);
  StatusOr<Role> role = ParseRole(*role_name);
  if (!role.ok())
    return HttpResponse::Error(400, "invalid_argument",
                               "role: '" + *role_name + "' is not " + std::string(RoleNames()), "role");
  StatusOr<std::string> tenant = f.Str("tenant", 63);
  if (!tenant.ok()) return ErrorResponse(tenant.status(), field);
  const bool tenant_role = *role == Role::kTenantAdmin || *role == Role::kTenantUser;
  if (tenant_role && tenant->empty())
    return HttpResponse::Error(400, "invalid_argument", "tenant: required for role " + *role_name, "tenant");
  if (!tenant_role && !tenant->empty())
    return HttpResponse::Error(400, "invalid_argument", "tenant: role " + *role_name + " is not bound to a tenant",
                               "tenant");
  // A node-agent token may be bound to one node: it then registers, heartbeats and reports for
  // that node only. The node need not be registered yet (the token is made for a new machine).
  StatusOr<std::string> node = f.Str("node", 63);
  if (!node.ok()) return ErrorResponse(node.status(), field);
  if (!node->empty() && *role != Role::kNodeAgent)
    return HttpResponse::Error(400, "invalid_argument",
                               "node: only a node-agent token is bound to a node (role is " + *role_name + ")", "node");
  if (!node->empty())
    if (Status st = CheckName(*node, "node"); !st.ok()) return ErrorResponse(st, "node");
  StatusOr<int64_t> expires_in = f.Int("expires_in_s", 1, int64_t{10} * 365 * 86400, 0);
  if (!expires_in.ok()) return ErrorResponse(expires_in.status(), field);
  const NewTokenRequest request{*role, *tenant, *node, *expires_in};
  StatusOr<daemon::IssuedToken> made = token_service->Create(TokenCallerOf(c), request);
  if (!made.ok()) return ErrorResponse(made.status());
  json view = TokenView(made->record);
  view["token"] = made->secret;
  return HttpResponse::Json(201, view.dump());
}

StatusOr<ControlPlane::IssuedToken> ControlPlane::IssueAdminToken(const std::string& actor) {
  // Whoever may reach this (`serve --issue-admin-token`, with access to the store) may make one.
  const TokenCaller anyone{actor, [](Action, std::string_view, Role) { return Status::Ok(); }};
  TESSERA_ASSIGN_OR_RETURN(daemon::IssuedToken made, impl_->token_service->Create(anyone, {.role = Role::kAdmin}));
  return IssuedToken{made.record.id, std::move(made.secret)};
}

HttpResponse ControlPlane::Impl::ListTokens(const HttpRequest&, const Caller& c) {
  const ParentOf parents = Parents();
  json list = json::array();
  for (const store::TokenRecord& t : token_service->List([&](const store::TokenRecord& t) {
         return c.principal.role == Role::kAdmin || (!t.tenant.empty() && InSubtree(t.tenant, c.principal.tenant, parents));
       }))
    list.push_back(TokenView(t));
  return HttpResponse::Json(200, json{{"tokens", list}}.dump());
}

HttpResponse ControlPlane::Impl::RevokeToken(const HttpRequest& r, const Caller& c) {
  StatusOr<store::TokenRecord> revoked = token_service->Revoke(TokenCallerOf(c), r.path_params.at("id"));
  if (!revoked.ok()) return ErrorResponse(revoked.status());
  return HttpResponse::Json(200, TokenView(*revoked).dump());
}

}  // namespace tessera::daemon
