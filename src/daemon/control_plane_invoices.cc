// Invoices: GET /v1/invoices?period=YYYY-MM[&tenant=T][&format=csv], decoded and rendered here;
// what a caller sees of the ledger billed with the price plan given at start (`--price-plan`,
// `price_plan:`) is InvoiceService's (src/daemon/invoice_service.h). Another tenant is 404, node
// agents 403, no price plan 404 no_price_plan. A plan without prices for a GPU model of the cluster
// (its nodes' and its ledger's) fails the start (CheckPlanCoversCluster); a node of another model
// that registers later makes the invoices 409 price_plan_incomplete until the plan has it. SLA
// credit rules apply to the SLA observations the control plane recorded (ReadLedger:
// control_plane_anomalies.cc, per month the worst hour's guaranteed_wait_p99_s of each tenant).
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
      for (int g = 0; g < n.spec.gpu_count; ++g)
        where.try_emplace(std::string(catalog.info(placement::GpuModelOf(n.spec, g)).name), "node " + name);
  }
  usage_service->Peek([&](const metering::Ledger& ledger) {
    for (const metering::SourceKey& k : ledger.sources()) where.try_emplace(k.model, "usage of node " + k.node);
  });
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

StatusOr<LedgerSlice> ControlPlane::Impl::ReadLedger(const metering::Period& period) {
  LedgerSlice out;
  TESSERA_RETURN_IF_ERROR(usage_service->Read([&](const metering::Ledger& ledger) {
    out.sources = ledger.sources();
    const std::vector<metering::HourlyRecord> all = ledger.Records();
    out.observed_start = metering::ObservedSpan(all).first;
    out.observed_any = !all.empty();
    for (const metering::HourlyRecord& h : all)
      if (h.hour >= period.start && h.hour < period.end) out.records.push_back(h);
  }));
  TESSERA_ASSIGN_OR_RETURN(out.sla, SlaObservationsOf(period));
  return out;
}

HttpResponse ControlPlane::Impl::GetInvoices(const HttpRequest& r, const Caller& c) {
  auto param = [&](const char* key) {
    auto it = r.query.find(key);
    return it == r.query.end() ? std::string() : it->second;
  };
  const ReadCaller caller = ReadCallerOf(c);
  const InvoiceRequest request{param("tenant"), param("period")};
  if (Status st = invoice_service->CheckTenant(caller, request.tenant); !st.ok()) return ErrorResponse(st);
  const std::string format = param("format");
  if (!format.empty() && format != "json" && format != "csv")
    return HttpResponse::Error(400, "invalid_argument", "format: json (default) or csv, got '" + format + "'",
                               "format");
  StatusOr<metering::InvoiceRun> run = invoice_service->Run(caller, request);
  if (!run.ok()) {
    const std::string message(run.status().message());
    if (run.status().code() == StatusCode::kUnimplemented) return HttpResponse::Error(404, "no_price_plan", message);
    if (run.status().code() == StatusCode::kFailedPrecondition)
      return HttpResponse::Error(409, "price_plan_incomplete", message);
    const bool bad_period = run.status().code() == StatusCode::kInvalidArgument && message.starts_with("period:");
    return ErrorResponse(run.status(), bad_period ? "period" : "");
  }
  if (format == "csv") {
    HttpResponse resp;
    resp.content_type = "text/csv; charset=utf-8";
    resp.body = metering::RenderInvoicesCsv(*run);
    return resp;
  }
  return HttpResponse::Json(200, metering::RenderInvoicesJson(*run));
}

}  // namespace tessera::daemon
