// Invoices without HTTP: the price plan given at start and what a caller may see of the metering
// ledger billed with it (GET /v1/invoices, control_plane_invoices.cc: decode -> InvoiceService ->
// render). tests/daemon/invoice_service_test.cc drives it directly.
//
// The pricing is the metering module's alone (metering::ComputeInvoices, the same call as
// `tessera bill`), over every account of the ledger: idle capacity shared among tenants, tiers and
// pool rounding depend on all of them, so a tenant's invoice is the same in every view. What a
// caller sees of that run:
//   admin, no tenant        the whole run (metered_total_micro: the cluster's, operator included)
//   admin, tenant=T         the invoices of T's subtree; metered total and chargeback of those
//   tenant-admin/-user      the invoices of its subtree (or of tenant=T inside it); likewise
// so a tenant never learns the cluster's total, the operator account's or another tenant's
// amounts (metering::RestrictToAccounts). The plan's SLA credit rules apply to the period's SLA
// observations the ledger read gives (LedgerSlice::sla: in the control plane, each tenant's worst
// hour of guaranteed_wait_p99_s in the month, src/daemon/anomaly_service.h).
//
// What happened only: idle capacity and reservations are billed for the hours from the ledger's
// first hour to the start of the current hour, so the current month is billed so far and a month
// before the cluster reported anything bills no capacity ("complete": false with the observed
// span). Reservations of the plan name tenants: only those of existing tenants are billed.
//
// Errors: NOT_FOUND "tenant 'x' not found" (unknown, or another subtree's), PERMISSION_DENIED
// (the caller's check), INVALID_ARGUMENT "period: ..." (the field is `period`), UNIMPLEMENTED when
// no price plan is configured (the API's 404 no_price_plan), FAILED_PRECONDITION when the plan
// lacks prices the period's usage needs (409 price_plan_incomplete; to a tenant's token the
// message says only that, since the list names models other tenants use).
//
// Worked example (plan: A100-80GB at 2.40/GPU-hour, idle to "operator"; vision used one GPU for
// the hour 2026-11-01T00, nothing else ran; the clock is 2026-11-01T05:10Z):
//   Run(admin, {})                            -> period 2026-11, observed 00:00..05:00, invoices
//                                                [operator 4 h idle, vision 1 h], complete false
//   Run(vision's tenant-user, {})             -> invoices [vision] only, metered total = vision's
//   Run(vision's tenant-user, {"other"})      -> NOT_FOUND "tenant 'other' not found"
//   Run(admin, {.period = "2026-11-01..02"})  -> INVALID_ARGUMENT "period: expected a calendar month ..."
//
// Thread-safety: all methods may be called from any thread; the plan never changes after
// construction, and the ledger is read through `read_ledger` (UsageService::Read, under its lock).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "src/daemon/authz.h"
#include "tessera/core/gpu_model.h"
#include "tessera/core/clock.h"
#include "tessera/core/status.h"
#include "tessera/metering/civil_time.h"
#include "tessera/metering/invoice.h"
#include "tessera/metering/ledger.h"
#include "tessera/metering/ledger_file.h"
#include "tessera/metering/price_plan.h"

namespace tessera::daemon {

// GET /v1/invoices, its query decoded.
struct InvoiceRequest {
  std::string tenant;  // "": the caller's view (the whole run for an admin)
  std::string period;  // "YYYY-MM"; "": the month now is in (UTC)
};

// What the ledger holds for a period (copied under its lock).
struct LedgerSlice {
  std::vector<metering::SourceKey> sources;
  std::vector<metering::HourlyRecord> records;  // those of the period
  int64_t observed_start = 0;  // metering::ObservedSpan of all records (any period)
  bool observed_any = false;   // any record at all
  std::vector<metering::SlaObservation> sla;  // the period's (period = its name), for SLA credits
};

class InvoiceService {
 public:
  // `plan` (nullptr: none configured) and `catalog` outlive the service; `plan_path` names it in
  // messages.
  InvoiceService(const metering::PricePlan* plan, std::string plan_path, const GpuModelCatalog& catalog,
                 const Clock& clock, ParentOf parents,
                 std::function<StatusOr<LedgerSlice>(const metering::Period& period)> read_ledger);

  // The caller's check of `tenant` ("" allowed: the caller's own view) and that it exists.
  Status CheckTenant(const ReadCaller& caller, const std::string& tenant) const;
  // The run the caller may see (see above).
  StatusOr<metering::InvoiceRun> Run(const ReadCaller& caller, const InvoiceRequest& request) const;

 private:
  const metering::PricePlan* const plan_;
  const std::string plan_path_;
  const GpuModelCatalog& catalog_;
  const Clock& clock_;  // outlives the service
  const ParentOf parents_;
  const std::function<StatusOr<LedgerSlice>(const metering::Period&)> read_ledger_;
};

}  // namespace tessera::daemon
