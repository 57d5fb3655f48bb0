// The control plane's state and the handlers' declarations, shared by its .cc files:
//   control_plane.cc            Create, restore from the store, routes, auth, Start/Stop
//   control_plane_tenants.cc    /v1/tenants, /v1/tokens (decode -> TenantService/TokenService -> encode)
//   control_plane_workloads.cc  /v1/workloads (decode -> WorkloadService -> render) and the world it asks
//   control_plane_nodes.cc      /v1/nodes and the node-agent endpoints (decode -> NodeService -> render)
//   control_plane_loop.cc       the scheduling loop: cycles, persisted decisions, node timeouts
//   control_plane_events.cc     /v1/events (decode -> EventService -> server-sent events)
//   control_plane_usage.cc      /v1/nodes/{name}/usage, /v1/usage (decode -> UsageService -> encode)
//   control_plane_invoices.cc   the price plan, /v1/invoices (the ledger billed with it)
//   control_plane_history.cc    /v1/history (ClusterHistory, sampled by the loop's UpdateGauges)
//   control_plane_anomalies.cc  the anomaly detector per tenant, SLA observations, /v1/anomalies
//
// Locks (always taken in this order; none is held while waiting for a client):
//   mu          the world: the LiveScheduler, the jobs and nodes it knows, the tenant map (which
//               TenantService keeps, under this lock: src/daemon/tenant_service.h). A
//               cycle holds it while its decisions are persisted, so nobody sees a decision
//               before it is durable. Submits persist WITHOUT it and without holding an HTTP
//               thread (Store::TransactAsync: concurrent submits share a group commit, led by
//               the store's writer thread); their answer is made on an HTTP thread once the
//               commit is durable, and takes mu only to queue the job.
//   (WorkloadService's set of cancels that overtook their submit's queueing is under mu too; its
//   view cache is under a leaf lock of its own: src/daemon/workload_service.h)
//   (the parent map authorisation reads is TenantService's, under its own shared lock taken
//   after mu; the token cache is TokenService's, with its own locks: src/daemon/token_service.h)
//   (the metering ledger is UsageService's, under its own lock: never held with mu, taken before
//   the parent map's lock; its newest sample per share, read by GET /v1/nodes/{name} under mu, is
//   under a leaf lock of its own: src/daemon/usage_service.h)
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "src/daemon/anomaly_service.h"
#include "src/daemon/api_codec.h"
#include "src/daemon/audit_service.h"
#include "src/daemon/authz.h"
#include "src/daemon/cluster_history.h"
#include "src/daemon/event_service.h"
#include "src/daemon/http_server.h"
#include "src/daemon/forecast_service.h"
#include "src/daemon/history_service.h"
#include "src/daemon/invoice_service.h"
#include "src/daemon/metrics.h"
#include "src/daemon/node_service.h"
#include "src/daemon/rate_limit.h"
#include "src/daemon/read_query.h"
#include "src/daemon/static_bundle.h"
#include "src/daemon/tenant_service.h"
#include "src/daemon/token_service.h"
#include "src/daemon/usage_service.h"
#include "src/daemon/workload_request.h"
#include "src/daemon/workload_service.h"
#include "src/daemon/workload_shape.h"
#include "tessera/api/node_wire.h"
#include "tessera/api/workload_wire.h"
#include "tessera/core/gpu_model.h"
#include "tessera/daemon/control_plane.h"
#include "tessera/metering/ledger.h"
#include "tessera/metering/price_plan.h"
#include "tessera/sched/live_scheduler.h"
#include "tessera/store/store.h"

namespace tessera::daemon {

// Workload and node states are typed everywhere here (WorkloadState, NodeState: one definition
// and one string mapping, tessera/core/lifecycle_state.h, which the store and the wire use too).
// The scheduler's view of a node it knows, as a node state.
inline NodeState NodeStateOf(sched::NodeState s) {
  return s == sched::NodeState::kCordoned ? NodeState::kCordoned : NodeState::kReady;
}

// Who is calling, once the bearer token checked out.
struct Caller {
  Principal principal;
  std::string token_id;
  std::string node;  // a node-agent token bound to one node: that node ("" for any)
  Action action = Action::kReadMetrics;  // the route's (ApiRoute::action)
  // Set by ControlPlane::Impl::Scope: the handler of a kObject route checked the object's tenant.
  mutable bool scoped = false;
};

// How the route wrapper authorises a route's Action (see ApiRoutes in control_plane.cc):
//   kNone        not about one tenant: Authorize(action, "") in the wrapper decides
//   kPathTenant  about the tenant the path names ({name}): Authorize(action, name) in the wrapper
//   kObject      about a tenant the handler finds (the body's, a workload's, ?tenant=): the wrapper
//                refuses a role that may never do the action (RoleMayEver); the handler checks the
//                object through Impl::Scope, and a 2xx from a handler that did not is a 500
enum class RouteScope { kNone, kPathTenant, kObject };
struct ApiRoute;

struct ApiMetrics {
  Counter* requests = nullptr;            // {route, code}
  Histogram* latency = nullptr;           // {route}
  Histogram* store_latency = nullptr;     // {operation}
  Counter* admissions = nullptr;          // {tenant, qos}
  Counter* rejections = nullptr;          // {reason}
  Counter* preemptions = nullptr;         // {tenant, cause}
  Counter* starts = nullptr;              // {tenant}
  Gauge* queue_length = nullptr;          // {tenant, qos}
  Histogram* wait_seconds = nullptr;      // {qos}
  Gauge* tenant_gpu_milli = nullptr;      // {tenant}: allocated now
  Gauge* tenant_guaranteed_milli = nullptr;  // {tenant}
  Gauge* gpu_allocated_milli = nullptr;   // {node, gpu}
  Gauge* nodes = nullptr;                 // {state}
  Counter* cycles = nullptr;
  Histogram* cycle_seconds = nullptr;
  Counter* usage_allocated = nullptr;     // {tenant}: gpu_milli_s_allocated of stored samples
  Counter* usage_used = nullptr;          // {tenant}
  Counter* usage_samples = nullptr;       // {result}: stored, duplicate, rejected
  Counter* gpu_used = nullptr;            // {node, gpu, model}: gpu_milli_s_used of stored samples
  Counter* gpu_memory = nullptr;          // {node, gpu, model}: memory_mib_s of stored samples
  Counter* gpu_nvml_used = nullptr;       // {node, gpu, model}: nvml_used_milli x span of stored samples
  Counter* gpu_nvml_seconds = nullptr;    // {node, gpu, model}: the spans that carried nvml_used_milli
  Counter* usage_under_reported = nullptr;  // {tenant}: stored samples UnderReported (usage_service.h)
  Counter* anomalies = nullptr;           // {tenant, series}: anomalies the detector flagged
  Gauge* sla_wait_p99 = nullptr;          // {tenant}: the last closed hour's guaranteed_wait_p99_s
};

// A job the scheduler knows (pending or running), with what the store says of it.
struct KnownJob {
  WorkloadShape shape;
  int64_t submit_ms = 0;
};

// KnownNode (a node the scheduler holds, with its record): src/daemon/node_service.h.

struct ControlPlane::Impl {
  ControlPlaneOptions opt;
  const GpuModelCatalog& catalog = GpuModelCatalog::Builtin();
  std::unique_ptr<store::Store> db;
  std::unique_ptr<HttpServer> http;
  std::unique_ptr<EventService> event_service;  // the event feed, GET /v1/events (made in Create)
  MetricsRegistry registry;
  ApiMetrics m;
  // What UpdateGauges last wrote to m.gpu_allocated_milli, per node and GPU: a series is written
  // only when its value changed (1,000 nodes of 8 GPUs were 8,000 label lookups every cycle).
  std::map<std::string, std::vector<double>> gpu_allocated_published;
  std::unique_ptr<RateLimiter> limiter;
  std::string generated_token;

  std::unique_ptr<TokenService> token_service;  // the tokens (own locks; made in Create)
  std::unique_ptr<TenantService> tenant_service;  // the tenants (under mu; made in Create)
  std::unique_ptr<InvoiceService> invoice_service;  // the price plan's invoices (made in Create)
  // The anomaly detectors and the hours' SLA observations (own lock; made in Create).
  std::unique_ptr<AnomalyService> anomaly_service;
  std::unique_ptr<ForecastService> forecast_service;  // demand forecasts (no state; made in Create)
  // The metering ledger and each share's newest sample (own locks; made in Create).
  std::unique_ptr<UsageService> usage_service;

  mutable std::mutex mu;
  std::unique_ptr<sched::LiveScheduler> live;
  std::map<int64_t, KnownJob> jobs;
  std::map<std::string, KnownNode> nodes;  // ready and cordoned
  std::set<std::string> lost_nodes;         // lost (in the store; back when they register)
  // Pending work no node of the cluster can hold now (FAILED_PRECONDITION from the scheduler's
  // admission): kept waiting ("no_fitting_node") and offered again whenever a node registers.
  std::set<int64_t> parked;

  // Submit, read, list, cancel and change workloads (the view cache; made in Create by
  // MakeWorkloadService, whose world is this: the scheduler's jobs under mu, the loop).
  std::unique_ptr<WorkloadService> workload_service;
  std::unique_ptr<WorkloadService> MakeWorkloadService();
  // List, read, cordon, uncordon, drain and remove nodes; the agents' register, heartbeat and
  // desired state (no state of its own; made in Create by MakeNodeService, whose world is this:
  // the node registry and the scheduler under mu, the loop). control_plane_nodes.cc.
  std::unique_ptr<NodeService> node_service;
  std::unique_ptr<NodeService> MakeNodeService();
  std::unique_ptr<AuditService> audit_service;  // GET /v1/audit (no state; made in Create)
  std::unique_ptr<HistoryService> history_service;  // GET /v1/history (reads `history`; made in Create)

  // What the Cluster page draws over time (its own lock); UpdateGauges offers a point per cycle and
  // stores each closed one (StoreHistoryPoint: table cluster_history, older than a day removed);
  // Create preloads the stored day (LoadHistory). control_plane_history.cc.
  ClusterHistory history;
  void StoreHistoryPoint(const HistoryPoint& point);
  Status LoadHistory();
  // GET /v1/invoices: the plan of opt.price_plan, parsed once by Create (nullopt: none given).
  // Never changed afterwards, so read without a lock.
  std::optional<metering::PricePlan> price_plan;
  std::optional<StaticBundle> ui;  // the dashboard (ui_dir), read at Create

  // The loop.
  std::thread loop;
  std::condition_variable wake_cv;
  bool wake = false;
  bool stopping = false;
  bool loop_healthy = true;  // false after a failed persistence, until a restore succeeded

  int64_t NowMs() const;  // UnixMillis(*opt.clock): the instant an operation reads once and stores
  // Store transaction with its latency observed.
  Status Transact(std::string_view operation, const std::function<Status(store::Transaction&)>& fn);
  // Store::TransactAsync with the same latency metric and event-feed notice; done runs on the
  // store's leading thread (short, no lock: it posts the rest). Stop waits for every one.
  void TransactAsync(std::string_view operation, std::function<Status(store::Transaction&)> fn,
                     std::function<void(Status)> done);
  std::mutex async_mu;
  std::condition_variable async_cv;
  int async_pending = 0;  // TransactAsync calls whose done has not returned
  Status AuditAlone(const Caller& who, std::string action, std::string target, int code);
  // The audit record of a refused or failed state-changing call (which ones: control_plane.cc).
  void AuditRefused(const Caller& c, const HttpRequest& r, const std::string& pattern, const HttpResponse& resp);
  void Wake();

  // Create's steps.
  Status InitMetrics();
  Status AcquireStore();  // the store's ownership (opt.own_store): fails, or waits as a standby
  Status Bootstrap();
  Status Restore();  // (re)builds live, jobs, nodes, tenants from the store; mu held
  Status InstallRoutes();  // INVALID_ARGUMENT: a route of the table without an Action

  // Authorisation helpers.
  ParentOf Parents() const;  // TenantService::Parents (no lock needed)
  StatusOr<Caller> Authenticate(const HttpRequest& r);
  std::optional<GpuModelId> DefaultModel() const;  // mu held

  // Handlers.
  HttpResponse Healthz(const HttpRequest& r);
  HttpResponse UiRedirect(const HttpRequest& r);  // GET /ui -> /ui/
  HttpResponse UiFile(const HttpRequest& r);      // GET /ui/{file...}
  HttpResponse Readyz(const HttpRequest& r);
  HttpResponse Metrics(const HttpRequest& r);
  HttpResponse MetricsWithToken(const HttpRequest& r, const Caller& c);  // --metrics-auth
  HttpResponse CreateTenant(const HttpRequest& r, const Caller& c);
  HttpResponse ListTenants(const HttpRequest& r, const Caller& c);
  HttpResponse GetTenant(const HttpRequest& r, const Caller& c);
  HttpResponse PatchTenant(const HttpRequest& r, const Caller& c);
  HttpResponse DeleteTenant(const HttpRequest& r, const Caller& c);
  HttpResponse CreateToken(const HttpRequest& r, const Caller& c);
  HttpResponse ListTokens(const HttpRequest& r, const Caller& c);
  HttpResponse RevokeToken(const HttpRequest& r, const Caller& c);
  HttpResponse SubmitWorkload(const HttpRequest& r, const Caller& c);
  HttpResponse ListWorkloads(const HttpRequest& r, const Caller& c);
  HttpResponse GetWorkload(const HttpRequest& r, const Caller& c);
  HttpResponse CancelWorkload(const HttpRequest& r, const Caller& c);
  HttpResponse PatchWorkload(const HttpRequest& r, const Caller& c);
  HttpResponse ListNodes(const HttpRequest& r, const Caller& c);
  HttpResponse GetNode(const HttpRequest& r, const Caller& c);
  HttpResponse NodeAction(const HttpRequest& r, const Caller& c);  // cordon / uncordon / drain
  HttpResponse RemoveNode(const HttpRequest& r, const Caller& c);  // DELETE: a lost or cordoned empty node
  HttpResponse RegisterNode(const HttpRequest& r, const Caller& c);
  HttpResponse Heartbeat(const HttpRequest& r, const Caller& c);
  HttpResponse DesiredState(const HttpRequest& r, const Caller& c);
  // control_plane_mig.cc (mu held): a MIG node's target layout per GPU (its desired state's "gpus"),
  // and a pending workload's wait reason as stored (a MIG one waiting on fixed layouts says so).
  std::vector<api::DesiredGpu> DesiredMigLayouts(const std::string& name, const KnownNode& node);
  // Each MIG node's inventory as DesiredMigLayouts last decoded it, with the JSON it came from:
  // used while the node's stored inventory is that JSON byte for byte (a re-registration or a
  // MIG layout the agent applied stores a new one), so an agent's round decodes nothing.
  std::map<std::string, std::pair<std::string, NodeInventory>> mig_inventory_cache;
  std::string WaitReasonText(sched::JobId id, sched::WaitReason reason) const;
  // ": MIG layout not applied: node 'n1' takes MIG work only on ..." for a MIG pod of a model whose
  // MIG nodes' agents may not reconfigure (appended to "capacity" and "no_fitting_node"); else "".
  std::string MigWaitNote(const placement::TaskRequest& pod) const;
  // (A registration whose only change is the MIG instances: NodeService::Register.)
  HttpResponse ListAudit(const HttpRequest& r, const Caller& c);
  HttpResponse StreamEvents(const HttpRequest& r, const Caller& c);  // control_plane_events.cc
  // Whether the token of this hash is still known, unrevoked and unexpired (open streams).
  bool TokenStillValid(const std::string& hash) const;
  HttpResponse PostUsage(const HttpRequest& r, const Caller& c);
  HttpResponse GetUsage(const HttpRequest& r, const Caller& c);
  HttpResponse GetHistory(const HttpRequest& r, const Caller& c);
  HttpResponse GetInvoices(const HttpRequest& r, const Caller& c);  // control_plane_invoices.cc
  // The ledger's sources and the records of `period` (UsageService::Read: rebuilt first when
  // stale), and the period's SLA observations (SlaObservationsOf, after the ledger's lock).
  StatusOr<LedgerSlice> ReadLedger(const metering::Period& period);
  // control_plane_anomalies.cc: GET /v1/anomalies (decode -> AnomalyService -> render); the
  // metrics; the SLA observations of a period as the invoice run takes them; the hours the loop
  // closes, persisted (an `anomaly` event each, the SLA observations) and counted.
  // CloseAnomalyHours: mu held (it reads the tenant map); cycle_ms: the cycle's instant, which
  // its decisions carry too (the hours before it are over; the events' time).
  HttpResponse GetAnomalies(const HttpRequest& r, const Caller& c);
  // control_plane_forecast.cc: GET /v1/forecast (decode -> ForecastService -> render); the
  // ledger's records from an hour on (UsageService::Read: rebuilt first when stale).
  HttpResponse GetForecast(const HttpRequest& r, const Caller& c);
  StatusOr<UsageHours> ReadUsageHours(int64_t from_hour_s);
  Status InitAnomalyMetrics();
  StatusOr<std::vector<metering::SlaObservation>> SlaObservationsOf(const metering::Period& period);
  Status CloseAnomalyHours(int64_t cycle_ms);
  // At start (Create, after UsageService::Rebuild; no lock held): the usage detectors learn the
  // ledger's history and score the catch-up hours (AnomalyService::Warm), the flags persisted as
  // CloseAnomalyHours persists them (the hours before the clock's now); FlaggedUntil: per tenant
  // the newest hour of its `anomaly` events appended at or after since_ms.
  Status WarmAnomalyDetectors();
  StatusOr<std::map<std::string, int64_t>> FlaggedUntil(int64_t since_ms);
  // event_ms: the time of each `anomaly` event appended.
  Status PersistClosedHours(const ClosedHours& closed, int64_t event_ms);
  // The object check of a route (Caller::action, or `action`) on `tenant`: nullopt when allowed,
  // else 404 naming `what` (another subtree's) or 403. Marks the caller scoped.
  // The route wrapper's authorisation (control_plane.cc): nullopt when the handler may run.
  std::optional<HttpResponse> AuthorizeRoute(const ApiRoute& spec, const HttpRequest& r, const Caller& c) const;
  // The same as a Status (OK, NOT_FOUND "<what> not found", PERMISSION_DENIED): for services.
  Status Check(const Caller& c, std::string_view tenant, std::string_view what, Action action,
               Role new_token_role = Role::kTenantUser) const;
  // The caller as the read services (usage, events, invoices, forecasts, anomalies) see it: its
  // principal and Check bound to it (the caller outlives it).
  ReadCaller ReadCallerOf(const Caller& c) const;
  // The caller as the token and tenant services see it: its id and Check bound to it (the
  // caller outlives it).
  TokenCaller TokenCallerOf(const Caller& c) const;
  TenantCaller TenantCallerOf(const Caller& c) const;
  WorkloadCaller WorkloadCallerOf(const Caller& c) const;  // control_plane_workloads.cc
  NodeCaller NodeCallerOf(const Caller& c) const;          // control_plane_nodes.cc
  std::optional<HttpResponse> Scope(const Caller& c, std::string_view tenant, std::string_view what,
                                    std::optional<Action> action = std::nullopt,
                                    Role new_token_role = Role::kTenantUser) const;

  // Usage (control_plane_usage.cc): the metrics' families.
  Status InitUsageMetrics();
  void CountUsage(const store::UsageSampleRecord& s);  // the per-tenant and per-GPU counters of a stored sample
  // Create's last step with a price plan: INVALID_ARGUMENT naming the plan file and every GPU
  // model of the cluster (its nodes and its ledger) the plan has no prices for
  // (control_plane_invoices.cc). Takes mu, then the ledger's lock.
  Status CheckPlanCoversCluster();

  // The loop (control_plane_loop.cc).
  void LoopMain();
  // One cycle: lost nodes, the scheduler's decisions, all persisted in ONE transaction (the steps
  // below, in their order), then CycleCommitted; on a failed write the world is rebuilt (Restore).
  Status CycleOnce();  // mu held
  // The nodes found silent in a cycle, each with the jobs it ran (queued again).
  using LostNodes = std::vector<std::pair<std::string, std::vector<sched::JobId>>>;
  // The cycle's persistence, one step per decision kind, each called inside the cycle's
  // transaction and writing that kind's records and events: a lost node's record (state lost), its
  // jobs requeued and a node.lost event; a preempted job pending again ("preempted"); a started one
  // running with its placement ("placed"); a moved pod's placement ("moved"); a changed wait
  // reason; a rejected job ("rejected"). mu held.
  Status PersistLostNodes(const LostNodes& lost, store::Transaction& tx, int64_t now);
  Status PersistPreemptions(const std::vector<sched::PreemptEvent>& preempted, store::Transaction& tx, int64_t now);
  Status PersistStarts(const std::vector<sched::LiveStart>& started, store::Transaction& tx, int64_t now);
  Status PersistMoves(const std::vector<sched::LiveMove>& moves, store::Transaction& tx, int64_t now);
  Status PersistWaits(const std::vector<sched::LiveWait>& waits, store::Transaction& tx, int64_t now);
  Status PersistRejections(const std::vector<sched::LiveRejection>& rejected, store::Transaction& tx, int64_t now);
  // After the cycle's transaction committed: the start, wait, preemption and rejection metrics and
  // the anomaly service learn what it decided; rejected jobs are forgotten. mu held.
  void CycleCommitted(const sched::LiveCycleResult& r, int64_t now);
  // (PersistRequeue, PersistPending: src/daemon/node_service.h.)
  void UpdateGauges();  // mu held
  // Offers parked jobs to the scheduler again (after a node joined). mu held.
  void Unpark();
  // Queues a known job (Submit, or parked when no node can hold it). mu held.
  void Queue(int64_t id);
};

// The plan of file `path` (nullopt for ""), parsed with the catalog (control_plane_invoices.cc).
StatusOr<std::optional<metering::PricePlan>> LoadPricePlan(const std::string& path, const GpuModelCatalog& catalog);

// Status -> an HTTP error answer (400 names `field` when given).
// One authenticated route of the API: the wrapper (InstallRoutes) authenticates, checks a
// node-bound token, rate-limits, refuses unknown query parameters (those not in `query`),
// authorises `action` as `scope` says, audits refusals, counts metrics; then calls `handler`.
struct ApiRoute {
  std::string_view method;
  std::string_view pattern;
  std::optional<Action> action;  // required: CheckApiRoutes refuses a route without one
  RouteScope scope = RouteScope::kNone;
  HttpResponse (ControlPlane::Impl::*handler)(const HttpRequest&, const Caller&) = nullptr;
  std::vector<std::string> query;
};
// The table (control_plane.cc).
const std::vector<ApiRoute>& ApiRoutes(bool metrics_auth);
// INVALID_ARGUMENT naming the first route without an Action or handler, or with kPathTenant on a
// path without {name}.
Status CheckApiRoutes(const std::vector<ApiRoute>& routes);

HttpResponse ErrorResponse(const Status& status, std::string_view field = "");
// 404 {"error": {"code": "not_found", ...}} for `what`.
HttpResponse NotFound(std::string_view what);

}  // namespace tessera::daemon
