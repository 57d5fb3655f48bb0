#include "src/daemon/usage_service.h"

#include <algorithm>
#include <charconv>
#include <climits>
#include <tuple>

#include "tessera/metering/civil_time.h"

namespace tessera::daemon {

namespace {

constexpr int kRebuildPage = 10000;

// "NVML 550 milli, counted 120 milli (gpu_milli_s_used 7200 over 60 s) on n1 gpu 0": the event's detail.
std::string UnderReportDetail(const store::UsageSampleRecord& s) {
  const int64_t span = s.end_s - s.start_s;
  return "NVML " + std::to_string(*s.nvml_used_milli) + " milli, counted " +
         std::to_string(s.gpu_milli_s_used / span) + " milli (gpu_milli_s_used " +
         std::to_string(s.gpu_milli_s_used) + " over " + std::to_string(span) + " s) on " + s.node + " gpu " + s.gpu +
         ", seq " + std::to_string(s.seq);
}

}  // namespace

bool UnderReported(const store::UsageSampleRecord& s) {
  const int64_t span = s.end_s - s.start_s;
  if (!s.nvml_used_milli || span <= 0) return false;
  const int64_t counted = s.gpu_milli_s_used / span;
  return *s.nvml_used_milli >= counted + kUnderReportMarginMilli && *s.nvml_used_milli > 2 * counted;
}

UsageService::UsageService(TransactFn transact, ParentOf parents, SampleFn on_stored)
    : transact_(std::move(transact)), parents_(std::move(parents)), on_stored_(std::move(on_stored)) {}

Status UsageService::Rebuild(const SampleFn& each) {
  std::lock_guard<std::mutex> lock(mu_);
  return RebuildLocked(each);
}

Status UsageService::RebuildLocked(const SampleFn& each) {
  metering::Ledger fresh;
  store::UsageFilter filter;
  for (;;) {
    std::vector<store::UsageSampleRecord> page;
    TESSERA_RETURN_IF_ERROR(transact_("read", [&](store::Transaction& tx) -> Status {
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
      if (each) each(s);
    }
    if (page.size() < static_cast<size_t>(kRebuildPage)) break;
    const store::UsageSampleRecord& last = page.back();
    filter.after = store::UsageSampleKey{last.node, last.workload, last.gpu, last.seq};
  }
  ledger_ = std::move(fresh);
  stale_ = false;
  return Status::Ok();
}

Status UsageService::FreshLocked() {
  if (!stale_) return Status::Ok();
  return RebuildLocked(nullptr);
}

Status UsageService::NoteUnderReport(store::Transaction& tx, const store::UsageSampleRecord& s,
                                     std::set<std::tuple<std::string, std::string, std::string>>* episodes) {
  const auto share = std::make_tuple(s.node, s.gpu, s.workload);
  if (!UnderReported(s)) {
    episodes->erase(share);
    return Status::Ok();
  }
  if (!episodes->insert(share).second) return Status::Ok();  // already reported in this episode
  int64_t id = 0;
  const auto [ptr, ec] = std::from_chars(s.workload.data(), s.workload.data() + s.workload.size(), id);
  if (ec != std::errc() || ptr != s.workload.data() + s.workload.size()) return Status::Ok();
  StatusOr<store::WorkloadRecord> w = tx.GetWorkload(id);
  if (!w.ok()) return w.status().code() == StatusCode::kNotFound ? Status::Ok() : w.status();
  return tx.AppendWorkloadEvent({0, id, s.end_s * 1000, "usage_under_reported", UnderReportDetail(s)}).status();
}

StatusOr<UsagePostResult> UsageService::Post(const std::string& node, const std::vector<UsageItem>& items) {
  std::lock_guard<std::mutex> lock(mu_);
  TESSERA_RETURN_IF_ERROR(FreshLocked());
  UsagePostResult out;
  bool node_known = true;
  std::set<std::tuple<std::string, std::string, std::string>> episodes;  // under_reported_ once committed
  Status st = transact_("usage", [&](store::Transaction& tx) -> Status {
    out = UsagePostResult{};  // a retried transaction starts over
    episodes = under_reported_;
    StatusOr<store::NodeRecord> rec = tx.GetNode(node);
    if (!rec.ok()) {
      node_known = false;
      return rec.status().code() == StatusCode::kNotFound ? Status::Ok() : rec.status();
    }
    std::map<std::string, bool> tenant_known;
    for (const UsageItem& item : items) {
      const std::string at = "samples[" + std::to_string(item.index) + "]";
      auto reject = [&](std::string f, std::string why) {
        out.rejected.push_back({item.index, std::move(f), std::move(why)});
      };
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
      StatusOr<metering::IngestResult> check = ledger_.Check(key, values);
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
      if (*check == metering::IngestResult::kCounted) (void)ledger_.Ingest(key, values);
      if (*put) {
        out.stored.push_back(s);
        TESSERA_RETURN_IF_ERROR(NoteUnderReport(tx, s, &episodes));
      } else {
        ++out.duplicates;
      }
    }
    return Status::Ok();
  });
  if (!st.ok()) {
    stale_ = !RebuildLocked(nullptr).ok();  // the ledger took what the table did not
    return st;
  }
  if (!node_known) return NotFoundError("node '" + node + "' not found");
  under_reported_ = std::move(episodes);
  if (on_stored_)
    for (const store::UsageSampleRecord& s : out.stored) on_stored_(s);
  std::lock_guard<std::mutex> use_lock(use_mu_);
  for (const store::UsageSampleRecord& s : out.stored) {
    std::map<std::string, ShareUse>& gpu = last_use_[{s.node, s.gpu}];
    std::erase_if(gpu, [&](const auto& e) { return e.second.end_s < s.start_s - 3600; });
    ShareUse& use = gpu[s.workload];
    const int64_t span = s.end_s - s.start_s;  // > 0: the codec refuses an empty span
    if (span > 0 && s.end_s >= use.end_s)
      use = {s.end_s, s.memory_mib_s / span, s.gpu_milli_s_used / span, s.nvml_used_milli, s.nvml_memory_mib};
  }
  return out;
}

StatusOr<UsageReport> UsageService::Report(const ReadCaller& caller, const UsageQuery& query) {
  const std::string& tenant = query.tenant;
  TESSERA_RETURN_IF_ERROR(caller.check(Action::kReadUsage, tenant, "tenant '" + tenant + "'"));
  if (!tenant.empty() && !parents_(tenant)) return NotFoundError("tenant '" + tenant + "' not found");
  const int64_t from = query.from_s.value_or(INT64_MIN), to = query.to_s.value_or(INT64_MAX);
  const Role role = caller.principal.role;
  const bool tenant_role = role == Role::kTenantAdmin || role == Role::kTenantUser;
  const std::string root = !tenant.empty() ? tenant : tenant_role ? caller.principal.tenant : "";
  std::lock_guard<std::mutex> lock(mu_);
  TESSERA_RETURN_IF_ERROR(FreshLocked());
  UsageReport out;
  for (const metering::HourlyRecord& h : ledger_.Records()) {
    // The ledger is hourly: an hour counts when it overlaps [from, to).
    if (h.hour >= to || h.hour + metering::kSecondsPerHour <= from) continue;
    const metering::SourceKey& key = ledger_.source(h.source);
    if (!root.empty() && !InSubtree(key.tenant, root, parents_)) continue;
    out.hours.push_back({key, h});
  }
  // By hour, then source (names, not the ledger's ids: the same answer after a rebuild).
  auto order = [](const UsageRecord& r) {
    const metering::SourceKey& k = r.key;
    return std::tie(r.hour.hour, k.tenant, k.node, k.gpu, k.workload, k.model, k.partition);
  };
  std::sort(out.hours.begin(), out.hours.end(), [&](const auto& a, const auto& b) { return order(a) < order(b); });
  std::map<std::string, UsageTotal> totals;
  for (const UsageRecord& r : out.hours) {
    UsageTotal& t = totals[r.key.tenant];
    t.tenant = r.key.tenant;
    t.gpu_milli_s_allocated += r.hour.gpu_milli_s_allocated;
    t.gpu_milli_s_used += r.hour.gpu_milli_s_used;
    t.memory_mib_s += r.hour.memory_mib_s;
    t.kernel_launches += r.hour.kernel_launches;
    t.samples += r.hour.samples;
  }
  for (auto& [name, t] : totals) out.tenants.push_back(std::move(t));
  return out;
}

Status UsageService::Read(const std::function<void(const metering::Ledger&)>& fn) {
  std::lock_guard<std::mutex> lock(mu_);
  TESSERA_RETURN_IF_ERROR(FreshLocked());
  fn(ledger_);
  return Status::Ok();
}

void UsageService::Peek(const std::function<void(const metering::Ledger&)>& fn) {
  std::lock_guard<std::mutex> lock(mu_);
  fn(ledger_);
}

std::optional<ShareUse> UsageService::LastUse(const std::string& node, const std::string& gpu,
                                              const std::string& workload) const {
  std::lock_guard<std::mutex> lock(use_mu_);
  auto g = last_use_.find({node, gpu});
  if (g == last_use_.end()) return std::nullopt;
  auto use = g->second.find(workload);
  if (use == g->second.end()) return std::nullopt;
  return use->second;
}

}  // namespace tessera::daemon
