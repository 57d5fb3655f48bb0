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
//
// What happened only: idle capacity and reservations are billed for the hours from the first
// usage sample the control plane stored (the ledger's first hour) to the start of the current
// hour, so the current month is billed so far and a month before the cluster reported anything
// bills no capacity; such a run says "complete": false with the observed span. Reservations of
// the plan name tenants: only those of tenants in the store are billed (the others are listed in
// the run's notes, which an admin sees). A plan without prices for a GPU model of the cluster (its
// nodes' and its ledger's) fails the start (CheckPlanCoversCluster); a node of another model that
// registers later makes the invoices 409 price_plan_incomplete until the plan has it.
#include <fstream>
#include <map>
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

Status ControlPlane::Impl::CheckPlanCoversCluster() {
  if (!price_plan) return Status::Ok();
  std::map<std::string, std::string> where;  // model -> the first node (or "usage") seen with it
  {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& [name, n] : nodes)
      if (n.spec.gpu_count > 0) where.try_emplace(std::string(catalog.info(n.spec.model).name), "node " + name);
  }
  {
    std::lock_guard<std::mutex> lock(usage_mu);
    for (const metering::SourceKey& k : ledger.sources()) where.try_emplace(k.model, "usage of node " + k.node);
  }
  std::vector<std::string> models;
  for (const auto& [model, w] : where) models.push_back(model);
  const std::vector<std::string> missing = metering::UnpricedModels(*price_plan, models);
  if (missing.empty()) return Status::Ok();
  std::string msg = "price plan " + opt.price_plan + ": no prices for " +
                    (missing.size() == 1 ? "a GPU model" : std::to_string(missing.size()) + " GPU models") +
                    " of the cluster:";
  for (const std::string& model : missing)
    msg += "\n  prices." + model + ": missing (" + where[model] + " has " + model + "; give gpu_hour or tiers)";
  return InvalidArgumentError(msg);
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
  if (auto denied = Scope(c, tenant, "tenant '" + tenant + "'")) return *denied;
  if (!tenant.empty() && !parents(tenant)) return NotFound("tenant '" + tenant + "'");
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
  metering::InvoiceOptions options;
  bool observed_any = false;
  {
    std::lock_guard<std::mutex> lock(usage_mu);
    if (ledger_stale) {
      if (Status st = RebuildLedger(false); !st.ok()) return ErrorResponse(st);
    }
    sources = ledger.sources();
    const std::vector<metering::HourlyRecord> all = ledger.Records();
    options.observed_start = metering::ObservedSpan(all).first;
    observed_any = !all.empty();
    for (const metering::HourlyRecord& h : all)
      if (h.hour >= period.start && h.hour < period.end) records.push_back(h);
  }
  // Observed until the start of the current hour; nothing at all before the first sample.
  options.observed_end =
      observed_any ? metering::HourOf(NowMs() / 1000) * metering::kSecondsPerHour : options.observed_start;
  options.tenant_exists = [&parents](const std::string& t) { return static_cast<bool>(parents(t)); };
  StatusOr<metering::InvoiceRun> run =
      metering::ComputeInvoices(sources, records, {}, *price_plan, period, catalog, options);
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
