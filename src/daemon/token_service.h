// API tokens without HTTP: the control plane's token cache (by hash) and what callers do with
// tokens (create, list, revoke, authenticate), each taking a typed request and the caller's
// identity and returning StatusOr of a typed value. The HTTP handlers (control_plane_tenants.cc)
// are decode -> service call -> encode; tests/daemon/token_service_test.cc drives it directly.
//
// Authorisation is the caller's `Check` (the route wrapper's one helper, Impl::Check, bound to the
// caller): OK, NOT_FOUND (another subtree's) or PERMISSION_DENIED. Writes go through `Transact`
// (the control plane's: metrics, event-feed wake-up) and write the token, its object event and
// its audit record in one transaction; the cache changes only once that is durable.
//
// Worked example (an admin makes a tenant-user token for "ml", the tenant-admin of ml revokes it):
//   Create({.role = kTenantUser, .tenant = "ml"}, admin)  -> {record tok_3f.., secret "tsr_..."}
//   Authenticate("tsr_...")                               -> record (role tenant-user, tenant ml)
//   Revoke("tok_3f..", ml_admin)                          -> record with revoked = true
//   Authenticate("tsr_...")                               -> UNAUTHENTICATED "unknown or revoked token"
// Revoking the last admin token that never expires is FAILED_PRECONDITION (no one could
// administer the control plane once the others expired).
//
// Thread-safety: all methods may be called from any thread. Locks: change_mu_ (creates and
// revokes, one at a time, so that two revokes cannot each leave the other's token as the one that
// remains) is taken before cache_mu_ (shared for reads).
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "src/daemon/authz.h"
#include "tessera/core/clock.h"
#include "tessera/core/status.h"
#include "tessera/store/store.h"

namespace tessera::daemon {

struct TokenCaller {
  std::string actor;  // for the audit record: the caller's token id, "bootstrap", ...
  // OK, NOT_FOUND or PERMISSION_DENIED for `action` on `tenant` (new_token_role: kCreateToken's).
  std::function<Status(Action action, std::string_view tenant, Role new_token_role)> check;
};

// POST /v1/tokens, decoded: role and its binding already consistent (a tenant for tenant roles
// only, a node for node-agent only).
struct NewTokenRequest {
  Role role = Role::kTenantUser;
  std::string tenant;
  std::string node;
  int64_t expires_in_s = 0;  // 0: never
};

struct IssuedToken {
  store::TokenRecord record;
  std::string secret;  // shown once
};

class TokenService {
 public:
  using TransactFn = std::function<Status(std::string_view operation, const std::function<Status(store::Transaction&)>& fn)>;
  // `tenant_guard(tenant, write)` runs `write` while `tenant` surely exists (NOT_FOUND otherwise).
  using TenantGuard = std::function<Status(std::string_view tenant, const std::function<Status()>& write)>;
  TokenService(TransactFn transact, const Clock& clock, TenantGuard tenant_guard);

  // Replaces the cache with what the store holds (at start).
  void Load(const std::vector<store::TokenRecord>& all);
  // The live record of a presented secret: UNAUTHENTICATED when unknown, revoked or expired.
  StatusOr<store::TokenRecord> Authenticate(std::string_view secret) const;
  // Whether the token of `hash` is still usable (an open event stream asks).
  bool StillValid(const std::string& hash) const;

  StatusOr<IssuedToken> Create(const TokenCaller& caller, const NewTokenRequest& request);
  // The tokens `visible` keeps, by id.
  std::vector<store::TokenRecord> List(const std::function<bool(const store::TokenRecord&)>& visible) const;
  // NOT_FOUND for an unknown id or one the caller may not see; the revoked record.
  StatusOr<store::TokenRecord> Revoke(const TokenCaller& caller, const std::string& id);

 private:
  // revoke_ms: the revoke's instant (the tokens usable then are those that remain).
  std::string WhyAdminTokenMustStay(const std::string& id, int64_t revoke_ms) const;  // cache_mu_ taken

  const TransactFn transact_;
  const Clock& clock_;  // outlives the service
  const TenantGuard tenant_guard_;
  std::mutex change_mu_;
  mutable std::shared_mutex cache_mu_;
  std::unordered_map<std::string, store::TokenRecord> by_hash_;
};

}  // namespace tessera::daemon
