// Usage without HTTP: the metering ledger of the samples node agents send, and what a caller may
// read of it. POST /v1/nodes/{name}/usage and GET /v1/usage (control_plane_usage.cc) are decode ->
// UsageService -> render; the invoice, forecast and anomaly code reads the ledger through Read and
// Peek; GET /v1/nodes/{name} reads the newest sample of each share through LastUse.
// tests/daemon/usage_service_test.cc drives it directly.
//
// The table and the ledger hold the same samples: a sample is stored only when the ledger would
// count it (Ledger::Check, under the ledger's lock, before the write), and the ledger takes it in
// the same step. When the transaction fails after that, the ledger is rebuilt from the table
// (marked stale until a rebuild succeeds; Post, Report and Read rebuild a stale ledger first).
// Counting is order-free: a set of samples the ledger accepted one by one is accepted in any order
// (no two overlap, seq grows with time per source), so the rebuild in key order gives the same
// hourly records.
//
// Post(node, items): per sample, in order: a decode error (item.error) is rejected as decoded; a
// tenant the store does not know is rejected ("samples[i].tenant: unknown tenant 'x'"); a sample
// the ledger refuses is rejected naming the field (LedgerErrorField); a sample whose key is stored
// with other values is rejected on "samples[i].seq"; a resend of a stored sample is a duplicate;
// the rest are stored. Each stored sample goes to `on_stored` (metrics, the anomaly detector)
// under the ledger's lock, then to the newest-use table. An unknown node is NOT_FOUND
// "node 'x' not found" and stores nothing; a failed transaction stores nothing.
//
// Report(caller, query): the caller's check (Action::kReadUsage) of query.tenant ("" too: the
// caller's whole view), then NOT_FOUND for a tenant that does not exist. The hourly records that
// overlap [from, to) of the tenant's subtree (no tenant: an admin's or viewer's whole cluster, a
// tenant token's own subtree), by hour then source names (the same answer after a rebuild), and
// per tenant their sums.
//
// Worked example (vision under acme; node n1 registered; one sample of vision's workload 7 on
// n1 gpu 0 from 00:00 to 00:10: 600'000 milli-s allocated, 300'000 used, 2'457'600 MiB-s):
//   Post("n1", [sample seq 1])          -> {stored [seq 1], duplicates 0, rejected []}
//   Post("n1", [sample seq 1])          -> {stored [], duplicates 1, rejected []}
//   Post("n9", [..])                    -> NOT_FOUND "node 'n9' not found"
//   Report(acme's tenant-user, {})      -> tenants [vision 600'000 / 300'000], hours [00:00 vision n1 0]
//   Report(other's tenant-user, {.tenant = "vision"}) -> NOT_FOUND "tenant 'vision' not found"
//   LastUse("n1", "0", "7")             -> {end_s 00:10, memory_mib 4096, used_milli 500}
// A stored sample that is UnderReported (NVML saw its processes far busier than the shim counted)
// appends a workload event "usage_under_reported" with both figures, in the same transaction, the
// first time in an episode (until a sample of the same share is not under-reported), when the
// workload id is one the store holds; `on_stored` sees every sample, and the control plane counts
// the under-reported ones (tessera_usage_under_reported_samples_total{tenant}).
//
// Thread-safety: all methods may be called from any thread. Locks: mu_ (the ledger; never held
// with the control plane's world lock, taken before the tenant service's parent-map lock) is taken
// before use_mu_ (the newest-use table, a leaf: it may be taken under any other lock).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <tuple>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "src/daemon/authz.h"
#include "src/daemon/usage_codec.h"
#include "tessera/core/status.h"
#include "tessera/metering/ledger.h"
#include "tessera/store/store.h"

namespace tessera::daemon {

// What one Post did.
struct UsageRejection {
  size_t index = 0;
  std::string field;  // "samples[3].end"
  std::string error;  // the message, starting with the field
};
struct UsagePostResult {
  std::vector<store::UsageSampleRecord> stored;  // in the batch's order
  int64_t duplicates = 0;
  std::vector<UsageRejection> rejected;  // in the batch's order
};

// GET /v1/usage, its query decoded (ParseReadQuery).
struct UsageQuery {
  std::string tenant;  // "": the caller's whole view
  std::optional<int64_t> from_s;
  std::optional<int64_t> to_s;
};
struct UsageRecord {
  metering::SourceKey key;
  metering::HourlyRecord hour;
};
struct UsageTotal {
  std::string tenant;
  int64_t gpu_milli_s_allocated = 0;
  int64_t gpu_milli_s_used = 0;
  int64_t memory_mib_s = 0;
  int64_t kernel_launches = 0;
  int64_t samples = 0;
};
struct UsageReport {
  std::vector<UsageTotal> tenants;  // by name, each tenant with a record in `hours`
  std::vector<UsageRecord> hours;   // by hour, then tenant, node, gpu, workload, model, partition
};

// The newest stored sample of one share (node, GPU as the agent wrote it, workload), as a rate
// over its span.
struct ShareUse {
  int64_t end_s = 0;
  int64_t memory_mib = 0;  // memory_mib_s / span
  int64_t used_milli = 0;  // gpu_milli_s_used / span
  // NVML's view of the same span (the sample's nvml_* figures), where the agent had it.
  std::optional<int64_t> nvml_used_milli;
  std::optional<int64_t> nvml_memory_mib;
};

// A stored sample whose NVML utilisation is far above the GPU time the shim counted (issue 29:
// a tenant that under-reports is charged as reported; this is the detection step, nothing is
// charged from it): NVML's average at least kUnderReportMarginMilli above the counted average
// and more than twice it. Example: counted 120 milli, NVML 550 -> under-reported (430 above);
// counted 500, NVML 700 -> not (200 above); no NVML figure -> not.
inline constexpr int64_t kUnderReportMarginMilli = 250;
bool UnderReported(const store::UsageSampleRecord& sample);

class UsageService {
 public:
  // The control plane's store transaction (its latency metric by `operation`).
  using TransactFn =
      std::function<Status(std::string_view operation, const std::function<Status(store::Transaction&)>& fn)>;
  using SampleFn = std::function<void(const store::UsageSampleRecord&)>;

  UsageService(TransactFn transact, ParentOf parents, SampleFn on_stored);

  // The ledger again from every stored sample; `each` (may be null) sees each sample read (the
  // control plane counts them into its metrics at start). DATA_LOSS names a stored sample the
  // ledger refuses (written by someone else).
  Status Rebuild(const SampleFn& each = nullptr);
  // A node agent's batch, decoded (DecodeUsageBatch); the route authorised the node's token.
  StatusOr<UsagePostResult> Post(const std::string& node, const std::vector<UsageItem>& items);
  // What the caller may see of the ledger (see above).
  StatusOr<UsageReport> Report(const ReadCaller& caller, const UsageQuery& query);
  // `fn` over the ledger under its lock, rebuilt first when stale (its error then).
  Status Read(const std::function<void(const metering::Ledger&)>& fn);
  // `fn` over the ledger under its lock as it is (stale or not): for start-up checks.
  void Peek(const std::function<void(const metering::Ledger&)>& fn);
  // The newest stored sample of a share since the service started (nullopt: none); a share whose
  // newest sample ended an hour before a new sample of the same GPU began is dropped then.
  std::optional<ShareUse> LastUse(const std::string& node, const std::string& gpu, const std::string& workload) const;

 private:
  Status RebuildLocked(const SampleFn& each);  // mu_ held
  Status FreshLocked();                        // mu_ held: rebuilt when stale
  // A stored sample's under-report episode in `episodes`, and its event (see above); mu_ held.
  Status NoteUnderReport(store::Transaction& tx, const store::UsageSampleRecord& s,
                         std::set<std::tuple<std::string, std::string, std::string>>* episodes);

  const TransactFn transact_;
  const ParentOf parents_;
  const SampleFn on_stored_;

  std::mutex mu_;
  metering::Ledger ledger_;
  bool stale_ = false;

  mutable std::mutex use_mu_;
  std::map<std::pair<std::string, std::string>, std::map<std::string, ShareUse>> last_use_;
  // Shares (node, GPU, workload) in an under-reported episode (mu_): one event per episode.
  std::set<std::tuple<std::string, std::string, std::string>> under_reported_;
};

}  // namespace tessera::daemon
