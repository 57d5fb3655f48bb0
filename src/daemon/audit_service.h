// The audit log without HTTP: GET /v1/audit?after=&limit= (control_plane.cc: decode ->
// AuditService::List -> render) reads the store's hash-chained audit records (every
// state-changing call's, and the refused ones': see AuditActionOf in control_plane.cc) in order.
// tests/daemon/audit_service_test.cc drives it directly against a real store.
//
// Who may read it: admins only (Action::kReadAudit through the caller's check: any other role is
// PERMISSION_DENIED "this token's role may not read the audit log (admins only)").
//
// Worked example (three records stored, seq 1..3):
//   List(admin, {})                        -> records 1, 2, 3
//   List(admin, {.after = 1, .limit = 1})  -> record 2 (the next page starts after its seq)
//   List(tenant_admin, {})                 -> PERMISSION_DENIED
//
// Thread-safety: all methods may be called from any thread (no state of its own).
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "src/daemon/authz.h"
#include "tessera/core/status.h"
#include "tessera/store/store.h"

namespace tessera::daemon {

// GET /v1/audit's query, decoded (ParseReadQuery: each a whole number; limit 1..1000).
struct AuditQuery {
  int64_t after = 0;  // records with seq > after
  int limit = 100;
};

class AuditService {
 public:
  using TransactFn = std::function<Status(std::string_view operation, const std::function<Status(store::Transaction&)>& fn)>;
  explicit AuditService(TransactFn transact);

  // Up to query.limit records with seq > query.after, by seq.
  StatusOr<std::vector<store::AuditRecord>> List(const ReadCaller& caller, const AuditQuery& query);

 private:
  const TransactFn transact_;
};

}  // namespace tessera::daemon
