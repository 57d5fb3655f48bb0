// /v1/workloads: submit (with Idempotency-Key), read, list (paginated), cancel.
#include <charconv>

#include <nlohmann/json.hpp>

#include "src/daemon/api_codec.h"
#include "src/daemon/control_plane_impl.h"
#include "tessera/api/json_fields.h"
#include "tessera/api/workload_wire.h"

namespace tessera::daemon {

using json = nlohmann::json;

namespace {

// The view of a stored workload (api::WorkloadView: one codec for the daemon and its clients).
api::WorkloadView WorkloadView(const store::WorkloadRecord& w) {
  json spec = json::parse(w.spec_json, nullptr, false);
  if (spec.is_discarded() || !spec.is_object()) spec = json::object();
  api::WorkloadView v;
  v.id = w.id;
  v.tenant = w.tenant;
  // The store keeps the state's name; one it does not know (a newer schema's) shows as failed.
  v.state = api::ParseWorkloadState(w.state).value_or(api::WorkloadState::kFailed);
  // The request as stored (its canonical encoding); a record without one shows the tenant only.
  const json request = spec.value("request", json::object());
  StatusOr<api::WorkloadRequest> stored = api::DecodeWorkloadRequest(request.dump(), nullptr);
  if (stored.ok()) v.request = *std::move(stored);
  else v.request.tenant = w.tenant;
  v.qos = v.request.qos.empty() ? std::string("Burstable") : v.request.qos;
  v.priority = v.request.priority;
  v.name = v.request.name;
  v.mode = spec.value("mode", std::string());
  v.mode_reason = spec.value("mode_reason", std::string());
  v.created_ms = w.created_ms;
  v.updated_ms = w.updated_ms;
  v.version = w.version;
  if (w.state == kPending || w.state == kRejected) v.wait_reason = w.wait_reason;
  if (w.state == kFailed) v.reason = w.wait_reason;
  if ((w.state == kCompleted || w.state == kFailed) && spec.contains("exit_code") && spec["exit_code"].is_number_integer())
    v.exit_code = spec["exit_code"].get<int64_t>();
  v.start_ms = w.start_ms;
  if (!w.placement_json.empty()) {
    if (StatusOr<StoredPlacement> p = ParsePlacementJson(w.placement_json); p.ok()) {
      for (const sched::PodPlacement& pod : p->pods) {
        api::WorkloadPod one{pod.node, {}, pod.mig_start >= 0 ? pod.mig_start : -1};
        for (int g = 0; g < placement::kMaxGpusPerNode; ++g)
          if (pod.gpus >> g & 1) one.gpus.push_back(g);
        v.pods.push_back(std::move(one));
      }
    }
  }
  return v;
}

}  // namespace

void ControlPlane::Impl::Queue(int64_t id) {
  auto it = jobs.find(id);
  if (it == jobs.end()) return;
  sched::LiveJob job = it->second.shape.job;
  job.id = id;
  Status st = live->Submit(job);
  if (st.ok()) return;
  if (st.code() == StatusCode::kFailedPrecondition) {
    parked.insert(id);
    return;
  }
  // The world changed between the check and the queueing (a quota was lowered): rejected.
  anomaly_service->ObserveRefusal(it->second.shape.request.tenant, NowMs() / 1000);
  jobs.erase(it);
  m.rejections->Inc({"quota"});
  const int64_t now = NowMs();
  (void)Transact("reject", [&](store::Transaction& tx) -> Status {
    TESSERA_ASSIGN_OR_RETURN(store::WorkloadRecord w, tx.GetWorkload(id));
    w.state = std::string(kRejected);
    w.wait_reason = std::string(st.message());
    w.updated_ms = now;
    TESSERA_RETURN_IF_ERROR(tx.UpdateWorkload(w).status());
    return tx.AppendWorkloadEvent({0, id, now, "rejected", std::string(st.message())}).status();
  });
}

void ControlPlane::Impl::Unpark() {
  std::vector<int64_t> ids(parked.begin(), parked.end());
  parked.clear();
  for (int64_t id : ids) Queue(id);
}

// A submit in three steps, so that no HTTP thread waits for the group commit:
//   1. on the HTTP thread: decode, authorise, check against the world (AdmitSubmit, under mu);
//   2. in the store's batch (TransactAsync): the stored answer of its Idempotency-Key, if any, is
//      the answer (whatever step 1 found: a retry gets the first answer); else, unless step 1
//      refused it, the workload, its key's answer and the audit record are written;
//   3. once that commit is durable, back on an HTTP thread: the job is queued (under mu) and
//      201 answered.
// E.g. 16 clients submitting at once: their callbacks share one or two commits (one fsync each)
// while the HTTP threads go on reading requests.
HttpResponse ControlPlane::Impl::SubmitWorkload(const HttpRequest& r, const Caller& c) {
  std::string field;
  StatusOr<WorkloadRequest> req = DecodeWorkloadRequest(r.body, catalog, &field);
  if (!req.ok()) return ErrorResponse(req.status(), field);
  if (auto denied = Scope(c, req->tenant, "tenant '" + req->tenant + "'")) return *denied;
  StatusOr<std::string> key = IdempotencyKey(r);
  if (!key.ok()) return ErrorResponse(key.status(), "Idempotency-Key");

  // What the three steps share.
  struct Pending {
    Caller caller;
    std::string key;
    int64_t now = 0;
    std::string tenant;
    sched::QosClass qos = sched::QosClass::kBurstable;
    WorkloadShape shape;
    std::optional<HttpResponse> refusal;  // step 1's answer, unless the key has a stored one
    bool count_rejection = false;
    store::WorkloadRecord record;
    std::optional<HttpResponse> replay;  // the key's stored answer
    int64_t id = 0;
    std::string answer;
  };
  auto p = std::make_shared<Pending>();
  p->caller = c;
  p->key = *key;
  p->now = NowMs();
  bool park = false;
  p->refusal = AdmitSubmit(*req, p->now, &p->shape, &park, &p->count_rejection);
  p->tenant = req->tenant;
  p->qos = req->qos;
  if (p->refusal && p->key.empty()) {  // no stored answer can override it
    if (p->count_rejection) {
      m.rejections->Inc({"submit"});
      anomaly_service->ObserveRefusal(p->tenant, p->now / 1000);
    }
    return *p->refusal;
  }
  if (!p->refusal) {
    p->record.tenant = req->tenant;
    p->record.spec_json = WorkloadSpecJson(p->shape, catalog);
    p->record.state = std::string(kPending);
    p->record.wait_reason = park ? "no_fitting_node" + MigWaitNote(p->shape.job.pod) : "queued";
    p->record.created_ms = p->record.updated_ms = p->now;
  }
  HttpResponse later;
  later.defer = [this, p](std::shared_ptr<HttpAnswer> answer) {
    auto write = [p](store::Transaction& tx) -> Status {
      if (!p->key.empty()) {
        StatusOr<store::IdempotencyRecord> rec = tx.GetIdempotency(p->caller.token_id, p->key);
        if (rec.ok()) {
          p->replay = HttpResponse::Json(rec->status_code, rec->body);
          p->replay->headers.push_back({"Idempotent-Replayed", "true"});
          return Status::Ok();
        }
        if (rec.status().code() != StatusCode::kNotFound) return rec.status();
      }
      if (p->refusal) return Status::Ok();
      TESSERA_ASSIGN_OR_RETURN(p->id, tx.InsertWorkload(p->record));
      p->answer = api::EncodeWorkloadCreated({p->id, std::string(kPending)});
      if (!p->key.empty())
        TESSERA_RETURN_IF_ERROR(tx.PutIdempotency({p->caller.token_id, p->key, 201, p->answer, p->now}));
      return tx.AppendAudit({p->now, p->caller.token_id, "workload.create", "workloads/" + std::to_string(p->id), "201"})
          .status();
    };
    TransactAsync("submit", write, [this, p, answer](Status st) {
      answer->Finish([this, p, st]() -> HttpResponse {
        if (st.code() == StatusCode::kAlreadyExists && !p->key.empty()) {
          // The same key raced with another request: that one's answer is the answer.
          if (auto stored = StoredAnswer(p->caller, p->key)) return *stored;
        }
        if (!st.ok()) return ErrorResponse(st);
        if (p->replay) return *p->replay;
        if (p->refusal) {
          if (p->count_rejection) {
            m.rejections->Inc({"submit"});
            anomaly_service->ObserveRefusal(p->tenant, p->now / 1000);
          }
          return *p->refusal;
        }
        {
          std::lock_guard<std::mutex> lock(mu);
          if (cancelled_before_queued.erase(p->id) == 0) {
            p->shape.job.id = p->id;
            jobs[p->id] = KnownJob{p->shape, p->now};
            Queue(p->id);
            m.admissions->Inc({p->tenant, std::string(sched::QosName(p->qos))});
            wake = true;
          }
        }
        wake_cv.notify_one();
        return HttpResponse::Json(201, p->answer);
      });
    });
  };
  return later;
}

std::optional<HttpResponse> ControlPlane::Impl::AdmitSubmit(WorkloadRequest& req, int64_t now, WorkloadShape* shape,
                                                            bool* park, bool* count_rejection) {
  std::string field;
  std::lock_guard<std::mutex> lock(mu);
  const std::map<std::string, store::TenantRecord>& tenants = tenant_service->tenants_locked();
  auto tenant = tenants.find(req.tenant);
  if (tenant == tenants.end()) return NotFound("tenant '" + req.tenant + "'");
  if (req.qos_from_tenant) {  // the body named none: the tenant's default_qos (Burstable unless set)
    const json spec = json::parse(tenant->second.spec_json, nullptr, false);
    const json given = spec.is_object() ? spec.value("default_qos", json("Burstable")) : json("Burstable");
    StatusOr<sched::QosClass> q = sched::ParseQos(given.is_string() ? given.get<std::string>() : "Burstable");
    req.qos = q.ok() ? *q : sched::QosClass::kBurstable;
    req.qos_from_tenant = false;
  }
  const std::optional<sched::TenantIndex> t = live->tenants().Find(req.tenant);
  if (!t || !live->tenants().is_leaf(*t))
    return HttpResponse::Error(400, "invalid_argument", "tenant: '" + req.tenant + "' has sub-tenants; submit to a leaf",
                               "tenant");
  StatusOr<WorkloadShape> s = ResolveWorkload(req, DefaultModel(), catalog, &field);
  if (!s.ok()) return ErrorResponse(s.status(), field);
  *shape = std::move(*s);
  shape->job.submit = sched::Seconds{now / 1000};
  Status check = live->CheckSubmit(shape->job);
  if (check.code() == StatusCode::kFailedPrecondition) {
    *park = true;
  } else if (!check.ok()) {
    *count_rejection = true;
    return ErrorResponse(check);
  }
  return std::nullopt;
}

HttpResponse ControlPlane::Impl::GetWorkload(const HttpRequest& r, const Caller& c) {
  const std::string& raw = r.path_params.at("id");
  const std::optional<int64_t> id = ParseId(raw);
  if (!id) return NotFound("workload '" + raw + "'");
  StatusOr<store::WorkloadRecord> w = store::WorkloadRecord{};
  std::vector<store::WorkloadEvent> events;
  Status st = Transact("read", [&](store::Transaction& tx) -> Status {
    w = tx.GetWorkload(*id);
    if (!w.ok()) return Status::Ok();
    TESSERA_ASSIGN_OR_RETURN(events, tx.ListWorkloadEvents(*id));
    return Status::Ok();
  });
  if (!st.ok()) return ErrorResponse(st);
  if (!w.ok()) return w.status().code() == StatusCode::kNotFound ? NotFound("workload " + raw) : ErrorResponse(w.status());
  if (auto denied = Scope(c, w->tenant, "workload " + raw)) return *denied;
  api::WorkloadView view = WorkloadView(*w);
  view.events.emplace();
  for (const store::WorkloadEvent& e : events) view.events->push_back({e.time_ms, e.kind, e.detail});
  return HttpResponse::Json(200, api::EncodeWorkloadView(view));
}

HttpResponse ControlPlane::Impl::ListWorkloads(const HttpRequest& r, const Caller& c) {
  std::string tenant = SeesAllTenants(c.principal) ? "" : c.principal.tenant;
  if (auto it = r.query.find("tenant"); it != r.query.end() && !it->second.empty()) tenant = it->second;
  // An admin without ?tenant= reads all (allowed for "" too); everyone else one subtree.
  if (auto denied = Scope(c, tenant, "tenant '" + tenant + "'")) return *denied;
  std::string bad_field;
  StatusOr<ReadQuery> q = ParseReadQuery(r.query, &bad_field);  // only limit is shared here
  if (!q.ok()) return ErrorResponse(q.status(), bad_field);
  const int limit = q->limit.value_or(100);
  std::string state;
  if (auto it = r.query.find("state"); it != r.query.end()) {
    state = it->second;
    bool known = false;
    for (std::string_view s : {kPending, kRunning, kCompleted, kFailed, kCancelled, kRejected}) known |= state == s;
    if (!known)
      return HttpResponse::Error(400, "invalid_argument",
                                 "state: '" + state +
                                     "' is not pending, running, completed, failed, cancelled or rejected",
                                 "state");
  }
  std::string cont;
  if (auto it = r.query.find("continue"); it != r.query.end()) cont = it->second;
  // Ids and versions first; a whole record is read (in the same transaction) only for a view
  // not cached at that version.
  store::WorkloadPage page;
  std::vector<std::string> texts;
  Status st = Transact("read", [&](store::Transaction& tx) -> Status {
    TESSERA_ASSIGN_OR_RETURN(page, tx.ListWorkloadVersions({.tenant = tenant, .state = state}, limit, cont));
    texts.assign(page.workloads.size(), std::string());
    for (size_t i = 0; i < page.workloads.size(); ++i) {
      if (std::optional<std::string> hit = CachedView(page.workloads[i].id, page.workloads[i].version)) {
        texts[i] = std::move(*hit);
        continue;
      }
      TESSERA_ASSIGN_OR_RETURN(store::WorkloadRecord w, tx.GetWorkload(page.workloads[i].id));
      texts[i] = WorkloadViewText(w);
    }
    return Status::Ok();
  });
  if (!st.ok()) return ErrorResponse(st, st.code() == StatusCode::kInvalidArgument ? "continue" : "");
  // The page is assembled from the views' text: {"continue": ..., "workloads": [...]} as json
  // would write it (keys in order).
  std::string body = "{\"continue\":" + (page.next_continue.empty() ? std::string("null") : json(page.next_continue).dump()) +
                     ",\"workloads\":[";
  for (size_t i = 0; i < texts.size(); ++i) {
    if (i) body += ',';
    body += texts[i];
  }
  body += "]}";
  return HttpResponse::Json(200, std::move(body));
}

std::optional<std::string> ControlPlane::Impl::CachedView(int64_t id, int64_t version) {
  std::lock_guard<std::mutex> lock(workload_views_mu);
  if (auto it = workload_views.find(id); it != workload_views.end() && it->second.first == version)
    return it->second.second;
  return std::nullopt;
}

std::string ControlPlane::Impl::WorkloadViewText(const store::WorkloadRecord& w) {
  {
    std::lock_guard<std::mutex> lock(workload_views_mu);
    if (auto it = workload_views.find(w.id); it != workload_views.end() && it->second.first == w.version) return it->second.second;
  }
  std::string text = api::EncodeWorkloadView(WorkloadView(w));
  std::lock_guard<std::mutex> lock(workload_views_mu);
  if (workload_views.size() >= kMaxViews) workload_views.clear();
  workload_views[w.id] = {w.version, text};
  return text;
}

std::optional<HttpResponse> ControlPlane::Impl::FindWorkload(const std::string& raw, const Caller& c, Action action,
                                                             store::WorkloadRecord* out) {
  const std::optional<int64_t> id = ParseId(raw);
  if (!id) return NotFound("workload '" + raw + "'");
  StatusOr<store::WorkloadRecord> w = store::WorkloadRecord{};
  Status st = Transact("read", [&](store::Transaction& tx) -> Status {
    w = tx.GetWorkload(*id);
    return Status::Ok();
  });
  if (!st.ok()) return ErrorResponse(st);
  if (!w.ok()) return w.status().code() == StatusCode::kNotFound ? NotFound("workload " + raw) : ErrorResponse(w.status());
  if (auto denied = Scope(c, w->tenant, "workload " + raw, action)) return denied;
  *out = std::move(*w);
  return std::nullopt;
}

HttpResponse ControlPlane::Impl::CancelWorkload(const HttpRequest& r, const Caller& c) {
  const std::string& raw = r.path_params.at("id");
  std::lock_guard<std::mutex> lock(mu);
  store::WorkloadRecord w;
  if (auto answer = FindWorkload(raw, c, Action::kCancelWorkload, &w)) return *answer;
  const int64_t id = w.id;
  Status st;
  if (IsTerminal(w.state))
    return HttpResponse::Error(409, "conflict", "workload " + raw + " is already " + w.state);
  const int64_t now = NowMs();
  const bool was_running = w.state == kRunning;
  st = Transact("cancel", [&](store::Transaction& tx) -> Status {
    store::WorkloadRecord u = w;
    u.state = std::string(kCancelled);
    u.updated_ms = now;
    TESSERA_RETURN_IF_ERROR(tx.UpdateWorkload(u).status());
    TESSERA_RETURN_IF_ERROR(
        tx.AppendWorkloadEvent({0, id, now, "cancelled", was_running ? "stopped by its owner" : "taken out of the queue"})
            .status());
    return tx.AppendAudit({now, c.token_id, "workload.cancel", "workloads/" + raw, "200"}).status();
  });
  if (!st.ok()) return ErrorResponse(st);
  if (parked.erase(id)) {
  } else if (live->is_pending(id)) {
    (void)live->Cancel(id);
  } else if (live->is_running(id)) {
    (void)live->Complete(id, sched::Seconds{now / 1000});
  } else if (!jobs.count(id)) {
    cancelled_before_queued.insert(id);  // its submit has not queued it yet
  }
  jobs.erase(id);
  wake = true;
  wake_cv.notify_one();
  store::WorkloadRecord shown = w;
  shown.state = std::string(kCancelled);
  shown.updated_ms = now;
  shown.version += 1;
  return HttpResponse::Json(200, api::EncodeWorkloadView(WorkloadView(shown)));
}

// PATCH {"gpu_mem_mib", "gpu_milli", "priority"}: the memory limit, the compute share (of a
// fractional mode) or the priority of a pending or running workload. The agent applies a running
// workload's new limit and share live (the node's desired state carries them). A change that
// would alter the mode, or a larger share than its GPU has free, is refused (409: resubmit).
// The scheduler is rebuilt from the store afterwards (Restore), so its accounting follows.
HttpResponse ControlPlane::Impl::PatchWorkload(const HttpRequest& r, const Caller& c) {
  const std::string& raw = r.path_params.at("id");
  std::string field;
  StatusOr<json> body = api::ParseJsonObject(r.body);
  if (!body.ok()) return ErrorResponse(body.status());
  api::JsonFields f(*body, "", &field);
  if (Status st = f.OnlyKnown({"gpu_mem_mib", "gpu_milli", "priority"}); !st.ok()) return ErrorResponse(st, field);
  std::lock_guard<std::mutex> lock(mu);
  store::WorkloadRecord w;
  if (auto answer = FindWorkload(raw, c, Action::kChangeWorkload, &w)) return *answer;
  const int64_t id = w.id;
  Status st;
  if (IsTerminal(w.state)) return HttpResponse::Error(409, "conflict", "workload " + raw + " is already " + w.state);
  auto known = jobs.find(id);
  if (known == jobs.end()) return HttpResponse::Error(409, "conflict", "workload " + raw + " is being queued; retry");
  json request = json::parse(EncodeWorkloadRequest(known->second.shape.request, catalog));
  for (const char* k : {"gpu_mem_mib", "gpu_milli", "priority"})
    if (body->contains(k)) request[k] = (*body)[k];
  StatusOr<WorkloadRequest> changed = DecodeWorkloadRequest(request.dump(), catalog, &field);
  if (!changed.ok()) return ErrorResponse(changed.status(), field);
  StatusOr<WorkloadShape> shape = ResolveWorkload(*changed, DefaultModel(), catalog, &field);
  if (!shape.ok()) return ErrorResponse(shape.status(), field);
  const WorkloadShape& old = known->second.shape;
  if (shape->mode.kind != old.mode.kind || shape->job.pod.num_gpu != old.job.pod.num_gpu ||
      shape->job.pod.mig_profile != old.job.pod.mig_profile)
    return HttpResponse::Error(409, "conflict", "the change would give workload " + raw + " another mode (" +
                                                    shape->mode.ToString() + " instead of " + old.mode.ToString() +
                                                    "): submit a new workload instead");
  const int32_t more = shape->job.pod.gpu_milli.value() - old.job.pod.gpu_milli.value();
  if (more > 0 && live->is_running(id)) {
    for (const sched::PodPlacement& p : live->placement_of(id))
      for (const auto& v : live->nodes())
        if (v.name == p.node)
          for (int g = 0; g < static_cast<int>(v.gpu_free_milli.size()); ++g)
            if ((p.gpus >> g & 1) && v.gpu_free_milli[g] < more)
              return HttpResponse::Error(409, "conflict", "GPU " + std::to_string(g) + " of " + p.node + " has " +
                                                              std::to_string(v.gpu_free_milli[g]) +
                                                              " milli free, the change needs " + std::to_string(more));
  }
  const int64_t now = NowMs();
  store::WorkloadRecord u = w;
  u.spec_json = WorkloadSpecJson(*shape, catalog);
  u.updated_ms = now;
  st = Transact("patch", [&](store::Transaction& tx) -> Status {
    TESSERA_ASSIGN_OR_RETURN(u.version, tx.UpdateWorkload(u));
    TESSERA_RETURN_IF_ERROR(tx.AppendWorkloadEvent({0, id, now, "changed", body->dump()}).status());
    return tx.AppendAudit({now, c.token_id, "workload.update", "workloads/" + raw, "200"}).status();
  });
  if (!st.ok()) return ErrorResponse(st);
  if (Status rs = Restore(); !rs.ok()) {
    loop_healthy = false;
    return ErrorResponse(rs);
  }
  wake = true;
  wake_cv.notify_one();
  return HttpResponse::Json(200, api::EncodeWorkloadView(WorkloadView(u)));
}

}  // namespace tessera::daemon
