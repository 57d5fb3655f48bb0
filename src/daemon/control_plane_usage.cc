// Usage: POST /v1/nodes/{name}/usage (the node agent's samples: checked, stored once, fed to the
// metering ledger) and GET /v1/usage (per-tenant totals and hourly records from the ledger).
//
// The table and the ledger hold the same samples: a sample is stored only when the ledger would
// count it (Ledger::Check, under usage_mu, before the write), and the ledger takes it in the same
// step. When the transaction fails after that, the ledger is rebuilt from the table (marked stale
// until a rebuild succeeds). Counting is order-free: a set of samples the ledger accepted one by
// one is accepted in any order (no two overlap, seq grows with time per source), so the rebuild
// in key order gives the same hourly records.
#include <algorithm>
#include <tuple>

#include <nlohmann/json.hpp>

#include "src/daemon/control_plane_impl.h"
#include "src/daemon/usage_codec.h"
#include "tessera/metering/civil_time.h"

namespace tessera::daemon {

using json = nlohmann::json;

namespace {

constexpr int kRebuildPage = 10000;

struct Rejection {
  size_t index;
  std::string field;
  std::string error;
};

// What one POST did, filled inside its transaction.
struct UsageOutcome {
  bool node_known = true;
  std::vector<const store::UsageSampleRecord*> stored;
  int64_t duplicates = 0;
  std::vector<Rejection> rejected;
};

}  // namespace

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
  return Status::Ok();
}

void ControlPlane::Impl::CountGpuUsage(const store::UsageSampleRecord& s) {
  m.gpu_used->Inc({s.node, s.gpu, s.model}, static_cast<double>(s.gpu_milli_s_used));
  m.gpu_memory->Inc({s.node, s.gpu, s.model}, static_cast<double>(s.memory_mib_s));
}

Status ControlPlane::Impl::RebuildLedger(bool count) {
  metering::Ledger fresh;
  std::map<std::string, std::pair<int64_t, int64_t>> totals;  // tenant -> (allocated, used)
  store::UsageFilter filter;
  for (;;) {
    std::vector<store::UsageSampleRecord> page;
    TESSERA_RETURN_IF_ERROR(Transact("read", [&](store::Transaction& tx) -> Status {
      TESSERA_ASSIGN_OR_RETURN(page, tx.ListUsageSamples(filter, kRebuildPage));
      return Status::Ok();
    }));
    for (const store::UsageSampleRecord& s : page) {
      StatusOr<metering::IngestResult> in = fresh.Ingest(UsageSourceKey(s), UsageValues(s));
      if (!in.ok()) {
        // Only samples the ledger took are stored: this one was written by someone else.
        return Status(StatusCode::kDataLoss, "usage sample seq " + std::to_string(s.seq) + " of workload " +
                                                 s.workload + " on " + s.node + " gpu " + s.gpu +
                                                 " is stored but the ledger refuses it: " + in.status().message());
      }
      totals[s.tenant].first += s.gpu_milli_s_allocated;
      totals[s.tenant].second += s.gpu_milli_s_used;
      if (count) CountGpuUsage(s);
    }
    if (page.size() < static_cast<size_t>(kRebuildPage)) break;
    const store::UsageSampleRecord& last = page.back();
    filter.after = store::UsageSampleKey{last.node, last.workload, last.gpu, last.seq};
  }
  ledger = std::move(fresh);
  ledger_stale = false;
  if (count) {
    for (const auto& [tenant, q] : totals) {
      m.usage_allocated->Inc({tenant}, static_cast<double>(q.first));
      m.usage_used->Inc({tenant}, static_cast<double>(q.second));
    }
  }
  return Status::Ok();
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
  std::lock_guard<std::mutex> lock(usage_mu);
  if (ledger_stale) {
    if (Status st = RebuildLedger(false); !st.ok()) return ErrorResponse(st);
  }
  UsageOutcome out;
  Status st = Transact("usage", [&](store::Transaction& tx) -> Status {
    StatusOr<store::NodeRecord> node = tx.GetNode(name);
    if (!node.ok()) {
      out.node_known = false;
      return node.status().code() == StatusCode::kNotFound ? Status::Ok() : node.status();
    }
    std::map<std::string, bool> tenant_known;
    for (const UsageItem& item : *items) {
      const std::string at = "samples[" + std::to_string(item.index) + "]";
      auto reject = [&](std::string f, std::string why) { out.rejected.push_back({item.index, std::move(f), std::move(why)}); };
      if (!item.error.ok()) {
        reject(item.field, std::string(item.error.message()));
        continue;
      }
      const store::UsageSampleRecord& s = item.sample;
      auto [known, first] = tenant_known.try_emplace(s.tenant, false);
      if (first) {
        StatusOr<store::TenantRecord> t = tx.GetTenant(s.tenant);
        if (!t.ok() && t.status().code() != StatusCode::kNotFound) return t.status();
        known->second = t.ok();
      }
      if (!known->second) {
        reject(at + ".tenant", at + ".tenant: unknown tenant '" + s.tenant + "'");
        continue;
      }
      const metering::SourceKey key = UsageSourceKey(s);
      const metering::SampleValues values = UsageValues(s);
      StatusOr<metering::IngestResult> check = ledger.Check(key, values);
      if (!check.ok()) {
        const std::string f = LedgerErrorField(check.status(), item.index);
        reject(f, f + ": " + std::string(check.status().message()));
        continue;
      }
      StatusOr<bool> put = tx.PutUsageSample(s);
      if (!put.ok()) {
        if (put.status().code() != StatusCode::kAlreadyExists) return put.status();
        reject(at + ".seq", at + ".seq: " + std::string(put.status().message()));
        continue;
      }
      // The ledger follows the check (it counts a sample the table had but it missed, too).
      if (*check == metering::IngestResult::kCounted) (void)ledger.Ingest(key, values);
      if (*put) out.stored.push_back(&s);
      else ++out.duplicates;
    }
    return Status::Ok();
  });
  if (!st.ok()) {
    ledger_stale = !RebuildLedger(false).ok();  // the ledger took what the table did not
    return ErrorResponse(st);
  }
  if (!out.node_known) return NotFound("node '" + name + "'");
  json rejected = json::array();
  for (const Rejection& x : out.rejected) rejected.push_back({{"index", x.index}, {"field", x.field}, {"error", x.error}});
  for (const store::UsageSampleRecord* s : out.stored) {
    m.usage_allocated->Inc({s->tenant}, static_cast<double>(s->gpu_milli_s_allocated));
    m.usage_used->Inc({s->tenant}, static_cast<double>(s->gpu_milli_s_used));
    CountGpuUsage(*s);
    anomaly_service->ObserveUsage(s->tenant, s->start_s, s->gpu_milli_s_allocated, s->gpu_milli_s_used);
  }
  {
    std::lock_guard<std::mutex> use_lock(last_use_mu);
    for (const store::UsageSampleRecord* s : out.stored) {
      std::map<std::string, LastUse>& gpu = last_use[{s->node, s->gpu}];
      std::erase_if(gpu, [&](const auto& e) { return e.second.end_s < s->start_s - 3600; });
      LastUse& use = gpu[s->workload];
      const int64_t span = s->end_s - s->start_s;  // > 0: the codec refuses an empty span
      if (span > 0 && s->end_s >= use.end_s)
        use = {s->end_s, s->memory_mib_s / span, s->gpu_milli_s_used / span};
    }
  }
  m.usage_samples->Inc({"stored"}, static_cast<double>(out.stored.size()));
  m.usage_samples->Inc({"duplicate"}, static_cast<double>(out.duplicates));
  m.usage_samples->Inc({"rejected"}, static_cast<double>(out.rejected.size()));
  return HttpResponse::Json(200, json{{"node", name},
                                      {"stored", out.stored.size()},
                                      {"duplicates", out.duplicates},
                                      {"rejected", rejected}}
                                     .dump());
}

HttpResponse ControlPlane::Impl::GetUsage(const HttpRequest& r, const Caller& c) {
  ReadQuery q;
  if (auto bad = ReadPrelude(r, c, &q)) return *bad;
  const std::string& tenant = q.tenant;
  const ParentOf parents = Parents();
  const int64_t from = q.from_s.value_or(INT64_MIN), to = q.to_s.value_or(INT64_MAX);
  const bool tenant_role = c.principal.role == Role::kTenantAdmin || c.principal.role == Role::kTenantUser;
  const std::string root = !tenant.empty() ? tenant : tenant_role ? c.principal.tenant : "";
  std::lock_guard<std::mutex> lock(usage_mu);
  if (ledger_stale) {
    if (Status st = RebuildLedger(false); !st.ok()) return ErrorResponse(st);
  }
  std::vector<metering::HourlyRecord> records;
  for (const metering::HourlyRecord& h : ledger.Records()) {
    // The ledger is hourly: an hour counts when it overlaps [from, to).
    if (h.hour >= to || h.hour + metering::kSecondsPerHour <= from) continue;
    if (!root.empty() && !InSubtree(ledger.source(h.source).tenant, root, parents)) continue;
    records.push_back(h);
  }
  // By hour, then source (names, not the ledger's ids: the same answer after a rebuild).
  auto order = [&](const metering::HourlyRecord& h) {
    const metering::SourceKey& k = ledger.source(h.source);
    return std::tie(h.hour, k.tenant, k.node, k.gpu, k.workload, k.model, k.partition);
  };
  std::sort(records.begin(), records.end(), [&](const auto& a, const auto& b) { return order(a) < order(b); });
  json hours = json::array();
  std::map<std::string, json> totals;
  for (const metering::HourlyRecord& h : records) {
    const metering::SourceKey& key = ledger.source(h.source);
    hours.push_back(UsageRecordView(key, h));
    json& t = totals[key.tenant];
    if (t.is_null()) t = {{"tenant", key.tenant}, {"gpu_milli_s_allocated", 0}, {"gpu_milli_s_used", 0},
                          {"memory_mib_s", 0}, {"kernel_launches", 0}, {"samples", 0}};
    for (const auto& [name, v] : {std::pair{"gpu_milli_s_allocated", h.gpu_milli_s_allocated},
                                  {"gpu_milli_s_used", h.gpu_milli_s_used}, {"memory_mib_s", h.memory_mib_s},
                                  {"kernel_launches", h.kernel_launches}, {"samples", h.samples}})
      t[name] = t[name].get<int64_t>() + v;
  }
  json list = json::array();
  for (auto& [name, t] : totals) list.push_back(std::move(t));
  json answer = {{"tenants", list}, {"hours", hours}};
  if (from != INT64_MIN) answer["from"] = from;
  if (to != INT64_MAX) answer["to"] = to;
  return HttpResponse::Json(200, answer.dump());
}

}  // namespace tessera::daemon
