#include "src/daemon/token_service.h"

#include <algorithm>
#include <optional>

#include "src/daemon/tokens.h"

namespace tessera::daemon {

namespace {

// The event feed's "token.created" for `rec`, scoped to its tenant ("" for admin and node-agent
// tokens: admins only). Never the secret.
store::ObjectEvent TokenCreatedEvent(const store::TokenRecord& rec) {
  std::string detail = "role " + rec.role;
  if (!rec.node.empty()) detail += ", node '" + rec.node + "'";
  return {"token", rec.id, rec.tenant, rec.created_ms, "token.created", detail};
}

}  // namespace

TokenService::TokenService(TransactFn transact, const Clock& clock, TenantGuard tenant_guard)
    : transact_(std::move(transact)), clock_(clock), tenant_guard_(std::move(tenant_guard)) {}

void TokenService::Load(const std::vector<store::TokenRecord>& all) {
  std::unique_lock<std::shared_mutex> lock(cache_mu_);
  by_hash_.clear();
  for (const store::TokenRecord& t : all) by_hash_[t.hash_hex] = t;
}

StatusOr<store::TokenRecord> TokenService::Authenticate(std::string_view secret) const {
  const std::string hash = TokenHash(secret);
  std::shared_lock<std::shared_mutex> lock(cache_mu_);
  auto it = by_hash_.find(hash);
  // The map lookup found a candidate by hash; the comparison that decides is constant time.
  if (it == by_hash_.end() || !TokenHashesEqual(it->second.hash_hex, hash) || it->second.revoked)
    return Status(StatusCode::kUnauthenticated, "unknown or revoked token");
  if (it->second.expires_ms && *it->second.expires_ms <= UnixMillis(clock_))
    return Status(StatusCode::kUnauthenticated, "the token has expired");
  return it->second;
}

bool TokenService::StillValid(const std::string& hash) const {
  std::shared_lock<std::shared_mutex> lock(cache_mu_);
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end() || it->second.revoked) return false;
  return !(it->second.expires_ms && *it->second.expires_ms <= UnixMillis(clock_));
}

StatusOr<IssuedToken> TokenService::Create(const TokenCaller& caller, const NewTokenRequest& req) {
  TESSERA_RETURN_IF_ERROR(caller.check(Action::kCreateToken, req.tenant, req.role));
  const int64_t now = UnixMillis(clock_);
  IssuedToken out;
  TESSERA_ASSIGN_OR_RETURN(out.secret, NewToken());
  store::TokenRecord& rec = out.record;
  rec.hash_hex = TokenHash(out.secret);
  rec.id = "tok_" + rec.hash_hex.substr(0, 16);  // the hash's first 16 hex digits
  rec.role = std::string(RoleName(req.role));
  rec.tenant = req.tenant;
  rec.node = req.node;
  if (req.expires_in_s > 0) rec.expires_ms = now + req.expires_in_s * 1000;
  rec.created_ms = now;
  std::lock_guard<std::mutex> change(change_mu_);
  const auto write = [&]() -> Status {
    return transact_("token", [&](store::Transaction& tx) -> Status {
      TESSERA_RETURN_IF_ERROR(tx.CreateToken(rec));
      TESSERA_RETURN_IF_ERROR(tx.AppendObjectEvent(TokenCreatedEvent(rec)).status());
      return tx.AppendAudit({now, caller.actor, "token.create", "tokens/" + rec.id, "201"}).status();
    });
  };
  // A tenant's token is written while the tenant surely exists (it cannot be deleted meanwhile).
  TESSERA_RETURN_IF_ERROR(req.tenant.empty() ? write() : tenant_guard_(req.tenant, write));
  std::unique_lock<std::shared_mutex> lock(cache_mu_);
  by_hash_[rec.hash_hex] = rec;
  return out;
}

std::vector<store::TokenRecord> TokenService::List(const std::function<bool(const store::TokenRecord&)>& visible) const {
  std::vector<store::TokenRecord> out;
  {
    std::shared_lock<std::shared_mutex> lock(cache_mu_);
    for (const auto& [hash, t] : by_hash_)
      if (visible(t)) out.push_back(t);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  return out;
}

std::string TokenService::WhyAdminTokenMustStay(const std::string& id, int64_t revoke_ms) const {
  auto usable = [revoke_ms](const store::TokenRecord& t) {
    return !t.revoked && (!t.expires_ms || *t.expires_ms > revoke_ms);
  };
  bool target_is_live_admin = false;
  for (const auto& [hash, t] : by_hash_) {
    if (t.role != "admin" || !usable(t)) continue;
    if (t.id == id) {
      target_is_live_admin = true;
    } else if (!t.expires_ms) {
      return "";  // another admin token that never expires remains
    }
  }
  if (!target_is_live_admin) return "";
  return "no other admin token that never expires would remain, and once the rest expired no one could "
         "administer the control plane; create another admin token without expires_in_s first (or, with "
         "access to the store, `tessera serve --issue-admin-token FILE`)";
}

StatusOr<store::TokenRecord> TokenService::Revoke(const TokenCaller& caller, const std::string& id) {
  std::lock_guard<std::mutex> change(change_mu_);  // the check and the revoke are one step
  std::optional<store::TokenRecord> found;
  std::string why;
  const int64_t now = UnixMillis(clock_);
  {
    std::shared_lock<std::shared_mutex> lock(cache_mu_);
    for (const auto& [hash, t] : by_hash_)
      if (t.id == id) found = t;
    if (found) why = WhyAdminTokenMustStay(id, now);
  }
  if (!found) return NotFoundError("token '" + id + "' not found");
  if (Status st = caller.check(Action::kRevokeToken, found->tenant, Role::kTenantUser); !st.ok()) {
    // Tokens without a tenant (admin, node-agent) are in nobody's subtree: the admins' to revoke.
    if (found->tenant.empty() || st.code() == StatusCode::kNotFound) return NotFoundError("token '" + id + "' not found");
    return st;
  }
  if (!why.empty()) return FailedPreconditionError("token '" + id + "': not revoked: " + why);
  const Status written = transact_("token", [&](store::Transaction& tx) -> Status {
    TESSERA_RETURN_IF_ERROR(tx.RevokeToken(id));
    TESSERA_RETURN_IF_ERROR(tx.AppendObjectEvent({"token", id, found->tenant, now, "token.revoked", ""}).status());
    return tx.AppendAudit({now, caller.actor, "token.revoke", "tokens/" + id, "200"}).status();
  });
  if (!written.ok()) return written;
  std::unique_lock<std::shared_mutex> lock(cache_mu_);
  by_hash_[found->hash_hex].revoked = true;
  found->revoked = true;
  return *found;
}

}  // namespace tessera::daemon
