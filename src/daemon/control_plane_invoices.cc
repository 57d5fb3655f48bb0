// Invoices: GET /v1/invoices?period=YYYY-MM[&tenant=T][&format=csv], the metering ledger (the
// stored usage samples) billed with the price plan given at start (`--price-plan`, `price_plan:`).
//
// The pricing is the metering module's alone (metering::ComputeInvoices, the same call as
// `tessera bill`), over every account of the ledger: idle capacity shared among tenants, tiers and
// pool rounding depend on all of them, so a tenant's invoice is the same in every view. What a
// caller sees of that run:
//   admin, no tenant        the whole run (metered_total_micro: the cluster's, operator included)
//   admin, tenant=T         the invoices of T's subtree; metered total and chargeback of those
//   tenant-admin/-user      the invoices of its subtree (or of tenant=T inside it); likewise
// so a tenant never learns the cluster's total, the operator account's or another tenant's
// amounts (metering::RestrictToAccounts). Another tenant is 404, node agents 403, no price plan
// 404 no_price_plan. The control plane holds no SLA observations: SLA credit rules never apply.
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>  // control_plane_impl.h uses it

#include "src/daemon/control_plane_impl.h"
#include "tessera/metering/civil_time.h"
#include "tessera/metering/invoice.h"
#include "tessera/metering/invoice_render.h"

namespace tessera::daemon {

StatusOr<std::optional<metering::PricePlan>> LoadPricePlan(const std::string& path, const GpuModelCatalog& catalog) {
  if (path.empty()) return std::optional<metering::PricePlan>();
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgumentError("price plan: cannot read '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  TESSERA_ASSIGN_OR_RETURN(metering::PricePlan plan, metering::ParsePricePlanYaml(text.str(), path, catalog));
  return std::optional<metering::PricePlan>(std::move(plan));
}

Status CheckPricePlan(const std::string& path) {
  return LoadPricePlan(path, GpuModelCatalog::Builtin()).status();
}

namespace {

// "2026-11" -> the calendar month (UTC); anything else (day ranges included) INVALID_ARGUMENT.
StatusOr<metering::Period> MonthPeriod(const std::string& text) {
  StatusOr<metering::Period> p = metering::ParsePeriod(text);
  if (text.size() != 7 || !p.ok())
    return InvalidArgumentError("period: expected a calendar month YYYY-MM (e.g. 2026-11), got '" + text + "'");
  return p;
}

}  // namespace

HttpResponse ControlPlane::Impl::GetInvoices(const HttpRequest& r, const Caller& c) {
  auto param = [&](const char* key) {
    auto it = r.query.find(key);
    return it == r.query.end() ? std::string() : it->second;
  };
  const std::string tenant = param("tenant");
  const ParentOf parents = Parents();
  const Decision d = Authorize(c.principal, Action::kReadInvoices, tenant, parents);
  if (d == Decision::kForbidden) return HttpResponse::Error(403, "forbidden", "this token's role may not read invoices");
  if (d == Decision::kNotFound || (!tenant.empty() && !parents(tenant))) return NotFound("tenant '" + tenant + "'");
  const std::string format = param("format");
  if (!format.empty() && format != "json" && format != "csv")
    return HttpResponse::Error(400, "invalid_argument", "format: json (default) or csv, got '" + format + "'",
                               "format");
  // Without a period: the month now is in (UTC, the control plane's clock).
  metering::Period period = metering::MonthOf(NowMs() / 1000);
  if (const std::string text = param("period"); !text.empty()) {
    StatusOr<metering::Period> p = MonthPeriod(text);
    if (!p.ok()) return ErrorResponse(p.status(), "period");
    period = *p;
  }
  if (!price_plan)
    return HttpResponse::Error(404, "no_price_plan",
                               "no price plan is configured: start tessera serve with --price-plan FILE "
                               "(or price_plan: in its config file)");
  // The period's records, copied under usage_mu; the run is priced without holding it.
  std::vector<metering::SourceKey> sources;
  std::vector<metering::HourlyRecord> records;
  {
    std::lock_guard<std::mutex> lock(usage_mu);
    if (ledger_stale) {
      if (Status st = RebuildLedger(false); !st.ok()) return ErrorResponse(st);
    }
    sources = ledger.sources();
    for (const metering::HourlyRecord& h : ledger.Records())
      if (h.hour >= period.start && h.hour < period.end) records.push_back(h);
  }
  StatusOr<metering::InvoiceRun> run = metering::ComputeInvoices(sources, records, {}, *price_plan, period, catalog);
  const bool tenant_role = c.principal.role == Role::kTenantAdmin || c.principal.role == Role::kTenantUser;
  if (!run.ok()) {
    // The plan lacks prices the usage needs: the operator's to fix. Its list names models other
    // tenants use, so a tenant's token gets the fact only.
    return HttpResponse::Error(409, "price_plan_incomplete",
                               tenant_role ? "the price plan cannot bill this period's usage; ask an admin"
                                           : opt.price_plan + ": " + std::string(run.status().message()));
  }
  const std::string root = !tenant.empty() ? tenant : tenant_role ? c.principal.tenant : "";
  metering::InvoiceRun view =
      root.empty() ? std::move(*run)
                   : metering::RestrictToAccounts(std::move(*run), [&](const std::string& account) {
                       return InSubtree(account, root, parents);
                     });
  if (format == "csv") {
    HttpResponse resp;
    resp.content_type = "text/csv; charset=utf-8";
    resp.body = metering::RenderInvoicesCsv(view);
    return resp;
  }
  return HttpResponse::Json(200, metering::RenderInvoicesJson(view));
}

}  // namespace tessera::daemon
