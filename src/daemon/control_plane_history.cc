// GET /v1/history (decode -> HistoryService -> render): the Cluster page's series over time
// (ClusterHistory), filtered like /v1/usage:
// an admin or viewer sees every tenant and the idle GPUs, a tenant token its subtree's tenants
// (and no idle GPUs: the nodes are the cluster's). docs/api.md, "History". The history's
// persistence: StoreHistoryPoint, LoadHistory.
#include <chrono>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "src/daemon/control_plane_impl.h"
#include "src/daemon/usage_codec.h"

namespace tessera::daemon {

using nlohmann::json;

// One small row per closed step, in its own transaction (the loop's, mu held: a few ms every 5 s),
// with what fell out of the kept window. A failed write costs that point after a restart only.
void ControlPlane::Impl::StoreHistoryPoint(const HistoryPoint& point) {
  const store::HistoryPointRecord row{.t_s = point.t_s, .body = ClusterHistory::EncodeBody(point)};
  const int64_t before_s = point.t_s - history.keep_s();
  const auto t0 = std::chrono::steady_clock::now();
  const Status st = db->Transact([&](store::Transaction& tx) -> Status {
    TESSERA_RETURN_IF_ERROR(tx.PutHistoryPoint(row));
    return tx.DeleteHistoryPointsBefore(before_s).status();
  });
  m.store_latency->Observe({"history"},
                           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  if (!st.ok())
    std::fprintf(stderr, "tessera serve: storing the history point at %lld: %s\n", static_cast<long long>(point.t_s),
                 std::string(st.message()).c_str());
}

// The stored points of the kept window, before anything this run recorded. A row that does not
// decode is left out (and said so): the history is for drawing, not a reason not to start.
Status ControlPlane::Impl::LoadHistory() {
  std::vector<store::HistoryPointRecord> rows;
  TESSERA_RETURN_IF_ERROR(Transact("read", [&](store::Transaction& tx) -> Status {
    TESSERA_ASSIGN_OR_RETURN(rows, tx.ListHistoryPoints(NowMs() / 1000 - history.keep_s()));
    return Status::Ok();
  }));
  std::vector<HistoryPoint> points;
  points.reserve(rows.size());
  for (const store::HistoryPointRecord& row : rows) {
    StatusOr<HistoryPoint> p = ClusterHistory::DecodeBody(row.t_s, row.body);
    if (p.ok()) {
      points.push_back(std::move(*p));
    } else {
      std::fprintf(stderr, "tessera serve: history: %s; left out\n", std::string(p.status().message()).c_str());
    }
  }
  history.Preload(points);
  return Status::Ok();
}

HttpResponse ControlPlane::Impl::GetHistory(const HttpRequest& r, const Caller& c) {
  std::string field;
  StatusOr<ReadQuery> q = ParseReadQuery(r.query, &field);
  if (!q.ok()) return ErrorResponse(q.status(), field);
  HistoryQuery query{q->tenant, q->from_s, std::nullopt};
  if (auto it = r.query.find("step"); it != r.query.end()) query.step = it->second;
  StatusOr<HistoryAnswer> a = history_service->Read(ReadCallerOf(c), query, &field);
  if (!a.ok()) return ErrorResponse(a.status(), field);
  const HistoryWindow& w = a->window;
  json answer = {{"from", a->from_s},
                 {"step_s", w.step_s},
                 {"recorded_every_s", a->recorded_every_s},
                 {"kept_s", a->kept_s},
                 {"t", w.t_s},
                 {"held_milli", json(w.held_milli)},
                 {"pending", json(w.pending)}};
  answer["idle_gpus"] = a->idle_gpus ? json(w.idle_gpus) : json(nullptr);
  return HttpResponse::Json(200, answer.dump());
}

}  // namespace tessera::daemon
