// The scheduling loop: node timeouts, a cycle, and its decisions persisted in one transaction
// before anyone can see them; and Restore, which rebuilds the scheduler from the store (at
// start, and whenever memory and store may disagree after a failed write).
#include <chrono>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "src/daemon/api_codec.h"
#include "src/daemon/control_plane_impl.h"

namespace tessera::daemon {

using json = nlohmann::json;

namespace {

sched::WaitReason ReasonFromName(std::string_view name) {
  name = name.substr(0, name.find(':'));  // "capacity: MIG layout not applied ..." (WaitReasonText)
  for (int r = 0; r < sched::kWaitReasonCount; ++r)
    if (sched::WaitReasonName(static_cast<sched::WaitReason>(r)) == name) return static_cast<sched::WaitReason>(r);
  return sched::WaitReason::kNone;
}

}  // namespace

void ControlPlane::Impl::LoopMain() {
  std::unique_lock<std::mutex> lock(mu);
  while (!stopping) {
    wake_cv.wait_for(lock, std::chrono::milliseconds(opt.cycle_interval_ms), [&] { return wake || stopping; });
    if (stopping) break;
    if (wake) {
      // Submits come in bursts: a few milliseconds more lets one cycle place them together.
      wake_cv.wait_for(lock, std::chrono::milliseconds(5), [&] { return stopping; });
      if (stopping) break;
    }
    wake = false;
    // A leader whose lease is gone stops at once: a standby may already be scheduling.
    if (opt.own_store) {
      if (Status owned = db->CheckOwnership(); !owned.ok()) {
        loop_healthy = false;
        std::fprintf(stderr, "tessera serve: %s; scheduling stopped\n", std::string(owned.message()).c_str());
        lock.unlock();
        if (opt.on_ownership_lost) opt.on_ownership_lost(owned);
        return;
      }
    }
    if (Status st = CycleOnce(); !st.ok())
      std::fprintf(stderr, "tessera serve: scheduling cycle: %s\n", std::string(st.message()).c_str());
  }
}

Status ControlPlane::Impl::Restore() {
  std::vector<store::TenantRecord> tenant_list;
  std::vector<store::NodeRecord> node_list;
  std::vector<store::WorkloadRecord> open;
  const Status written = Transact("restore", [&](store::Transaction& tx) -> Status {
    TESSERA_ASSIGN_OR_RETURN(tenant_list, tx.ListTenants());
    TESSERA_ASSIGN_OR_RETURN(node_list, tx.ListNodes());
    open.clear();
    std::string cont;
    do {
      TESSERA_ASSIGN_OR_RETURN(store::WorkloadPage page, tx.ListWorkloads({}, 1000, cont));
      for (store::WorkloadRecord& w : page.workloads)
        if (!IsEnded(w.state)) open.push_back(std::move(w));
      cont = page.next_continue;
    } while (!cont.empty());
    return Status::Ok();
  });
  if (!written.ok()) return written;
  TESSERA_ASSIGN_OR_RETURN(sched::TenantTree tree, tenant_service->Load(std::move(tenant_list)));
  const int64_t now = NowMs();
  nodes.clear();
  lost_nodes.clear();
  std::vector<placement::NodeSpec> specs;
  for (const store::NodeRecord& n : node_list) {
    if (n.state == NodeState::kLost) {
      lost_nodes.insert(n.name);
      continue;
    }
    std::string field;
    StatusOr<NodeInventory> inv = DecodeNodeInventory(n.name, n.inventory_json, catalog, &field);
    if (!inv.ok()) return InternalError("node '" + n.name + "': stored inventory: " + std::string(inv.status().message()));
    specs.push_back(inv->spec);
    nodes[n.name] = KnownNode{n, inv->spec, now};  // every node gets a fresh timeout
  }
  TESSERA_ASSIGN_OR_RETURN(live, sched::LiveScheduler::Create(std::move(tree), std::move(specs), opt.scheduler, {},
                                                              {.guarantees_must_fit = false}));
  for (const auto& [name, n] : nodes)
    if (n.record.state == NodeState::kCordoned) TESSERA_RETURN_IF_ERROR(live->Cordon(name));
  jobs.clear();
  parked.clear();
  std::vector<sched::JobId> requeue;
  std::vector<std::pair<sched::JobId, std::string>> reject;
  for (const store::WorkloadRecord& w : open) {
    TESSERA_ASSIGN_OR_RETURN(WorkloadShape shape, ParseWorkloadSpec(w.spec_json, catalog));
    shape.job.id = w.id;
    shape.job.submit = sched::Seconds{w.created_ms / 1000};
    jobs[w.id] = KnownJob{shape, w.created_ms};
    if (w.state == WorkloadState::kRunning) {
      StatusOr<StoredPlacement> p = ParsePlacementJson(w.placement_json);
      Status st = p.ok() ? live->Adopt(shape.job, p->pods, sched::Seconds{w.start_ms.value_or(now) / 1000}, p->seq)
                         : p.status();
      if (!st.ok()) requeue.push_back(w.id);  // its node is lost, or it no longer fits there
      continue;
    }
    Status st = live->SubmitRestored(shape.job, ReasonFromName(w.wait_reason));
    if (st.code() == StatusCode::kFailedPrecondition) parked.insert(w.id);
    else if (!st.ok()) reject.push_back({w.id, std::string(st.message())});
  }
  if (!requeue.empty() || !reject.empty()) {
    const Status fixed = Transact("restore", [&](store::Transaction& tx) -> Status {
      TESSERA_RETURN_IF_ERROR(PersistRequeue(requeue, "its node was not there when the control plane restarted", tx, now));
      for (const auto& [id, why] : reject) {
        TESSERA_ASSIGN_OR_RETURN(store::WorkloadRecord w, tx.GetWorkload(id));
        w.state = WorkloadState::kRejected;
        w.wait_reason = why;
        w.updated_ms = now;
        TESSERA_RETURN_IF_ERROR(tx.UpdateWorkload(w).status());
        TESSERA_RETURN_IF_ERROR(tx.AppendWorkloadEvent({0, id, now, "rejected", why}).status());
      }
      return Status::Ok();
    });
    if (!fixed.ok()) return fixed;
    for (const auto& [id, why] : reject) jobs.erase(id);
    for (sched::JobId id : requeue) Queue(id);
  }
  UpdateGauges();
  return Status::Ok();
}

void ControlPlane::Impl::UpdateGauges() {
  std::map<std::pair<std::string, std::string>, int> queued;
  for (const auto& [name, t] : tenant_service->tenants_locked())
    for (int q = 0; q < sched::kQosClassCount; ++q)
      queued[{name, std::string(sched::QosName(static_cast<sched::QosClass>(q)))}] = 0;
  for (const auto& [id, j] : jobs)
    if (parked.count(id) || live->is_pending(id))
      queued[{j.shape.request.tenant, std::string(sched::QosName(j.shape.request.qos))}]++;
  for (const auto& [key, n] : queued) m.queue_length->Set({key.first, key.second}, n);
  HistoryPoint point{.t_s = NowMs() / 1000};
  for (const auto& [key, n] : queued)
    if (n > 0) point.pending[key.first] += n;
  const sched::TenantTree& tree = live->tenants();
  for (sched::TenantIndex t = 0; t < tree.size(); ++t) {
    if (StatusOr<sched::Resources> use = live->usage(tree.name(t)); use.ok()) {
      m.tenant_gpu_milli->Set({tree.name(t)}, static_cast<double>((*use)[sched::kGpuMilliDim]));
      // Workloads run in leaf tenants: a parent's usage is its children's, stacked once.
      if (tree.is_leaf(t) && (*use)[sched::kGpuMilliDim] > 0) point.held_milli[tree.name(t)] = (*use)[sched::kGpuMilliDim];
    }
    m.tenant_guaranteed_milli->Set({tree.name(t)}, static_cast<double>(tree.spec(t).guaranteed[sched::kGpuMilliDim]));
  }
  int ready = 0, cordoned = 0;
  for (const auto& v : live->nodes()) {
    (v.state == sched::NodeState::kReady ? ready : cordoned)++;
    std::vector<double>& published = gpu_allocated_published[v.name];
    for (size_t g = 0; g < v.gpu_free_milli.size(); ++g) {
      const double allocated = 1000.0 - v.gpu_free_milli[g];
      if (g >= published.size() || published[g] != allocated) {
        m.gpu_allocated_milli->Set({v.name, std::to_string(g)}, allocated);
        if (g >= published.size()) published.resize(g + 1, -1.0);
        published[g] = allocated;
      }
      if (v.state == sched::NodeState::kReady && v.gpu_free_milli[g] >= 1000) ++point.idle_gpus;
    }
  }
  if (std::optional<HistoryPoint> closed = history.Record(std::move(point))) StoreHistoryPoint(*closed);
  m.nodes->Set({std::string(NodeStateName(NodeState::kReady))}, ready);
  m.nodes->Set({std::string(NodeStateName(NodeState::kCordoned))}, cordoned);
  m.nodes->Set({std::string(NodeStateName(NodeState::kLost))}, static_cast<double>(lost_nodes.size()));
}

Status ControlPlane::Impl::CycleOnce() {
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t now = NowMs();
  const sched::Seconds secs{now / 1000};
  // Nodes silent for too long are lost; their work goes back to the queue.
  LostNodes lost;
  for (const auto& [name, n] : nodes) {
    if (now - n.last_heartbeat_ms <= int64_t{opt.node_timeout_s} * 1000) continue;
    StatusOr<std::vector<sched::JobId>> ids = live->RemoveNode(name);
    if (ids.ok()) lost.push_back({name, *ids});
  }
  // Their work is queued again at once, so this very cycle may place it elsewhere; the store
  // learns both (requeued, then placed) in the cycle's one transaction.
  for (const auto& [name, ids] : lost) {
    nodes.erase(name);
    lost_nodes.insert(name);
    for (sched::JobId id : ids) Queue(id);
  }
  const sched::LiveCycleResult r = live->Cycle(secs);
  m.cycles->Inc({});
  if (!r.error.ok()) {
    loop_healthy = false;
    Status rs = Restore();
    loop_healthy = rs.ok();
    return r.error;
  }
  const bool nothing = lost.empty() && r.started.empty() && r.preempted.empty() && r.moves.empty() &&
                       r.waits.empty() && r.rejected.empty();
  if (!nothing) {
    // The cycle's one transaction: one step per decision kind, in this order.
    Status st = Transact("cycle", [&](store::Transaction& tx) -> Status {
      TESSERA_RETURN_IF_ERROR(PersistLostNodes(lost, tx, now));
      TESSERA_RETURN_IF_ERROR(PersistPreemptions(r.preempted, tx, now));
      TESSERA_RETURN_IF_ERROR(PersistStarts(r.started, tx, now));
      TESSERA_RETURN_IF_ERROR(PersistMoves(r.moves, tx, now));
      TESSERA_RETURN_IF_ERROR(PersistWaits(r.waits, tx, now));
      return PersistRejections(r.rejected, tx, now);
    });
    if (!st.ok()) {
      // Memory is ahead of the store: nothing of this cycle was reported; rebuild from the store.
      loop_healthy = false;
      Status rs = Restore();
      loop_healthy = rs.ok();
      return st;
    }
    CycleCommitted(r, now);
  }
  UpdateGauges();
  // The hours that are over: their anomalies and SLA observations (a failure to persist them is
  // not the cycle's: the scheduling decisions are durable already).
  (void)CloseAnomalyHours(now);
  m.cycle_seconds->Observe({}, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return Status::Ok();
}

Status ControlPlane::Impl::PersistLostNodes(const LostNodes& lost, store::Transaction& tx, int64_t now) {
  for (const auto& [name, ids] : lost) {
    TESSERA_ASSIGN_OR_RETURN(store::NodeRecord rec, tx.GetNode(name));
    rec.state = NodeState::kLost;
    TESSERA_RETURN_IF_ERROR(tx.PutNode(rec));
    TESSERA_RETURN_IF_ERROR(PersistRequeue(ids, "node '" + name + "' was lost (no heartbeat for " +
                                                    std::to_string(opt.node_timeout_s) + " s)",
                                           tx, now));
    TESSERA_RETURN_IF_ERROR(tx.AppendObjectEvent({"node", name, "", now, "node.lost",
                                                  "no heartbeat for " + std::to_string(opt.node_timeout_s) + " s; " +
                                                      std::to_string(ids.size()) +
                                                      (ids.size() == 1 ? " workload" : " workloads") + " requeued"})
                                .status());
  }
  return Status::Ok();
}

Status ControlPlane::Impl::PersistPreemptions(const std::vector<sched::PreemptEvent>& preempted, store::Transaction& tx,
                                              int64_t now) {
  for (const sched::PreemptEvent& p : preempted) {
    const std::string why = std::string(p.fair_share ? "fair share" : "reclaim") + ": for workload " +
                            std::to_string(p.by);
    TESSERA_RETURN_IF_ERROR(PersistPending(p.victim, "preempted", why, tx, now));
  }
  return Status::Ok();
}

Status ControlPlane::Impl::PersistStarts(const std::vector<sched::LiveStart>& started, store::Transaction& tx,
                                         int64_t now) {
  for (const sched::LiveStart& s : started) {
    TESSERA_ASSIGN_OR_RETURN(store::WorkloadRecord w, tx.GetWorkload(s.job));
    w.state = WorkloadState::kRunning;
    w.placement_json = PlacementJson(s.pods, s.seq);
    w.start_ms = now;
    w.wait_reason.clear();
    w.updated_ms = now;
    TESSERA_RETURN_IF_ERROR(tx.UpdateWorkload(w).status());
    std::string where;
    for (const sched::PodPlacement& p : s.pods) where += (where.empty() ? "" : ", ") + p.node + " " + GpuList(p.gpus).dump();
    TESSERA_RETURN_IF_ERROR(tx.AppendWorkloadEvent({0, s.job, now, "placed", where}).status());
  }
  return Status::Ok();
}

Status ControlPlane::Impl::PersistMoves(const std::vector<sched::LiveMove>& moves, store::Transaction& tx, int64_t now) {
  for (const sched::LiveMove& mv : moves) {
    TESSERA_ASSIGN_OR_RETURN(store::WorkloadRecord w, tx.GetWorkload(mv.job));
    TESSERA_ASSIGN_OR_RETURN(StoredPlacement p, ParsePlacementJson(w.placement_json));
    if (mv.pod < 0 || mv.pod >= static_cast<int>(p.pods.size()))
      return InternalError("move of workload " + std::to_string(mv.job) + ": no pod " + std::to_string(mv.pod));
    p.pods[mv.pod] = mv.to;
    w.placement_json = PlacementJson(p.pods, mv.seq);
    if (mv.restart) w.start_ms = now;
    w.updated_ms = now;
    TESSERA_RETURN_IF_ERROR(tx.UpdateWorkload(w).status());
    TESSERA_RETURN_IF_ERROR(tx.AppendWorkloadEvent({0, mv.job, now, "moved",
                                                    mv.from.node + " " + GpuList(mv.from.gpus).dump() + " -> " +
                                                        mv.to.node + " " + GpuList(mv.to.gpus).dump() +
                                                        (mv.restart ? " (restarted)" : "")})
                                .status());
  }
  return Status::Ok();
}

Status ControlPlane::Impl::PersistWaits(const std::vector<sched::LiveWait>& waits, store::Transaction& tx, int64_t now) {
  for (const sched::LiveWait& wt : waits) {
    TESSERA_ASSIGN_OR_RETURN(store::WorkloadRecord w, tx.GetWorkload(wt.job));
    w.wait_reason = WaitReasonText(wt.job, wt.reason);  // control_plane_mig.cc
    w.updated_ms = now;
    TESSERA_RETURN_IF_ERROR(tx.UpdateWorkload(w).status());
  }
  return Status::Ok();
}

Status ControlPlane::Impl::PersistRejections(const std::vector<sched::LiveRejection>& rejected, store::Transaction& tx,
                                             int64_t now) {
  for (const sched::LiveRejection& x : rejected) {
    TESSERA_ASSIGN_OR_RETURN(store::WorkloadRecord w, tx.GetWorkload(x.job));
    w.state = WorkloadState::kRejected;
    w.wait_reason = x.reason;
    w.updated_ms = now;
    TESSERA_RETURN_IF_ERROR(tx.UpdateWorkload(w).status());
    TESSERA_RETURN_IF_ERROR(tx.AppendWorkloadEvent({0, x.job, now, "rejected", x.reason}).status());
  }
  return Status::Ok();
}

void ControlPlane::Impl::CycleCommitted(const sched::LiveCycleResult& r, int64_t now) {
  for (const sched::LiveStart& s : r.started) {
    auto j = jobs.find(s.job);
    if (j == jobs.end()) continue;
    m.starts->Inc({j->second.shape.request.tenant});
    m.wait_seconds->Observe({std::string(sched::QosName(j->second.shape.request.qos))},
                            static_cast<double>(now - j->second.submit_ms) / 1000.0);
    anomaly_service->ObserveStart(j->second.shape.request.tenant,
                                  j->second.shape.request.qos == sched::QosClass::kGuaranteed, now / 1000,
                                  static_cast<double>(now - j->second.submit_ms) / 1000.0);
  }
  for (const sched::PreemptEvent& p : r.preempted) {
    auto j = jobs.find(p.victim);
    m.preemptions->Inc({j == jobs.end() ? "" : j->second.shape.request.tenant, p.fair_share ? "fair_share" : "reclaim"});
    if (j != jobs.end()) anomaly_service->ObservePreemption(j->second.shape.request.tenant, now / 1000);
  }
  for (const sched::LiveRejection& x : r.rejected) {
    if (auto j = jobs.find(x.job); j != jobs.end()) anomaly_service->ObserveRefusal(j->second.shape.request.tenant, now / 1000);
    jobs.erase(x.job);
    m.rejections->Inc({"quota_changed"});
  }
}

}  // namespace tessera::daemon
