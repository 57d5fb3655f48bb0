// /v1/tenants and /v1/tokens.
#include <optional>
#include <utility>
#include <nlohmann/json.hpp>

#include "src/daemon/api_codec.h"
#include "tessera/api/json_fields.h"
#include "src/daemon/control_plane_impl.h"
#include "src/daemon/tokens.h"

namespace tessera::daemon {

using json = nlohmann::json;

TenantCaller ControlPlane::Impl::TenantCallerOf(const Caller& c) const {
  return {c.token_id, [this, &c](Action action, std::string_view tenant, std::string_view what) {
            return Check(c, tenant, what, action);
          }};
}

namespace {

// A TenantService refusal as the API answers it: 400 naming the field, and 422 for an
// Idempotency-Key used before for another tenant (the IETF Idempotency-Key draft's answer).
HttpResponse TenantError(const Status& st, const std::string& field) {
  if (field == "Idempotency-Key" && st.code() == StatusCode::kFailedPrecondition)
    return HttpResponse::Error(422, "idempotency_key_reused", std::string(st.message()), field);
  return ErrorResponse(st, field);
}

}  // namespace

HttpResponse ControlPlane::Impl::CreateTenant(const HttpRequest& r, const Caller& c) {
  std::string field;
  StatusOr<TenantBody> b = DecodeTenantBody(r.body, /*create=*/true, catalog, &field);
  if (!b.ok()) return ErrorResponse(b.status(), field);
  StatusOr<CreatedTenant> made =
      tenant_service->Create(TenantCallerOf(c), {*std::move(b), r.Header("idempotency-key")}, &field);
  if (!made.ok()) return TenantError(made.status(), field);
  if (made->replay) {
    HttpResponse out = HttpResponse::Json(made->replay->status_code, made->replay->body);
    out.headers.push_back({"Idempotent-Replayed", "true"});
    return out;
  }
  return HttpResponse::Json(201, TenantView(made->record).dump());
}

namespace {

// {"dominant_share": 0.25, "rank": 1, "of": 3}: where the tenant stands among its siblings.
json FairShareView(const FairShare& f) { return {{"dominant_share", f.dominant_share}, {"rank", f.rank}, {"of", f.of}}; }

}  // namespace

HttpResponse ControlPlane::Impl::ListTenants(const HttpRequest&, const Caller& c) {
  const ParentOf parents = Parents();
  json list = json::array();
  const std::vector<store::TenantRecord> visible = tenant_service->List([&](std::string_view name) {
    return SeesAllTenants(c.principal) || InSubtree(name, c.principal.tenant, parents);
  });
  std::vector<std::string> names;
  for (const store::TenantRecord& t : visible) names.push_back(t.name);
  const std::map<std::string, FairShare> fair = tenant_service->FairShares(names);
  for (const store::TenantRecord& t : visible) {
    json view = TenantView(t);
    if (auto f = fair.find(t.name); f != fair.end()) view["fair_share"] = FairShareView(f->second);
    list.push_back(std::move(view));
  }
  return HttpResponse::Json(200, json{{"tenants", list}}.dump());
}

HttpResponse ControlPlane::Impl::GetTenant(const HttpRequest& r, const Caller& c) {
  StatusOr<TenantInfo> got = tenant_service->Get(TenantCallerOf(c), r.path_params.at("name"));
  if (!got.ok()) return ErrorResponse(got.status());
  json view = TenantView(got->record);
  if (got->usage) view["usage"] = *got->usage;
  const std::map<std::string, FairShare> fair = tenant_service->FairShares({got->record.name});
  if (auto f = fair.find(got->record.name); f != fair.end()) view["fair_share"] = FairShareView(f->second);
  return HttpResponse::Json(200, view.dump());
}

HttpResponse ControlPlane::Impl::PatchTenant(const HttpRequest& r, const Caller& c) {
  std::string field;
  StatusOr<TenantBody> b = DecodeTenantBody(r.body, /*create=*/false, catalog, &field);
  if (!b.ok()) return ErrorResponse(b.status(), field);
  StatusOr<store::TenantRecord> changed = tenant_service->Update(TenantCallerOf(c), r.path_params.at("name"), *b, &field);
  if (!changed.ok()) return TenantError(changed.status(), field);
  return HttpResponse::Json(200, TenantView(*changed).dump());
}

HttpResponse ControlPlane::Impl::DeleteTenant(const HttpRequest& r, const Caller& c) {
  const std::string name = r.path_params.at("name");
  if (Status st = tenant_service->Delete(TenantCallerOf(c), name); !st.ok()) return ErrorResponse(st);
  return HttpResponse::Json(200, json{{"name", name}, {"deleted", true}}.dump());
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
