#include "src/daemon/audit_service.h"

#include <utility>

namespace tessera::daemon {

AuditService::AuditService(TransactFn transact) : transact_(std::move(transact)) {}

StatusOr<std::vector<store::AuditRecord>> AuditService::List(const ReadCaller& caller, const AuditQuery& query) {
  TESSERA_RETURN_IF_ERROR(caller.check(Action::kReadAudit, "", "the audit log"));
  std::vector<store::AuditRecord> records;
  const Status read = transact_("read", [&](store::Transaction& tx) -> Status {
    TESSERA_ASSIGN_OR_RETURN(records, tx.ListAudit(query.after, query.limit));
    return Status::Ok();
  });
  if (!read.ok()) return read;
  return records;
}

}  // namespace tessera::daemon
