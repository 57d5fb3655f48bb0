#include "src/daemon/invoice_service.h"

#include <utility>

namespace tessera::daemon {

namespace {

// "2026-11" -> the calendar month (UTC); anything else (day ranges included) INVALID_ARGUMENT.
StatusOr<metering::Period> MonthPeriod(const std::string& text) {
  StatusOr<metering::Period> p = metering::ParsePeriod(text);
  if (text.size() != 7 || !p.ok())
    return InvalidArgumentError("period: expected a calendar month YYYY-MM (e.g. 2026-11), got '" + text + "'");
  return p;
}

}  // namespace

InvoiceService::InvoiceService(const metering::PricePlan* plan, std::string plan_path, const GpuModelCatalog& catalog,
                               const Clock& clock, ParentOf parents,
                               std::function<StatusOr<LedgerSlice>(const metering::Period&)> read_ledger)
    : plan_(plan),
      plan_path_(std::move(plan_path)),
      catalog_(catalog),
      clock_(clock),
      parents_(std::move(parents)),
      read_ledger_(std::move(read_ledger)) {}

Status InvoiceService::CheckTenant(const ReadCaller& caller, const std::string& tenant) const {
  TESSERA_RETURN_IF_ERROR(caller.check(Action::kReadInvoices, tenant, "tenant '" + tenant + "'"));
  if (!tenant.empty() && !parents_(tenant)) return NotFoundError("tenant '" + tenant + "' not found");
  return Status::Ok();
}

StatusOr<metering::InvoiceRun> InvoiceService::Run(const ReadCaller& caller, const InvoiceRequest& req) const {
  TESSERA_RETURN_IF_ERROR(CheckTenant(caller, req.tenant));
  // Without a period: the month now is in (UTC, the control plane's clock).
  metering::Period period = metering::MonthOf(UnixMillis(clock_) / 1000);
  if (!req.period.empty()) {
    TESSERA_ASSIGN_OR_RETURN(period, MonthPeriod(req.period));
  }
  if (!plan_)
    return Status(StatusCode::kUnimplemented,
                  "no price plan is configured: start tessera serve with --price-plan FILE "
                  "(or price_plan: in its config file)");
  TESSERA_ASSIGN_OR_RETURN(const LedgerSlice slice, read_ledger_(period));
  metering::InvoiceOptions options;
  options.observed_start = slice.observed_start;
  // Observed until the start of the current hour; nothing at all before the first sample.
  options.observed_end = slice.observed_any
                             ? metering::HourOf(UnixMillis(clock_) / 1000) * metering::kSecondsPerHour
                             : options.observed_start;
  options.tenant_exists = [this](const std::string& t) { return static_cast<bool>(parents_(t)); };
  StatusOr<metering::InvoiceRun> run =
      metering::ComputeInvoices(slice.sources, slice.records, slice.sla, *plan_, period, catalog_, options);
  const bool tenant_role = caller.principal.role == Role::kTenantAdmin || caller.principal.role == Role::kTenantUser;
  if (!run.ok()) {
    // The plan lacks prices the usage needs: the operator's to fix. Its list names models other
    // tenants use, so a tenant's token gets the fact only.
    return FailedPreconditionError(tenant_role ? "the price plan cannot bill this period's usage; ask an admin"
                                               : plan_path_ + ": " + std::string(run.status().message()));
  }
  const std::string root = !req.tenant.empty() ? req.tenant : tenant_role ? caller.principal.tenant : "";
  if (root.empty()) return run;
  return metering::RestrictToAccounts(std::move(*run), [&](const std::string& account) {
    return InSubtree(account, root, parents_);
  });
}

}  // namespace tessera::daemon
