// Tenants without HTTP: the control plane's tenant map (and the parent map authorisation reads)
// and what callers do with tenants (create, list, get, update, delete), each taking a typed
// request and the caller's identity and returning StatusOr of a typed value. The HTTP handlers
// (control_plane_tenants.cc) are decode -> service call -> encode;
// tests/daemon/tenant_service_test.cc drives it directly.
//
// A tenant change is a change of the scheduler's tenant tree: the new map must make a valid tree
// (BuildTenantTree) that the scheduler takes (TenantWorld::set_tree); then the record, its object
// event ("tenant.created", "tenant.updated", "tenant.deleted") and its audit record are written
// in one transaction through `Transact`. If the store refuses, the scheduler gets the old tree
// back and the map is unchanged. Authorisation is the caller's `check` (Impl::Check bound to the
// caller): OK, NOT_FOUND ("<what> not found": another subtree's) or PERMISSION_DENIED.
//
// Errors name the field: INVALID_ARGUMENT "parent: unknown tenant 'x'" with *bad_field "parent";
// a quota the tree refuses with *bad_field "quota"; an Idempotency-Key used before for another
// tenant is FAILED_PRECONDITION with *bad_field "Idempotency-Key" (the HTTP layer's 422).
//
// Worked example (an admin makes "ml" and "ml-a" under it; a tenant-admin of ml changes ml-a):
//   Create(admin, {.body = {.name = "ml"}})                          -> ml (a root), event "tenant.created"
//   Create(admin, {.body = {.name = "ml-a", .parent = "ml"}, .idempotency_key = "k1"})
//                                                                    -> ml-a; again with "k1": replay of it
//   Update(ml_admin, "ml-a", {.default_qos = "Guaranteed"})          -> ml-a, default_qos Guaranteed
//   List(visible to ml's subtree)                                    -> [ml, ml-a]
//   Delete(admin, "ml")                                              -> FAILED_PRECONDITION "has sub-tenants"
//   Delete(admin, "ml-a"), then Get(admin, "ml-a")                   -> NOT_FOUND "tenant 'ml-a' not found"
//
// Thread-safety: all methods may be called from any thread. Locks: the world lock (TenantWorld::
// mu, the control plane's `mu`: the scheduler's) guards the tenant map and is held for every
// change, so a change and the scheduler's tree move together; parents_mu_ (shared) guards the
// parent map and is taken after the world lock (authorisation reads it without the world lock).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "src/daemon/api_codec.h"
#include "src/daemon/authz.h"
#include "tessera/core/gpu_model.h"
#include "tessera/core/clock.h"
#include "tessera/core/status.h"
#include "tessera/sched/tenant.h"
#include "tessera/store/store.h"

namespace tessera::daemon {

struct TenantCaller {
  std::string actor;  // for the audit record and idempotency keys: the caller's token id
  // OK, NOT_FOUND ("<what> not found") or PERMISSION_DENIED for `action` on `tenant`.
  std::function<Status(Action action, std::string_view tenant, std::string_view what)> check;
};

// What the tenant map needs of the world it lives in (the control plane's scheduler).
struct TenantWorld {
  std::mutex* mu = nullptr;  // the world lock; every callback below is called with it held
  // The scheduler takes a new tenant tree (an error refuses the change, naming the quota).
  std::function<Status(sched::TenantTree tree)> set_tree;
  // A change is durable and applied: gauges, wake the scheduling loop.
  std::function<void()> changed;
  // The subtree's allocation now by resource dimension ("gpu_milli": 4000, ...); nullopt: unknown.
  std::function<std::optional<std::map<std::string, int64_t>>(std::string_view tenant)> usage;
  // The scheduler's weighted dominant share of the tenant's subtree (nullopt: unknown).
  std::function<std::optional<double>(std::string_view tenant)> dominant_share;
};

// Where a tenant stands in the scheduler's fair share among its siblings (the tenants with the same
// parent; the roots are siblings): the weighted dominant share of its subtree, and its rank by it,
// lowest first — rank 1 is the one the scheduler serves next when siblings compete (weighted DRF,
// docs/multitenancy.md). Worked example: siblings vision (0.10), speech (0.40), ads (0.10) ->
// ads 1 of 3, vision 2 of 3 (a tie goes by name), speech 3 of 3.
struct FairShare {
  double dominant_share = 0;
  int rank = 0;
  int of = 0;
};

// POST /v1/tenants, decoded (body.name set; an absent parent is a root).
struct NewTenantRequest {
  TenantBody body;
  std::string idempotency_key;  // "" for none; checked by CheckIdempotencyKey
};

// A first answer stored for an Idempotency-Key, replayed as it is.
struct ReplayedAnswer {
  int status_code = 0;
  std::string body;
};

struct CreatedTenant {
  store::TenantRecord record;
  std::optional<ReplayedAnswer> replay;  // set: a retry; `record` is then empty
};

struct TenantInfo {
  store::TenantRecord record;
  std::optional<std::map<std::string, int64_t>> usage;  // TenantWorld::usage
};

// An Idempotency-Key header's value: "" or 1..255 printable ASCII characters without spaces
// (INVALID_ARGUMENT "Idempotency-Key: ..." otherwise).
Status CheckIdempotencyKey(std::string_view key);

class TenantService {
 public:
  using TransactFn = std::function<Status(std::string_view operation, const std::function<Status(store::Transaction&)>& fn)>;
  TenantService(TransactFn transact, const Clock& clock, TenantWorld world, const GpuModelCatalog& catalog);

  // Replaces the map with the stored tenants and returns their tree (at start and restore).
  // World lock held.
  StatusOr<sched::TenantTree> Load(std::vector<store::TenantRecord> all);
  // The map (world lock held): the submit path and the gauges read it.
  const std::map<std::string, store::TenantRecord>& tenants_locked() const { return tenants_; }
  // Runs `write` while `tenant` surely exists (NOT_FOUND otherwise): TokenService's guard.
  Status WhileExists(std::string_view tenant, const std::function<Status()>& write);
  // Each tenant's parent, without the world lock (authorisation).
  ParentOf Parents() const;

  StatusOr<CreatedTenant> Create(const TenantCaller& caller, const NewTenantRequest& request,
                                 std::string* bad_field = nullptr);
  // The tenants `visible` keeps, by name.
  std::vector<store::TenantRecord> List(const std::function<bool(std::string_view name)>& visible) const;
  StatusOr<TenantInfo> Get(const TenantCaller& caller, const std::string& name) const;
  // The fair-share position (above) of each of `names` the scheduler knows.
  std::map<std::string, FairShare> FairShares(const std::vector<std::string>& names) const;
  // PATCH: the fields `change` holds (its name is not used); moving a tenant is also creating
  // one below its new parent (kCreateTenant there).
  StatusOr<store::TenantRecord> Update(const TenantCaller& caller, const std::string& name, const TenantBody& change,
                                       std::string* bad_field = nullptr);
  // FAILED_PRECONDITION while it has sub-tenants, tokens or workloads (the message says which).
  Status Delete(const TenantCaller& caller, const std::string& name);

 private:
  // The change both create, update and delete make (see the header comment). World lock held.
  Status Apply(std::map<std::string, store::TenantRecord> next, const TenantCaller& caller, std::string_view action,
               const std::string& name, int ok_code, const std::function<Status(store::Transaction&)>& write,
               std::string* bad_field);
  void RefreshParents();  // world lock held

  const TransactFn transact_;
  const Clock& clock_;  // outlives the service
  const TenantWorld world_;
  const GpuModelCatalog& catalog_;
  std::map<std::string, store::TenantRecord> tenants_;  // world_.mu
  mutable std::shared_mutex parents_mu_;
  std::map<std::string, std::string> parent_of_;  // tenant -> parent ("" for a root)
};

}  // namespace tessera::daemon
