// Usage: POST /v1/nodes/{name}/usage (the node agent's samples) and GET /v1/usage (per-tenant
// totals and hourly records) are decode -> UsageService -> render; the service
// (src/daemon/usage_service.h) owns the metering ledger, what is stored and what a caller sees.
// Here: the usage metrics' families, counted from each stored sample.
#include <nlohmann/json.hpp>

#include "src/daemon/control_plane_impl.h"
#include "src/daemon/usage_codec.h"
#include "tessera/metering/civil_time.h"

namespace tessera::daemon {

using json = nlohmann::json;

Status ControlPlane::Impl::InitUsageMetrics() {
  TESSERA_ASSIGN_OR_RETURN(m.usage_allocated,
                           registry.AddCounter("tessera_tenant_gpu_milli_seconds_allocated_total",
                                               "Milli-GPU seconds allocated to a tenant, from stored usage samples.",
                                               {"tenant"}));
  TESSERA_ASSIGN_OR_RETURN(m.usage_used,
                           registry.AddCounter("tessera_tenant_gpu_milli_seconds_used_total",
                                               "Milli-GPU seconds a tenant kept busy, from stored usage samples.",
                                               {"tenant"}));
  TESSERA_ASSIGN_OR_RETURN(m.usage_samples,
                           registry.AddCounter("tessera_usage_samples_total",
                                               "Usage samples from node agents by result (stored, duplicate, rejected).",
                                               {"result"}));
  for (const char* result : {"stored", "duplicate", "rejected"}) m.usage_samples->Inc({result}, 0);
  // Per GPU, as counters of what the samples measured: rate() over them is the GPU's utilisation
  // (milli-GPU seconds per second / 1000) and its average memory in use (MiB), over any window
  // Prometheus asks for, exact across restarts (rebuilt from the stored samples) and resends.
  TESSERA_ASSIGN_OR_RETURN(m.gpu_used,
                           registry.AddCounter("tessera_gpu_used_milli_seconds_total",
                                               "Milli-GPU seconds one GPU was kept busy, from stored usage samples.",
                                               {"node", "gpu", "model"}));
  TESSERA_ASSIGN_OR_RETURN(m.gpu_memory,
                           registry.AddCounter("tessera_gpu_memory_mib_seconds_total",
                                               "MiB seconds of device memory in use on one GPU, from stored usage samples.",
                                               {"node", "gpu", "model"}));
  // NVML's view beside them (issue 32): the milli-GPU seconds NVML saw the samples' processes
  // busy, over the seconds that had NVML's figure, so that rate(nvml_used) / rate(nvml_seconds)
  // compares with the shim's counted use; and the samples where NVML saw far more (issue 29).
  TESSERA_ASSIGN_OR_RETURN(m.gpu_nvml_used,
                           registry.AddCounter("tessera_gpu_nvml_used_milli_seconds_total",
                                               "Milli-GPU seconds NVML saw the workloads' processes busy on one GPU "
                                               "(SM utilisation), from stored usage samples that carry it.",
                                               {"node", "gpu", "model"}));
  TESSERA_ASSIGN_OR_RETURN(m.gpu_nvml_seconds,
                           registry.AddCounter("tessera_gpu_nvml_observed_seconds_total",
                                               "Seconds of stored usage samples of one GPU that carry NVML's "
                                               "utilisation (summed over its workloads).",
                                               {"node", "gpu", "model"}));
  TESSERA_ASSIGN_OR_RETURN(m.usage_under_reported,
                           registry.AddCounter("tessera_usage_under_reported_samples_total",
                                               "Stored usage samples whose NVML utilisation is far above the GPU time "
                                               "the shim counted (detected, not charged).",
                                               {"tenant"}));
  return Status::Ok();
}

void ControlPlane::Impl::CountUsage(const store::UsageSampleRecord& s) {
  m.usage_allocated->Inc({s.tenant}, static_cast<double>(s.gpu_milli_s_allocated));
  m.usage_used->Inc({s.tenant}, static_cast<double>(s.gpu_milli_s_used));
  m.gpu_used->Inc({s.node, s.gpu, s.model}, static_cast<double>(s.gpu_milli_s_used));
  m.gpu_memory->Inc({s.node, s.gpu, s.model}, static_cast<double>(s.memory_mib_s));
  if (s.nvml_used_milli) {
    const int64_t span = s.end_s - s.start_s;
    m.gpu_nvml_used->Inc({s.node, s.gpu, s.model}, static_cast<double>(*s.nvml_used_milli * span));
    m.gpu_nvml_seconds->Inc({s.node, s.gpu, s.model}, static_cast<double>(span));
  }
  if (UnderReported(s)) m.usage_under_reported->Inc({s.tenant}, 1);
}

HttpResponse ControlPlane::Impl::PostUsage(const HttpRequest& r, const Caller&) {
  const std::string name = r.path_params.at("name");
  std::string field;
  StatusOr<std::vector<UsageItem>> items = DecodeUsageBatch(name, r.body, &field);
  if (!items.ok()) {
    if (items.status().code() == StatusCode::kResourceExhausted)
      return HttpResponse::Error(413, "too_many_samples", items.status().message(), field);
    return ErrorResponse(items.status(), field);
  }
  StatusOr<UsagePostResult> out = usage_service->Post(name, *items);
  if (!out.ok()) return ErrorResponse(out.status());
  json rejected = json::array();
  for (const UsageRejection& x : out->rejected)
    rejected.push_back({{"index", x.index}, {"field", x.field}, {"error", x.error}});
  m.usage_samples->Inc({"stored"}, static_cast<double>(out->stored.size()));
  m.usage_samples->Inc({"duplicate"}, static_cast<double>(out->duplicates));
  m.usage_samples->Inc({"rejected"}, static_cast<double>(out->rejected.size()));
  return HttpResponse::Json(200, json{{"node", name},
                                      {"stored", out->stored.size()},
                                      {"duplicates", out->duplicates},
                                      {"rejected", rejected}}
                                     .dump());
}

HttpResponse ControlPlane::Impl::GetUsage(const HttpRequest& r, const Caller& c) {
  std::string field;
  StatusOr<ReadQuery> q = ParseReadQuery(r.query, &field);
  if (!q.ok()) return ErrorResponse(q.status(), field);
  StatusOr<UsageReport> report = usage_service->Report(ReadCallerOf(c), {q->tenant, q->from_s, q->to_s});
  if (!report.ok()) return ErrorResponse(report.status());
  json hours = json::array();
  for (const UsageRecord& h : report->hours) hours.push_back(UsageRecordView(h.key, h.hour));
  json list = json::array();
  for (const UsageTotal& t : report->tenants)
    list.push_back({{"tenant", t.tenant},
                    {"gpu_milli_s_allocated", t.gpu_milli_s_allocated},
                    {"gpu_milli_s_used", t.gpu_milli_s_used},
                    {"memory_mib_s", t.memory_mib_s},
                    {"kernel_launches", t.kernel_launches},
                    {"samples", t.samples}});
  json answer = {{"tenants", list}, {"hours", hours}};
  if (q->from_s) answer["from"] = *q->from_s;
  if (q->to_s) answer["to"] = *q->to_s;
  return HttpResponse::Json(200, answer.dump());
}

}  // namespace tessera::daemon
