// /v1/workloads: submit (with Idempotency-Key), read, list (paginated), cancel, change; each
// handler is decode -> WorkloadService -> render (src/daemon/workload_service.h). Here too: the
// world the service asks (the scheduler's jobs, the parked ones, the tenant map, the loop), and
// Queue/Unpark, which the loop and the node endpoints share.
#include <nlohmann/json.hpp>

#include "src/daemon/control_plane_impl.h"
#include "tessera/api/workload_wire.h"

namespace tessera::daemon {

using json = nlohmann::json;

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
    w.state = WorkloadState::kRejected;
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

std::unique_ptr<WorkloadService> ControlPlane::Impl::MakeWorkloadService() {
  WorkloadWorld world;
  world.mu = &mu;
  world.tenant_spec = [this](const std::string& tenant) -> const std::string* {
    const std::map<std::string, store::TenantRecord>& tenants = tenant_service->tenants_locked();
    auto it = tenants.find(tenant);
    return it == tenants.end() ? nullptr : &it->second.spec_json;
  };
  world.is_leaf = [this](const std::string& tenant) {
    const std::optional<sched::TenantIndex> t = live->tenants().Find(tenant);
    return t && live->tenants().is_leaf(*t);
  };
  world.default_model = [this] { return DefaultModel(); };
  world.check_submit = [this](const sched::LiveJob& job) { return live->CheckSubmit(job); };
  world.refused = [this](std::string_view tenant, int64_t submit_ms) {
    m.rejections->Inc({"submit"});
    anomaly_service->ObserveRefusal(std::string(tenant), submit_ms / 1000);
  };
  world.enqueue = [this](int64_t id, const WorkloadShape& shape, int64_t submit_ms) {
    jobs[id] = KnownJob{shape, submit_ms};
    Queue(id);
    m.admissions->Inc({shape.request.tenant, std::string(sched::QosName(shape.request.qos))});
    wake = true;
  };
  world.withdraw = [this](int64_t id, int64_t cancel_ms) {
    bool known = true;
    if (parked.erase(id)) {
    } else if (live->is_pending(id)) {
      (void)live->Cancel(id);
    } else if (live->is_running(id)) {
      (void)live->Complete(id, sched::Seconds{cancel_ms / 1000});
    } else if (!jobs.count(id)) {
      known = false;
    }
    jobs.erase(id);
    wake = true;
    return known;
  };
  world.known_shape = [this](int64_t id) -> const WorkloadShape* {
    auto it = jobs.find(id);
    return it == jobs.end() ? nullptr : &it->second.shape;
  };
  world.check_share = [this](int64_t id, int32_t more) -> Status {
    if (!live->is_running(id)) return Status::Ok();
    for (const sched::PodPlacement& p : live->placement_of(id))
      for (const auto& v : live->nodes())
        if (v.name == p.node)
          for (int g = 0; g < static_cast<int>(v.gpu_free_milli.size()); ++g)
            if ((p.gpus >> g & 1) && v.gpu_free_milli[g] < more)
              return FailedPreconditionError("GPU " + std::to_string(g) + " of " + p.node + " has " +
                                             std::to_string(v.gpu_free_milli[g]) + " milli free, the change needs " +
                                             std::to_string(more));
    return Status::Ok();
  };
  world.restore = [this]() -> Status {
    if (Status rs = Restore(); !rs.ok()) {
      loop_healthy = false;
      return rs;
    }
    wake = true;
    return Status::Ok();
  };
  world.wake = [this] { wake_cv.notify_one(); };
  world.wait_note = [this](const placement::TaskRequest& pod) {
    std::lock_guard<std::mutex> lock(mu);
    return MigWaitNote(pod);
  };
  return std::make_unique<WorkloadService>(
      [this](std::string_view op, const std::function<Status(store::Transaction&)>& fn) { return Transact(op, fn); },
      [this](std::string_view op, std::function<Status(store::Transaction&)> fn, std::function<void(Status)> done) {
        TransactAsync(op, std::move(fn), std::move(done));
      },
      *opt.clock, std::move(world), catalog);
}

WorkloadCaller ControlPlane::Impl::WorkloadCallerOf(const Caller& c) const {
  return {c.token_id, c.principal, [this, &c](Action action, std::string_view tenant, std::string_view what) {
            return Check(c, tenant, what, action);
          }};
}

namespace {

HttpResponse Replayed(const ReplayedAnswer& a) {
  HttpResponse out = HttpResponse::Json(a.status_code, a.body);
  out.headers.push_back({"Idempotent-Replayed", "true"});
  return out;
}

}  // namespace

// The answer comes once the submit's commit is durable (WorkloadService: the three steps), made
// on an HTTP thread: no HTTP thread waits for the group commit.
HttpResponse ControlPlane::Impl::SubmitWorkload(const HttpRequest& r, const Caller& c) {
  std::string field;
  StatusOr<WorkloadRequest> req = DecodeWorkloadRequest(r.body, catalog, &field);
  if (!req.ok()) return ErrorResponse(req.status(), field);
  StatusOr<WorkloadService::CommitSubmit> commit =
      workload_service->Submit(WorkloadCallerOf(c), {*std::move(req), r.Header("idempotency-key")}, &field);
  if (!commit.ok()) return ErrorResponse(commit.status(), field);
  HttpResponse later;
  later.defer = [commit = *std::move(commit)](std::shared_ptr<HttpAnswer> answer) {
    commit([answer](WorkloadService::FinishSubmit finish) {
      answer->Finish([finish = std::move(finish)]() -> HttpResponse {
        std::string bad_field;
        StatusOr<SubmittedWorkload> made = finish(&bad_field);
        if (!made.ok()) return ErrorResponse(made.status(), bad_field);
        if (made->replay) return Replayed(*made->replay);
        return HttpResponse::Json(201, api::EncodeWorkloadCreated({made->id, std::string(WorkloadStateName(WorkloadState::kPending))}));
      });
    });
  };
  return later;
}

HttpResponse ControlPlane::Impl::GetWorkload(const HttpRequest& r, const Caller& c) {
  StatusOr<api::WorkloadView> view = workload_service->Get(WorkloadCallerOf(c), r.path_params.at("id"));
  if (!view.ok()) return ErrorResponse(view.status());
  return HttpResponse::Json(200, api::EncodeWorkloadView(*view));
}

HttpResponse ControlPlane::Impl::ListWorkloads(const HttpRequest& r, const Caller& c) {
  ListWorkloadsRequest q;
  if (auto it = r.query.find("tenant"); it != r.query.end()) q.tenant = it->second;
  if (auto it = r.query.find("limit"); it != r.query.end()) q.limit = it->second;
  if (auto it = r.query.find("state"); it != r.query.end()) q.state = it->second;
  if (auto it = r.query.find("continue"); it != r.query.end()) q.continue_from = it->second;
  std::string field;
  StatusOr<WorkloadList> page = workload_service->List(WorkloadCallerOf(c), q, &field);
  if (!page.ok()) return ErrorResponse(page.status(), field);
  // The page is assembled from the views' text: {"continue": ..., "workloads": [...]} as json
  // would write it (keys in order).
  std::string body = "{\"continue\":" +
                     (page->next_continue.empty() ? std::string("null") : json(page->next_continue).dump()) +
                     ",\"workloads\":[";
  for (size_t i = 0; i < page->views.size(); ++i) {
    if (i) body += ',';
    body += page->views[i];
  }
  body += "]}";
  return HttpResponse::Json(200, std::move(body));
}

HttpResponse ControlPlane::Impl::CancelWorkload(const HttpRequest& r, const Caller& c) {
  StatusOr<api::WorkloadView> view = workload_service->Cancel(WorkloadCallerOf(c), r.path_params.at("id"));
  if (!view.ok()) return ErrorResponse(view.status());
  return HttpResponse::Json(200, api::EncodeWorkloadView(*view));
}

// PATCH {"gpu_mem_mib", "gpu_milli", "priority"}: the memory limit, the compute share (of a
// fractional mode) or the priority of a pending or running workload (WorkloadService::Change).
HttpResponse ControlPlane::Impl::PatchWorkload(const HttpRequest& r, const Caller& c) {
  std::string field;
  StatusOr<WorkloadChange> change = DecodeWorkloadChange(r.body, &field);
  if (!change.ok()) return ErrorResponse(change.status(), field);
  StatusOr<api::WorkloadView> view =
      workload_service->Change(WorkloadCallerOf(c), r.path_params.at("id"), *change, &field);
  if (!view.ok()) return ErrorResponse(view.status(), field);
  return HttpResponse::Json(200, api::EncodeWorkloadView(*view));
}

}  // namespace tessera::daemon
