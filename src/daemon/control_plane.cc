#include "tessera/daemon/control_plane.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "src/daemon/api_codec.h"
#include "src/daemon/control_plane_impl.h"
#include "src/daemon/tokens.h"
#include "tessera/api/event_wire.h"

namespace tessera::daemon {

using json = nlohmann::json;

HttpResponse ErrorResponse(const Status& status, std::string_view field) {
  const std::string message(status.message());
  switch (status.code()) {
    case StatusCode::kInvalidArgument: return HttpResponse::Error(400, "invalid_argument", message, field);
    case StatusCode::kNotFound: return HttpResponse::Error(404, "not_found", message);
    case StatusCode::kPermissionDenied: return HttpResponse::Error(403, "forbidden", message);
    case StatusCode::kAlreadyExists: return HttpResponse::Error(409, "already_exists", message);
    case StatusCode::kFailedPrecondition: return HttpResponse::Error(409, "conflict", message);
    case StatusCode::kResourceExhausted: return HttpResponse::Error(429, "too_many_requests", message);
    case StatusCode::kUnavailable: return HttpResponse::Error(503, "unavailable", message);
    default: return HttpResponse::Error(500, "internal", message);
  }
}

HttpResponse NotFound(std::string_view what) {
  return HttpResponse::Error(404, "not_found", std::string(what) + " not found");
}

namespace {

// "2026-12-05T05:50:01Z" (UTC, whole seconds).
std::string UtcTime(int64_t ms) {
  const std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  char buf[32];
  if (gmtime_r(&t, &tm) == nullptr || std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) return "?";
  return buf;
}

// "pid 1234 on host h1, since 2026-12-05T05:50:01Z" (`sep` before "since").
std::string DescribeOwner(const store::OwnerIdentity& o, const char* sep) {
  if (o.pid == 0) return "a process that has not recorded its pid and host yet";
  return "pid " + std::to_string(o.pid) + " on host " + (o.host.empty() ? "?" : o.host) + sep + "since " +
         UtcTime(o.since_ms);
}

std::string HostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "?";
  return buf;
}

}  // namespace

// A SQLite store is refused at once (the file is local: the other serve is on this host, and
// waiting would only hide the misconfiguration); PostgreSQL is meant for a leader and standbys.
Status ControlPlane::Impl::AcquireStore() {
  const store::OwnerIdentity me{static_cast<int64_t>(::getpid()), HostName(), NowMs()};
  bool standby = false;
  for (;;) {
    TESSERA_ASSIGN_OR_RETURN(store::OwnershipClaim claim, db->TryAcquireOwnership(me));
    if (claim.acquired) {
      if (standby) std::fprintf(stderr, "tessera serve: standby: the store is ours now; taking over\n");
      return Status::Ok();
    }
    if (db->Kind() == "sqlite") {
      const std::string path = opt.db.starts_with("sqlite:") ? opt.db.substr(7) : opt.db;
      return AlreadyExistsError("the store " + path + " is owned by another tessera serve (" +
                                DescribeOwner(claim.holder, ", ") + "); only one control plane may own a store");
    }
    // Asked before the standby line too: a caller that will not wait (serve --issue-admin-token)
    // is not said to be waiting.
    if (opt.keep_waiting && !opt.keep_waiting())
      return Status(StatusCode::kCancelled, "stopped while waiting as a standby for the store");
    if (!standby) {
      std::fprintf(stderr, "tessera serve: standby: store owned by %s; waiting\n",
                   DescribeOwner(claim.holder, " ").c_str());
      std::fflush(stderr);
      standby = true;
    }
    for (int waited = 0; waited < opt.standby_poll_ms; waited += 100) {
      if (opt.keep_waiting && !opt.keep_waiting())
        return Status(StatusCode::kCancelled, "stopped while waiting as a standby for the store");
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
}

int64_t ControlPlane::Impl::NowMs() const { return UnixMillis(*opt.clock); }

Status ControlPlane::Impl::Transact(std::string_view operation,
                                    const std::function<Status(store::Transaction&)>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  Status st = db->Transact(fn);
  if (st.ok() && operation != "read" && event_service) event_service->Notify();  // there may be new events
  m.store_latency->Observe({std::string(operation)},
                           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return st;
}

void ControlPlane::Impl::TransactAsync(std::string_view operation, std::function<Status(store::Transaction&)> fn,
                                       std::function<void(Status)> done) {
  {
    std::lock_guard<std::mutex> lock(async_mu);
    ++async_pending;
  }
  const auto t0 = std::chrono::steady_clock::now();
  db->TransactAsync(std::move(fn), [this, t0, op = std::string(operation), done = std::move(done)](Status st) {
    if (st.ok() && op != "read" && event_service) event_service->Notify();
    m.store_latency->Observe({op}, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    done(std::move(st));
    std::lock_guard<std::mutex> lock(async_mu);
    if (--async_pending == 0) async_cv.notify_all();
  });
}

Status ControlPlane::Impl::AuditAlone(const Caller& who, std::string action, std::string target, int code) {
  const int64_t now = NowMs();
  return Transact("audit", [&](store::Transaction& tx) {
    return tx.AppendAudit({now, who.token_id, std::move(action), std::move(target), std::to_string(code)}).status();
  });
}

void ControlPlane::Impl::Wake() {
  {
    std::lock_guard<std::mutex> lock(mu);
    wake = true;
  }
  wake_cv.notify_one();
}

Status ControlPlane::Impl::InitMetrics() {
  const std::vector<double> api_bounds = {0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1};
  const std::vector<double> wait_bounds = {1, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600, 24 * 3600};
  TESSERA_ASSIGN_OR_RETURN(m.requests, registry.AddCounter("tessera_api_requests_total",
                                                           "API requests by route and status code.", {"route", "code"}));
  TESSERA_ASSIGN_OR_RETURN(m.latency, registry.AddHistogram("tessera_api_request_duration_seconds",
                                                            "API request latency, seconds.", {"route"}, api_bounds));
  TESSERA_ASSIGN_OR_RETURN(m.store_latency,
                           registry.AddHistogram("tessera_store_transaction_duration_seconds",
                                                 "Store transaction latency (commit included), seconds.",
                                                 {"operation"}, api_bounds));
  TESSERA_ASSIGN_OR_RETURN(m.admissions, registry.AddCounter("tessera_admissions_total",
                                                             "Workloads admitted to the queue.", {"tenant", "qos"}));
  TESSERA_ASSIGN_OR_RETURN(m.rejections, registry.AddCounter("tessera_rejections_total",
                                                             "Workloads refused at submit or rejected later.",
                                                             {"reason"}));
  TESSERA_ASSIGN_OR_RETURN(m.preemptions, registry.AddCounter("tessera_preemptions_total",
                                                              "Preempted workloads by the victim's tenant and cause.",
                                                              {"tenant", "cause"}));
  TESSERA_ASSIGN_OR_RETURN(m.starts, registry.AddCounter("tessera_workload_starts_total", "Workloads placed.", {"tenant"}));
  TESSERA_ASSIGN_OR_RETURN(m.queue_length, registry.AddGauge("tessera_queue_length", "Pending workloads.",
                                                             {"tenant", "qos"}));
  TESSERA_ASSIGN_OR_RETURN(m.wait_seconds, registry.AddHistogram("tessera_wait_duration_seconds",
                                                                 "Submit-to-placed wait, seconds.", {"qos"}, wait_bounds));
  TESSERA_ASSIGN_OR_RETURN(m.tenant_gpu_milli, registry.AddGauge("tessera_tenant_allocated_gpu_milli",
                                                                 "GPU milli allocated to a tenant's subtree now.",
                                                                 {"tenant"}));
  TESSERA_ASSIGN_OR_RETURN(m.tenant_guaranteed_milli, registry.AddGauge("tessera_tenant_guaranteed_gpu_milli",
                                                                        "A tenant's guaranteed GPU milli.", {"tenant"}));
  TESSERA_ASSIGN_OR_RETURN(m.gpu_allocated_milli, registry.AddGauge("tessera_gpu_allocated_milli",
                                                                    "GPU milli allocated on one GPU.", {"node", "gpu"}));
  TESSERA_ASSIGN_OR_RETURN(m.nodes, registry.AddGauge("tessera_nodes", "Nodes by state.", {"state"}));
  TESSERA_ASSIGN_OR_RETURN(m.cycles, registry.AddCounter("tessera_scheduling_cycles_total", "Scheduling cycles run.", {}));
  TESSERA_ASSIGN_OR_RETURN(m.cycle_seconds,
                           registry.AddHistogram("tessera_scheduling_cycle_duration_seconds",
                                                 "A scheduling cycle with its decisions persisted, seconds.", {},
                                                 api_bounds));
  return InitUsageMetrics();
}

Status ControlPlane::Impl::Bootstrap() {
  const int64_t now = NowMs();
  std::string token = opt.bootstrap_token;
  if (!token.empty() && token.size() < 16)
    return InvalidArgumentError("bootstrap token: at least 16 characters");
  std::vector<store::TokenRecord> all;
  const Status written = Transact("bootstrap", [&](store::Transaction& tx) -> Status {
    TESSERA_ASSIGN_OR_RETURN(all, tx.ListTokens());
    if (!all.empty()) return Status::Ok();
    bool generated = false;
    if (token.empty()) {
      TESSERA_ASSIGN_OR_RETURN(token, NewToken());
      generated = true;
    }
    store::TokenRecord rec;
    rec.id = "bootstrap";
    rec.hash_hex = TokenHash(token);
    rec.role = "admin";
    rec.created_ms = now;
    TESSERA_RETURN_IF_ERROR(tx.CreateToken(rec));
    TESSERA_RETURN_IF_ERROR(tx.AppendAudit({now, "bootstrap", "token.create", "tokens/bootstrap", "201"}).status());
    all.push_back(rec);
    if (generated) generated_token = token;
    return Status::Ok();
  });
  if (!written.ok()) return written;
  token_service->Load(all);
  return Status::Ok();
}

ParentOf ControlPlane::Impl::Parents() const { return tenant_service->Parents(); }

std::optional<GpuModelId> ControlPlane::Impl::DefaultModel() const {
  std::map<uint32_t, int> gpus_of;
  for (const auto& [name, n] : nodes)
    for (int g = 0; g < n.spec.gpu_count; ++g) ++gpus_of[placement::GpuModelOf(n.spec, g).value()];
  std::optional<GpuModelId> best;
  int most = 0;
  for (const auto& [model, count] : gpus_of)
    if (count > most) {
      most = count;
      best = GpuModelId{model};
    }
  return best;
}

StatusOr<Caller> ControlPlane::Impl::Authenticate(const HttpRequest& r) {
  const std::string token = BearerToken(r.Header("authorization"));
  if (token.empty()) return Status(StatusCode::kUnauthenticated, "missing 'Authorization: Bearer <token>'");
  TESSERA_ASSIGN_OR_RETURN(const store::TokenRecord rec, token_service->Authenticate(token));
  StatusOr<Role> role = ParseRole(rec.role);
  if (!role.ok()) return Status(StatusCode::kUnauthenticated, "the token's role is unknown");
  return Caller{{*role, rec.tenant}, rec.id, rec.node};
}

HttpResponse ControlPlane::Impl::Healthz(const HttpRequest&) { return HttpResponse::Json(200, R"({"status":"ok"})"); }

// The dashboard needs no token to load: it holds no data, and asks for a token before any /v1 call.
HttpResponse ControlPlane::Impl::UiRedirect(const HttpRequest& r) {
  if (!ui) return UiFile(r);
  HttpResponse resp;
  resp.status = 308;
  resp.content_type = "text/plain; charset=utf-8";
  resp.body = "the dashboard is at /ui/\n";
  resp.headers.push_back({"Location", "/ui/"});
  return resp;
}

HttpResponse ControlPlane::Impl::UiFile(const HttpRequest& r) {
  if (!ui)
    return HttpResponse::Error(404, "no_dashboard",
                               "this tessera serve has no dashboard: start it with --ui-dir DIR (or ui_dir in "
                               "--config) naming a built bundle; a build with -DTESSERA_UI=ON (npm needed) makes "
                               "one and installs it in share/tessera/ui");
  auto it = r.path_params.find("file");
  return ui->Serve(it == r.path_params.end() ? std::string_view() : std::string_view(it->second));
}

HttpResponse ControlPlane::Impl::Readyz(const HttpRequest&) {
  // A read through the store: it answers, and its schema is there.
  Status st = db->Transact([](store::Transaction& tx) { return tx.ListAudit(0, 1).status(); });
  bool healthy;
  bool running;
  {
    std::lock_guard<std::mutex> lock(mu);
    healthy = loop_healthy;
    running = !opt.run_loop || loop.joinable();
  }
  json j = {{"store", st.ok() ? "ok" : std::string(st.message())},
            {"scheduler", !running ? "stopped" : healthy ? "ok" : "recovering"}};
  const bool ready = st.ok() && healthy && running;
  j["status"] = ready ? "ready" : "not ready";
  return HttpResponse::Json(ready ? 200 : 503, j.dump());
}

HttpResponse ControlPlane::Impl::Metrics(const HttpRequest&) {
  HttpResponse r;
  r.status = 200;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.body = registry.Render();
  return r;
}

HttpResponse ControlPlane::Impl::MetricsWithToken(const HttpRequest& r, const Caller&) { return Metrics(r); }

HttpResponse ControlPlane::Impl::ListAudit(const HttpRequest& r, const Caller& c) {
  // The route takes after and limit only (the wrapper refuses any other parameter).
  std::string field;
  StatusOr<ReadQuery> q = ParseReadQuery(r.query, &field);
  if (!q.ok()) return ErrorResponse(q.status(), field);
  StatusOr<std::vector<store::AuditRecord>> records =
      audit_service->List(ReadCallerOf(c), {q->after.value_or(0), q->limit.value_or(100)});
  if (!records.ok()) return ErrorResponse(records.status());
  json list = json::array();
  for (const store::AuditRecord& a : *records)
    list.push_back({{"seq", a.seq}, {"time_ms", a.time_ms}, {"actor", a.actor}, {"action", a.action},
                    {"target", a.target}, {"result", a.result}, {"hash", a.hash}});
  return HttpResponse::Json(200, json{{"records", list}}.dump());
}

namespace {

// The audit action of a state-changing route, as the handlers record their successes ("" for a
// route that changes nothing).
std::string AuditActionOf(const std::string& method, const std::string& pattern) {
  static const std::map<std::string, std::string> kActions = {
      {"POST /v1/tenants", "tenant.create"},
      {"PATCH /v1/tenants/{name}", "tenant.update"},
      {"DELETE /v1/tenants/{name}", "tenant.delete"},
      {"POST /v1/tokens", "token.create"},
      {"DELETE /v1/tokens/{id}", "token.revoke"},
      {"POST /v1/workloads", "workload.create"},
      {"DELETE /v1/workloads/{id}", "workload.cancel"},
      {"PATCH /v1/workloads/{id}", "workload.update"},
      {"DELETE /v1/nodes/{name}", "node.remove"},
      {"POST /v1/nodes/{name}/cordon", "node.cordon"},
      {"POST /v1/nodes/{name}/uncordon", "node.uncordon"},
      {"POST /v1/nodes/{name}/drain", "node.drain"},
      {"POST /v1/nodes/{name}/register", "node.register"},
      {"POST /v1/nodes/{name}/heartbeat", "node.heartbeat"},
      {"POST /v1/nodes/{name}/usage", "node.usage"},
  };
  auto it = kActions.find(method + " " + pattern);
  return it == kActions.end() ? "" : it->second;
}

}  // namespace

// Which refused or failed calls the audit log records, and how (docs/api.md, "Audit log"): every
// state-changing call (POST, PATCH, DELETE) of an authenticated caller answered 4xx or 5xx, with
// result "<status> <error code>" ("403 forbidden", "409 conflict"), except
//   429  a rate-limited call: the limit sheds load, and a store write per refusal would undo it;
//   a node agent's own endpoints (register, heartbeat, usage) refused for anything but 403: an
//        agent retries every few seconds, so a removed node's 404 or a bad sample's 400 would
//        fill the log; a 403 (a node-bound token acting for another node) is recorded.
// Unauthenticated calls (401) never get here: nobody can be named, and anyone could flood the
// chain with them. The record's target is the collection or the path's object ("tenants",
// "tenants/ranking", "nodes/node-1").
void ControlPlane::Impl::AuditRefused(const Caller& c, const HttpRequest& r, const std::string& pattern,
                                      const HttpResponse& resp) {
  if (resp.status < 400 || resp.status == 429) return;
  const std::string action = AuditActionOf(r.method, pattern);
  if (action.empty()) return;
  const bool agent_endpoint =
      action == "node.register" || action == "node.heartbeat" || action == "node.usage";
  if (agent_endpoint && c.principal.role == Role::kNodeAgent && resp.status != 403) return;
  std::string target = pattern.substr(4);  // after "/v1/"
  target = target.substr(0, target.find('/'));
  if (!r.path_params.empty()) target += "/" + r.path_params.begin()->second;
  std::string result = std::to_string(resp.status);
  if (StatusOr<api::ErrorEnvelope> e = api::DecodeErrorEnvelope(resp.body, nullptr); e.ok())
    result += " " + e->code;
  // Best effort: the answer stands whether or not its record could be written (a store that
  // failed the call itself will likely fail this too).
  const int64_t now = NowMs();
  (void)Transact("audit", [&](store::Transaction& tx) {
    return tx.AppendAudit({now, c.token_id, action, target, result}).status();
  });
}

namespace {

// The first query parameter of `r` that is not in `known`, or "" when there is none.
std::string UnknownQueryParameter(const HttpRequest& r, const std::vector<std::string>& known) {
  for (const auto& [name, value] : r.query)
    if (std::find(known.begin(), known.end(), name) == known.end()) return name.empty() ? "(empty name)" : name;
  return "";
}

}  // namespace

// The API, one line per route: method, path, the Action it is authorised by and how (RouteScope),
// the handler, the query parameters it reads. Authentication, the node-bound token, the rate
// limit, strict query parameters, authorisation, the refusal audit and metrics are the wrapper's
// (InstallRoutes), so that no handler can forget one.
const std::vector<ApiRoute>& ApiRoutes(bool metrics_auth) {
  using I = ControlPlane::Impl;
  using enum RouteScope;
  static const std::vector<ApiRoute> kRoutes = {
      {"POST", "/v1/tenants", Action::kCreateTenant, kObject, &I::CreateTenant, {}},
      {"GET", "/v1/tenants", Action::kListTenants, kNone, &I::ListTenants, {}},
      {"GET", "/v1/tenants/{name}", Action::kReadTenant, kPathTenant, &I::GetTenant, {}},
      {"PATCH", "/v1/tenants/{name}", Action::kChangeQuota, kPathTenant, &I::PatchTenant, {}},
      {"DELETE", "/v1/tenants/{name}", Action::kDeleteTenant, kPathTenant, &I::DeleteTenant, {}},
      {"POST", "/v1/tokens", Action::kCreateToken, kObject, &I::CreateToken, {}},
      {"GET", "/v1/tokens", Action::kListTokens, kNone, &I::ListTokens, {}},
      {"DELETE", "/v1/tokens/{id}", Action::kRevokeToken, kObject, &I::RevokeToken, {}},
      {"POST", "/v1/workloads", Action::kSubmitWorkload, kObject, &I::SubmitWorkload, {}},
      {"GET", "/v1/workloads", Action::kReadWorkload, kObject, &I::ListWorkloads, {"tenant", "state", "limit", "continue"}},
      {"GET", "/v1/workloads/{id}", Action::kReadWorkload, kObject, &I::GetWorkload, {}},
      {"DELETE", "/v1/workloads/{id}", Action::kCancelWorkload, kObject, &I::CancelWorkload, {}},
      {"PATCH", "/v1/workloads/{id}", Action::kChangeWorkload, kObject, &I::PatchWorkload, {}},
      {"GET", "/v1/nodes", Action::kReadNodes, kNone, &I::ListNodes, {}},
      {"GET", "/v1/nodes/{name}", Action::kReadNodes, kNone, &I::GetNode, {}},
      {"DELETE", "/v1/nodes/{name}", Action::kManageNodes, kNone, &I::RemoveNode, {}},
      {"POST", "/v1/nodes/{name}/cordon", Action::kManageNodes, kNone, &I::NodeAction, {}},
      {"POST", "/v1/nodes/{name}/uncordon", Action::kManageNodes, kNone, &I::NodeAction, {}},
      {"POST", "/v1/nodes/{name}/drain", Action::kManageNodes, kNone, &I::NodeAction, {}},
      {"POST", "/v1/nodes/{name}/register", Action::kNodeAgent, kNone, &I::RegisterNode, {}},
      {"POST", "/v1/nodes/{name}/heartbeat", Action::kNodeAgent, kNone, &I::Heartbeat, {}},
      {"GET", "/v1/nodes/{name}/desired", Action::kNodeAgent, kNone, &I::DesiredState, {}},
      {"POST", "/v1/nodes/{name}/usage", Action::kNodeAgent, kNone, &I::PostUsage, {}},
      {"GET", "/v1/usage", Action::kReadUsage, kObject, &I::GetUsage, {"tenant", "from", "to"}},
      {"GET", "/v1/history", Action::kReadUsage, kObject, &I::GetHistory, {"tenant", "from", "step"}},
      {"GET", "/v1/invoices", Action::kReadInvoices, kObject, &I::GetInvoices, {"tenant", "period", "format"}},
      {"GET", "/v1/anomalies", Action::kReadUsage, kObject, &I::GetAnomalies, {"tenant", "from", "to"}},
      {"GET", "/v1/forecast", Action::kReadUsage, kObject, &I::GetForecast, {"tenant", "horizon"}},
      {"GET", "/v1/audit", Action::kReadAudit, kNone, &I::ListAudit, {"after", "limit"}},
      {"GET", "/v1/events", Action::kReadEvents, kNone, &I::StreamEvents, {"tenant", "workload", "after"}},
  };
  static const std::vector<ApiRoute> kWithMetrics = [] {
    std::vector<ApiRoute> all = kRoutes;
    all.push_back({"GET", "/metrics", Action::kReadMetrics, RouteScope::kNone, &I::MetricsWithToken, {}});
    return all;
  }();
  return metrics_auth ? kWithMetrics : kRoutes;
}

Status CheckApiRoutes(const std::vector<ApiRoute>& routes) {
  for (const ApiRoute& r : routes) {
    const std::string route = std::string(r.method) + " " + std::string(r.pattern);
    if (!r.action) return InvalidArgumentError("route " + route + " has no Action: the wrapper could not authorise it");
    if (!r.handler) return InvalidArgumentError("route " + route + " has no handler");
    if (r.scope == RouteScope::kPathTenant && r.pattern.find("{name}") == std::string_view::npos)
      return InvalidArgumentError("route " + route + " is authorised by the tenant of its path, which names none");
  }
  return Status::Ok();
}

Status ControlPlane::Impl::Check(const Caller& c, std::string_view tenant, std::string_view what, Action action,
                                 Role new_token_role) const {
  c.scoped = true;
  const Decision d = Authorize(c.principal, action, tenant, Parents(), new_token_role);
  if (d == Decision::kAllow) return Status::Ok();
  if (d == Decision::kNotFound) return NotFoundError(std::string(what) + " not found");
  return Status(StatusCode::kPermissionDenied, "this token's role may not " + std::string(ActionText(action)));
}

ReadCaller ControlPlane::Impl::ReadCallerOf(const Caller& c) const {
  return {c.principal, [this, &c](Action action, std::string_view tenant, std::string_view what) {
            return Check(c, tenant, what, action);
          }};
}

std::optional<HttpResponse> ControlPlane::Impl::Scope(const Caller& c, std::string_view tenant, std::string_view what,
                                                      std::optional<Action> action, Role new_token_role) const {
  const Status st = Check(c, tenant, what, action.value_or(c.action), new_token_role);
  if (st.ok()) return std::nullopt;
  return ErrorResponse(st);
}

Status ControlPlane::Impl::InstallRoutes() {
  using Open = HttpResponse (Impl::*)(const HttpRequest&);
  const std::vector<ApiRoute>& routes = ApiRoutes(opt.metrics_auth);
  TESSERA_RETURN_IF_ERROR(CheckApiRoutes(routes));
  auto observe = [this](const std::string& route, const HttpResponse& resp, std::chrono::steady_clock::time_point t0) {
    m.requests->Inc({route, std::to_string(resp.status)});
    m.latency->Observe({route}, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  };
  auto open = [&](const std::string& method, const std::string& pattern, Open fn) {
    const std::string route = method + " " + pattern;
    (void)http->Route(method, pattern, [this, fn, route, observe](const HttpRequest& r) {
      const auto t0 = std::chrono::steady_clock::now();
      HttpResponse resp = (this->*fn)(r);
      observe(route, resp, t0);
      return resp;
    });
  };
  open("GET", "/healthz", &Impl::Healthz);
  open("GET", "/readyz", &Impl::Readyz);
  open("GET", "/ui", &Impl::UiRedirect);
  open("GET", "/ui/{file...}", &Impl::UiFile);
  if (!opt.metrics_auth) open("GET", "/metrics", &Impl::Metrics);
  for (const ApiRoute& spec : routes) {
    const std::string method(spec.method), pattern(spec.pattern);
    const std::string route = method + " " + pattern;
    // Node-agent calls on a node's routes are limited per node (the node of the path), not per
    // token: a fleet shares one node-agent token, and each agent's own cadence is what has to fit.
    // A token bound to a node acts for that node only (403 naming it), before the limit counts.
    // Query parameters are strict on /v1: each route lists the ones it reads, and any other is a
    // 400 naming it (a misspelt "?tenat=a" must not silently list every tenant's workloads).
    const bool node_route = pattern.starts_with("/v1/nodes/{name}");
    const bool strict_query = pattern.starts_with("/v1/");
    std::string takes;
    for (const std::string& p : spec.query) takes += (takes.empty() ? "" : ", ") + p;
    takes = route + (takes.empty() ? " takes no query parameters" : " takes: " + takes);
    (void)http->Route(method, pattern, [this, spec, route, pattern, node_route, strict_query, takes,
                                        observe](const HttpRequest& r) {
      const auto t0 = std::chrono::steady_clock::now();
      HttpResponse resp;
      StatusOr<Caller> c = Authenticate(r);
      std::string key;
      std::string whose = "this token's rate limit";
      if (c.ok()) {
        c->action = *spec.action;
        key = "token/" + c->token_id;
        if (c->principal.role == Role::kNodeAgent && node_route) {
          const std::string& node = r.path_params.at("name");
          key = "node/" + node;
          whose = "the rate limit of node '" + node + "'";
        }
      }
      if (!c.ok()) {
        resp = HttpResponse::Error(401, "unauthenticated", c.status().message());
        resp.headers.push_back({"WWW-Authenticate", "Bearer"});
      } else if (!c->node.empty() && node_route && r.path_params.at("name") != c->node) {
        resp = HttpResponse::Error(403, "forbidden",
                                   "this token is bound to node '" + c->node + "'; it may not act for node '" +
                                       r.path_params.at("name") + "'");
      } else if (const auto wait = limiter->Admit(key, std::chrono::steady_clock::now()); wait.count() > 0) {
        // Retry-After takes whole seconds; the message says the same number.
        const std::string after_s = std::to_string((wait.count() + 999) / 1000);
        resp = HttpResponse::Error(429, "too_many_requests", "over " + whose + "; retry after " + after_s + " s");
        resp.headers.push_back({"Retry-After", after_s});
      } else if (const std::string unknown = strict_query ? UnknownQueryParameter(r, spec.query) : std::string();
                 !unknown.empty()) {
        resp = HttpResponse::Error(400, "invalid_argument",
                                   "unknown query parameter '" + unknown + "' (" + takes + ")", unknown);
      } else if (std::optional<HttpResponse> denied = AuthorizeRoute(spec, r, *c)) {
        resp = *std::move(denied);
      } else {
        resp = (this->*spec.handler)(r, *c);
        if (spec.scope == RouteScope::kObject && !c->scoped && (resp.defer || resp.status < 400)) {
          // A handler that answered without checking the object's tenant: refused, loudly.
          std::fprintf(stderr, "tessera serve: %s answered without its tenant check (Impl::Scope): refused\n",
                       route.c_str());
          resp = HttpResponse::Error(500, "internal", route + ": the handler did not authorise the object");
        }
      }
      if (resp.defer && c.ok())  // counted, and audited if refused, when its answer is made
        return ObserveDeferred(std::move(resp), [this, observe, route, pattern, t0, caller = *c,
                                                 req = r](const HttpResponse& made) {
          AuditRefused(caller, req, pattern, made);
          observe(route, made, t0);
        });
      if (c.ok()) AuditRefused(*c, r, pattern, resp);
      observe(route, resp, t0);
      return resp;
    });
  }
  return Status::Ok();
}

// The wrapper's authorisation of `spec.action` (see RouteScope): nullopt when the handler may run.
std::optional<HttpResponse> ControlPlane::Impl::AuthorizeRoute(const ApiRoute& spec, const HttpRequest& r,
                                                               const Caller& c) const {
  const Action a = *spec.action;
  const auto forbidden = [a] {
    return HttpResponse::Error(403, "forbidden", "this token's role may not " + std::string(ActionText(a)));
  };
  switch (spec.scope) {
    case RouteScope::kNone:
      if (Authorize(c.principal, a, "", Parents()) != Decision::kAllow) return forbidden();
      return std::nullopt;
    case RouteScope::kPathTenant: {
      const std::string& name = r.path_params.at("name");
      const Decision d = Authorize(c.principal, a, name, Parents());
      if (d == Decision::kNotFound) return NotFound("tenant '" + name + "'");
      if (d != Decision::kAllow) return forbidden();
      return std::nullopt;
    }
    case RouteScope::kObject:
      if (!RoleMayEver(c.principal.role, a)) return forbidden();
      return std::nullopt;
  }
  return forbidden();
}

ControlPlane::ControlPlane(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ControlPlane::~ControlPlane() { Stop(); }

StatusOr<std::unique_ptr<ControlPlane>> ControlPlane::Create(ControlPlaneOptions options) {
  if (options.node_timeout_s < 1) return InvalidArgumentError("node timeout: at least 1 s");
  if (!options.clock) return InvalidArgumentError("clock: none given (the default is the system clock)");
  if (options.events_ping_interval_ms < 10 || options.events_poll_interval_ms < 10)
    return InvalidArgumentError("event stream ping and poll intervals: at least 10 ms");
  if (options.cycle_interval_ms < 10) return InvalidArgumentError("cycle interval: at least 10 ms");
  if (options.standby_poll_ms < 100) return InvalidArgumentError("standby poll interval: at least 100 ms");
  if (!(options.rate_per_s > 0) || options.rate_burst < 1)
    return InvalidArgumentError("rate limit: rate > 0 and burst >= 1 requests");
  auto impl = std::make_unique<Impl>();
  impl->opt = std::move(options);
  TESSERA_ASSIGN_OR_RETURN(impl->price_plan, LoadPricePlan(impl->opt.price_plan, impl->catalog));
  if (!impl->opt.ui_dir.empty()) {
    StatusOr<StaticBundle> ui = StaticBundle::Load(impl->opt.ui_dir);
    if (!ui.ok()) return InvalidArgumentError("--ui-dir (ui_dir): " + std::string(ui.status().message()));
    impl->ui = std::move(*ui);
  }
  TESSERA_RETURN_IF_ERROR(impl->InitMetrics());
  TESSERA_RETURN_IF_ERROR(impl->InitAnomalyMetrics());
  TESSERA_ASSIGN_OR_RETURN(impl->db, store::Open(impl->opt.db));
  Impl* p = impl.get();
  const auto transact = [p](std::string_view op, const std::function<Status(store::Transaction&)>& fn) {
    return p->Transact(op, fn);
  };
  TenantWorld world;
  world.mu = &p->mu;
  world.set_tree = [p](sched::TenantTree tree) { return p->live->SetTenants(std::move(tree)); };
  world.changed = [p] {
    p->UpdateGauges();
    p->wake = true;
    p->wake_cv.notify_one();
  };
  world.usage = [p](std::string_view tenant) -> std::optional<std::map<std::string, int64_t>> {
    StatusOr<sched::Resources> use = p->live->usage(std::string(tenant));
    if (!use.ok()) return std::nullopt;
    const sched::ResourceSpace& space = p->live->tenants().space();
    std::map<std::string, int64_t> out;
    for (int dim = 0; dim < space.dims(); ++dim) out[std::string(space.DimName(dim))] = (*use)[dim];
    return out;
  };
  world.dominant_share = [p](std::string_view tenant) -> std::optional<double> {
    StatusOr<double> d = p->live->dominant_share(std::string(tenant));
    return d.ok() ? std::optional<double>(*d) : std::nullopt;
  };
  // The services read the clock the options own (Impl keeps opt, so it outlives them).
  impl->tenant_service = std::make_unique<TenantService>(transact, *p->opt.clock, std::move(world), impl->catalog);
  impl->workload_service = impl->MakeWorkloadService();
  impl->node_service = impl->MakeNodeService();
  impl->audit_service = std::make_unique<AuditService>(transact);
  impl->history_service =
      std::make_unique<HistoryService>(impl->history, p->tenant_service->Parents(), *p->opt.clock);
  impl->invoice_service = std::make_unique<InvoiceService>(
      impl->price_plan ? &*impl->price_plan : nullptr, impl->opt.price_plan, impl->catalog, *p->opt.clock,
      p->tenant_service->Parents(), [p](const metering::Period& period) { return p->ReadLedger(period); });
  impl->anomaly_service =
      std::make_unique<AnomalyService>(impl->opt.anomaly, impl->NowMs() / 1000, p->tenant_service->Parents());
  impl->forecast_service =
      std::make_unique<ForecastService>(*p->opt.clock, p->tenant_service->Parents(),
                                        [p](int64_t from_hour_s) { return p->ReadUsageHours(from_hour_s); });
  impl->usage_service = std::make_unique<UsageService>(
      transact, p->tenant_service->Parents(), [p](const store::UsageSampleRecord& s) {
        p->CountUsage(s);
        p->anomaly_service->ObserveUsage(s.tenant, s.start_s, s.gpu_milli_s_allocated, s.gpu_milli_s_used);
      });
  impl->token_service = std::make_unique<TokenService>(
      transact, *p->opt.clock,
      [p](std::string_view tenant, const std::function<Status()>& write) {
        return p->tenant_service->WhileExists(tenant, write);
      });
  if (impl->opt.own_store) TESSERA_RETURN_IF_ERROR(impl->AcquireStore());
  EventFeedOptions fo;
  fo.ping_interval_ms = impl->opt.events_ping_interval_ms;
  fo.poll_interval_ms = impl->opt.events_poll_interval_ms;
  // PostgreSQL may commit a lower event id after a higher one (event_feed.h); SQLite never does.
  if (impl->db->Kind() != "sqlite" && fo.gap_grace_ms == 0) fo.gap_grace_ms = 2000;
  impl->event_service = std::make_unique<EventService>(*impl->db, fo, p->tenant_service->Parents());
  impl->limiter = std::make_unique<RateLimiter>(
      RateLimitOptions{.rate_per_s = impl->opt.rate_per_s, .burst = impl->opt.rate_burst});
  HttpServerOptions ho;
  ho.listen_host = impl->opt.listen_host;
  ho.listen_port = impl->opt.listen_port;
  ho.threads = impl->opt.http_threads;
  ho.tls_cert_file = impl->opt.tls_cert_file;
  ho.tls_key_file = impl->opt.tls_key_file;
  impl->http = std::make_unique<HttpServer>(ho);
  TESSERA_RETURN_IF_ERROR(impl->Bootstrap());
  {
    std::lock_guard<std::mutex> lock(impl->mu);
    TESSERA_RETURN_IF_ERROR(impl->Restore());
  }
  // The ledger from the stored samples, each counted into the usage metrics.
  TESSERA_RETURN_IF_ERROR(impl->usage_service->Rebuild([p](const store::UsageSampleRecord& s) { p->CountUsage(s); }));
  TESSERA_RETURN_IF_ERROR(impl->WarmAnomalyDetectors());
  TESSERA_RETURN_IF_ERROR(impl->LoadHistory());
  TESSERA_RETURN_IF_ERROR(impl->CheckPlanCoversCluster());
  TESSERA_RETURN_IF_ERROR(impl->InstallRoutes());
  return std::unique_ptr<ControlPlane>(new ControlPlane(std::move(impl)));
}

const std::string& ControlPlane::generated_bootstrap_token() const { return impl_->generated_token; }

Status ControlPlane::Start() {
  TESSERA_RETURN_IF_ERROR(impl_->http->Start());
  impl_->event_service->Start();
  if (impl_->opt.run_loop && !impl_->loop.joinable()) {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = false;
    impl_->loop = std::thread([this] { impl_->LoopMain(); });
  }
  return Status::Ok();
}

void ControlPlane::Stop() {
  if (!impl_) return;
  impl_->event_service->Stop();  // first: its streams live on the server's threads
  impl_->http->Stop();
  {
    // Queued store work still calls back into this plane (its answers are dropped now).
    std::unique_lock<std::mutex> lock(impl_->async_mu);
    impl_->async_cv.wait(lock, [&] { return impl_->async_pending == 0; });
  }
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->wake_cv.notify_all();
  if (impl_->loop.joinable()) impl_->loop.join();
}

uint16_t ControlPlane::port() const { return impl_->http->port(); }

HttpResponse ControlPlane::Handle(HttpRequest request) const { return impl_->http->Handle(std::move(request)); }

Status ControlPlane::RunCycle() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->CycleOnce();
}

}  // namespace tessera::daemon
