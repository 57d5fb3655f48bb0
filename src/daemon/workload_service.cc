#include "src/daemon/workload_service.h"

#include <map>
#include <memory>

#include "src/daemon/api_codec.h"
#include "src/daemon/read_query.h"
#include "tessera/api/json_fields.h"

namespace tessera::daemon {

using json = nlohmann::json;

StatusOr<WorkloadChange> DecodeWorkloadChange(std::string_view body, std::string* bad_field) {
  std::string field;
  StatusOr<json> parsed = api::ParseJsonObject(body);
  if (!parsed.ok()) return parsed.status();
  api::JsonFields f(*parsed, "", &field);
  if (Status st = f.OnlyKnown({"gpu_mem_mib", "gpu_milli", "priority"}); !st.ok()) {
    if (bad_field) *bad_field = field;
    return st;
  }
  return WorkloadChange{*std::move(parsed)};
}

// The view of a stored workload (api::WorkloadView: one codec for the daemon and its clients).
api::WorkloadView WorkloadViewOf(const store::WorkloadRecord& w) {
  json spec = json::parse(w.spec_json, nullptr, false);
  if (spec.is_discarded() || !spec.is_object()) spec = json::object();
  api::WorkloadView v;
  v.id = w.id;
  v.tenant = w.tenant;
  v.state = w.state;
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
  if (w.state == WorkloadState::kPending || w.state == WorkloadState::kRejected) v.wait_reason = w.wait_reason;
  if (w.state == WorkloadState::kFailed) v.reason = w.wait_reason;
  if ((w.state == WorkloadState::kCompleted || w.state == WorkloadState::kFailed) && spec.contains("exit_code") && spec["exit_code"].is_number_integer())
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

WorkloadService::WorkloadService(TransactFn transact, TransactAsyncFn transact_async, const Clock& clock,
                                 WorkloadWorld world, const GpuModelCatalog& catalog)
    : transact_(std::move(transact)),
      transact_async_(std::move(transact_async)),
      clock_(clock),
      world_(std::move(world)),
      catalog_(catalog) {}

StatusOr<WorkloadService::CommitSubmit> WorkloadService::Submit(const WorkloadCaller& caller,
                                                                SubmitWorkloadRequest request, std::string* bad_field) {
  WorkloadRequest& req = request.request;
  TESSERA_RETURN_IF_ERROR(caller.check(Action::kSubmitWorkload, req.tenant, "tenant '" + req.tenant + "'"));
  if (Status st = CheckIdempotencyKey(request.idempotency_key); !st.ok()) {
    if (bad_field) *bad_field = "Idempotency-Key";
    return st;
  }

  // What the three steps share.
  struct Pending {
    std::string actor;
    std::string key;
    int64_t now = 0;
    std::string tenant;
    WorkloadShape shape;
    Status refusal;  // step 1's answer, unless the key has a stored one
    std::string refusal_field;
    bool count_rejection = false;
    store::WorkloadRecord record;
    std::optional<ReplayedAnswer> replay;  // the key's stored answer
    int64_t id = 0;
  };
  auto p = std::make_shared<Pending>();
  p->actor = caller.actor;
  p->key = std::move(request.idempotency_key);
  p->now = UnixMillis(clock_);
  bool park = false;
  StatusOr<WorkloadShape> shape = Admit(req, p->now, &park, &p->count_rejection, &p->refusal_field);
  p->tenant = req.tenant;
  if (!shape.ok()) {
    p->refusal = shape.status();
    if (p->key.empty()) {  // no stored answer can override it
      if (p->count_rejection) world_.refused(p->tenant, p->now);
      if (bad_field) *bad_field = p->refusal_field;
      return p->refusal;
    }
  } else {
    p->shape = *std::move(shape);
    p->record.tenant = req.tenant;
    p->record.spec_json = WorkloadSpecJson(p->shape, catalog_);
    p->record.state = WorkloadState::kPending;
    p->record.wait_reason =
        park ? "no_fitting_node" + (world_.wait_note ? world_.wait_note(p->shape.job.pod) : std::string()) : "queued";
    p->record.created_ms = p->record.updated_ms = p->now;
  }
  return CommitSubmit([this, p](std::function<void(FinishSubmit)> durable) {
    auto write = [p](store::Transaction& tx) -> Status {
      if (!p->key.empty()) {
        StatusOr<store::IdempotencyRecord> rec = tx.GetIdempotency(p->actor, p->key);
        if (rec.ok()) {
          p->replay = ReplayedAnswer{rec->status_code, rec->body};
          return Status::Ok();
        }
        if (rec.status().code() != StatusCode::kNotFound) return rec.status();
      }
      if (!p->refusal.ok()) return Status::Ok();
      TESSERA_ASSIGN_OR_RETURN(p->id, tx.InsertWorkload(p->record));
      if (!p->key.empty())
        TESSERA_RETURN_IF_ERROR(tx.PutIdempotency(
            {p->actor, p->key, 201,
             api::EncodeWorkloadCreated({p->id, std::string(WorkloadStateName(WorkloadState::kPending))}), p->now}));
      return tx.AppendAudit({p->now, p->actor, "workload.create", "workloads/" + std::to_string(p->id), "201"})
          .status();
    };
    transact_async_("submit", write, [this, p, durable = std::move(durable)](Status st) {
      durable([this, p, st](std::string* why) -> StatusOr<SubmittedWorkload> {
        if (st.code() == StatusCode::kAlreadyExists && !p->key.empty()) {
          // The same key raced with another request: that one's answer is the answer.
          TESSERA_ASSIGN_OR_RETURN(std::optional<ReplayedAnswer> stored, StoredAnswer(p->actor, p->key));
          if (stored) return SubmittedWorkload{0, std::move(stored)};
        }
        if (!st.ok()) return st;
        if (p->replay) return SubmittedWorkload{0, p->replay};
        if (!p->refusal.ok()) {
          if (p->count_rejection) world_.refused(p->tenant, p->now);
          if (why) *why = p->refusal_field;
          return p->refusal;
        }
        {
          std::lock_guard<std::mutex> lock(*world_.mu);
          if (cancelled_before_queued_.erase(p->id) == 0) {
            p->shape.job.id = p->id;
            world_.enqueue(p->id, p->shape, p->now);
          }
        }
        world_.wake();
        return SubmittedWorkload{p->id, std::nullopt};
      });
    });
  });
}

StatusOr<WorkloadShape> WorkloadService::Admit(WorkloadRequest& req, int64_t now, bool* park, bool* counted,
                                               std::string* bad_field) {
  std::lock_guard<std::mutex> lock(*world_.mu);
  const std::string* tenant_spec = world_.tenant_spec(req.tenant);
  if (tenant_spec == nullptr) return NotFoundError("tenant '" + req.tenant + "' not found");
  if (req.qos_from_tenant) {  // the body named none: the tenant's default_qos (Burstable unless set)
    const json spec = json::parse(*tenant_spec, nullptr, false);
    const json given = spec.is_object() ? spec.value("default_qos", json("Burstable")) : json("Burstable");
    StatusOr<sched::QosClass> q = sched::ParseQos(given.is_string() ? given.get<std::string>() : "Burstable");
    req.qos = q.ok() ? *q : sched::QosClass::kBurstable;
    req.qos_from_tenant = false;
  }
  if (!world_.is_leaf(req.tenant)) {
    if (bad_field) *bad_field = "tenant";
    return InvalidArgumentError("tenant: '" + req.tenant + "' has sub-tenants; submit to a leaf");
  }
  StatusOr<WorkloadShape> s = ResolveWorkload(req, world_.default_model(), catalog_, bad_field);
  if (!s.ok()) return s.status();
  s->job.submit = sched::Seconds{now / 1000};
  Status check = world_.check_submit(s->job);
  if (check.code() == StatusCode::kFailedPrecondition) {
    *park = true;
  } else if (!check.ok()) {
    *counted = true;
    if (bad_field) bad_field->clear();
    return check;
  }
  return s;
}

StatusOr<std::optional<ReplayedAnswer>> WorkloadService::StoredAnswer(const std::string& actor, const std::string& key) {
  StatusOr<store::IdempotencyRecord> rec = store::IdempotencyRecord{};
  TESSERA_RETURN_IF_ERROR(transact_("read", [&](store::Transaction& tx) -> Status {
    rec = tx.GetIdempotency(actor, key);
    return Status::Ok();
  }));
  if (!rec.ok()) {
    if (rec.status().code() == StatusCode::kNotFound) return std::optional<ReplayedAnswer>();
    return rec.status();
  }
  return std::optional<ReplayedAnswer>(ReplayedAnswer{rec->status_code, rec->body});
}

StatusOr<api::WorkloadView> WorkloadService::Get(const WorkloadCaller& caller, std::string_view raw_id) {
  const std::string raw(raw_id);
  const std::optional<int64_t> id = ParseId(raw);
  if (!id) return NotFoundError("workload '" + raw + "' not found");
  StatusOr<store::WorkloadRecord> w = store::WorkloadRecord{};
  std::vector<store::WorkloadEvent> events;
  TESSERA_RETURN_IF_ERROR(transact_("read", [&](store::Transaction& tx) -> Status {
    w = tx.GetWorkload(*id);
    if (!w.ok()) return Status::Ok();
    TESSERA_ASSIGN_OR_RETURN(events, tx.ListWorkloadEvents(*id));
    return Status::Ok();
  }));
  if (!w.ok()) return w.status().code() == StatusCode::kNotFound ? NotFoundError("workload " + raw + " not found") : w.status();
  TESSERA_RETURN_IF_ERROR(caller.check(Action::kReadWorkload, w->tenant, "workload " + raw));
  api::WorkloadView view = WorkloadViewOf(*w);
  view.events.emplace();
  for (const store::WorkloadEvent& e : events) view.events->push_back({e.time_ms, e.kind, e.detail});
  return view;
}

StatusOr<WorkloadList> WorkloadService::List(const WorkloadCaller& caller, const ListWorkloadsRequest& request,
                                             std::string* bad_field) {
  std::string tenant = SeesAllTenants(caller.principal) ? "" : caller.principal.tenant;
  if (!request.tenant.empty()) tenant = request.tenant;
  // An admin without ?tenant= reads all (allowed for "" too); everyone else one subtree.
  TESSERA_RETURN_IF_ERROR(caller.check(Action::kReadWorkload, tenant, "tenant '" + tenant + "'"));
  std::map<std::string, std::string> shared;  // only limit is shared here
  if (request.limit) shared["limit"] = *request.limit;
  TESSERA_ASSIGN_OR_RETURN(ReadQuery q, ParseReadQuery(shared, bad_field));
  const int limit = q.limit.value_or(100);
  std::optional<WorkloadState> state;
  if (request.state) {
    StatusOr<WorkloadState> parsed = ParseWorkloadState(*request.state);
    if (!parsed.ok()) {
      if (bad_field) *bad_field = "state";
      return parsed.status().WithPrefix("state");
    }
    state = *parsed;
  }
  // Ids and versions first; a whole record is read (in the same transaction) only for a view
  // not cached at that version.
  store::WorkloadPage page;
  WorkloadList out;
  Status st = transact_("read", [&](store::Transaction& tx) -> Status {
    TESSERA_ASSIGN_OR_RETURN(page, tx.ListWorkloadVersions({.tenant = tenant, .state = state}, limit, request.continue_from));
    out.views.assign(page.workloads.size(), std::string());
    for (size_t i = 0; i < page.workloads.size(); ++i) {
      if (std::optional<std::string> hit = CachedView(page.workloads[i].id, page.workloads[i].version)) {
        out.views[i] = std::move(*hit);
        continue;
      }
      TESSERA_ASSIGN_OR_RETURN(store::WorkloadRecord w, tx.GetWorkload(page.workloads[i].id));
      out.views[i] = ViewText(w);
    }
    return Status::Ok();
  });
  if (!st.ok()) {
    if (bad_field && st.code() == StatusCode::kInvalidArgument) *bad_field = "continue";
    return st;
  }
  out.next_continue = std::move(page.next_continue);
  return out;
}

std::optional<std::string> WorkloadService::CachedView(int64_t id, int64_t version) {
  std::lock_guard<std::mutex> lock(views_mu_);
  if (auto it = views_.find(id); it != views_.end() && it->second.first == version) return it->second.second;
  return std::nullopt;
}

std::string WorkloadService::ViewText(const store::WorkloadRecord& w) {
  if (std::optional<std::string> hit = CachedView(w.id, w.version)) return *std::move(hit);
  std::string text = api::EncodeWorkloadView(WorkloadViewOf(w));
  std::lock_guard<std::mutex> lock(views_mu_);
  if (views_.size() >= kMaxViews) views_.clear();
  views_[w.id] = {w.version, text};
  return text;
}

StatusOr<store::WorkloadRecord> WorkloadService::Find(std::string_view raw_id, const WorkloadCaller& caller,
                                                      Action action) {
  const std::string raw(raw_id);
  const std::optional<int64_t> id = ParseId(raw);
  if (!id) return NotFoundError("workload '" + raw + "' not found");
  StatusOr<store::WorkloadRecord> w = store::WorkloadRecord{};
  TESSERA_RETURN_IF_ERROR(transact_("read", [&](store::Transaction& tx) -> Status {
    w = tx.GetWorkload(*id);
    return Status::Ok();
  }));
  if (!w.ok()) return w.status().code() == StatusCode::kNotFound ? NotFoundError("workload " + raw + " not found") : w.status();
  TESSERA_RETURN_IF_ERROR(caller.check(action, w->tenant, "workload " + raw));
  return w;
}

StatusOr<api::WorkloadView> WorkloadService::Cancel(const WorkloadCaller& caller, std::string_view raw_id) {
  const std::string raw(raw_id);
  store::WorkloadRecord shown;
  {
    std::lock_guard<std::mutex> lock(*world_.mu);
    TESSERA_ASSIGN_OR_RETURN(store::WorkloadRecord w, Find(raw, caller, Action::kCancelWorkload));
    const int64_t id = w.id;
    if (IsEnded(w.state))
      return FailedPreconditionError("workload " + raw + " is already " + std::string(WorkloadStateName(w.state)));
    const int64_t now = UnixMillis(clock_);
    const bool was_running = w.state == WorkloadState::kRunning;
    const Status written = transact_("cancel", [&](store::Transaction& tx) -> Status {
      store::WorkloadRecord u = w;
      u.state = WorkloadState::kCancelled;
      u.updated_ms = now;
      TESSERA_RETURN_IF_ERROR(tx.UpdateWorkload(u).status());
      TESSERA_RETURN_IF_ERROR(
          tx.AppendWorkloadEvent({0, id, now, "cancelled", was_running ? "stopped by its owner" : "taken out of the queue"})
              .status());
      return tx.AppendAudit({now, caller.actor, "workload.cancel", "workloads/" + raw, "200"}).status();
    });
    if (!written.ok()) return written;
    if (!world_.withdraw(id, now)) cancelled_before_queued_.insert(id);  // its submit has not queued it yet
    shown = std::move(w);
    shown.state = WorkloadState::kCancelled;
    shown.updated_ms = now;
    shown.version += 1;
  }
  world_.wake();
  return WorkloadViewOf(shown);
}

// The agent applies a running workload's new limit and share live (the node's desired state
// carries them). The scheduler is rebuilt from the store afterwards (restore), so its accounting
// follows.
StatusOr<api::WorkloadView> WorkloadService::Change(const WorkloadCaller& caller, std::string_view raw_id,
                                                    const WorkloadChange& change, std::string* bad_field) {
  const std::string raw(raw_id);
  std::string ignored;
  if (bad_field == nullptr) bad_field = &ignored;
  store::WorkloadRecord u;
  {
    std::lock_guard<std::mutex> lock(*world_.mu);
    TESSERA_ASSIGN_OR_RETURN(store::WorkloadRecord w, Find(raw, caller, Action::kChangeWorkload));
    const int64_t id = w.id;
    if (IsEnded(w.state))
      return FailedPreconditionError("workload " + raw + " is already " + std::string(WorkloadStateName(w.state)));
    const WorkloadShape* known = world_.known_shape(id);
    if (known == nullptr) return FailedPreconditionError("workload " + raw + " is being queued; retry");
    json request = json::parse(EncodeWorkloadRequest(known->request, catalog_));
    for (const char* k : {"gpu_mem_mib", "gpu_milli", "priority"})
      if (change.fields.contains(k)) request[k] = change.fields[k];
    TESSERA_ASSIGN_OR_RETURN(WorkloadRequest changed, DecodeWorkloadRequest(request.dump(), catalog_, bad_field));
    TESSERA_ASSIGN_OR_RETURN(WorkloadShape shape, ResolveWorkload(changed, world_.default_model(), catalog_, bad_field));
    const WorkloadShape& old = *known;
    if (shape.mode.kind != old.mode.kind || shape.job.pod.num_gpu != old.job.pod.num_gpu ||
        shape.job.pod.mig_profile != old.job.pod.mig_profile)
      return FailedPreconditionError("the change would give workload " + raw + " another mode (" +
                                     shape.mode.ToString() + " instead of " + old.mode.ToString() +
                                     "): submit a new workload instead");
    const int32_t more = shape.job.pod.gpu_milli.value() - old.job.pod.gpu_milli.value();
    if (more > 0) TESSERA_RETURN_IF_ERROR(world_.check_share(id, more));
    const int64_t now = UnixMillis(clock_);
    u = w;
    u.spec_json = WorkloadSpecJson(shape, catalog_);
    u.updated_ms = now;
    const Status written = transact_("patch", [&](store::Transaction& tx) -> Status {
      TESSERA_ASSIGN_OR_RETURN(u.version, tx.UpdateWorkload(u));
      TESSERA_RETURN_IF_ERROR(tx.AppendWorkloadEvent({0, id, now, "changed", change.fields.dump()}).status());
      return tx.AppendAudit({now, caller.actor, "workload.update", "workloads/" + raw, "200"}).status();
    });
    if (!written.ok()) return written;
    TESSERA_RETURN_IF_ERROR(world_.restore());
  }
  world_.wake();
  return WorkloadViewOf(u);
}

}  // namespace tessera::daemon
