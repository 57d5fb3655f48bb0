// libFuzzer target for the control plane's request decoding: the bytes are one HTTP/1.1
// request as a client would send it. daemon::ParseHttpRequest (Boost.Beast's parser with the
// server's limits, then tessera's conversion: percent-decoding of path and query, header names)
// must never crash, trip a sanitizer or hang; what it accepts goes through the server's router
// (HttpServer::Handle, not started) and its body through the workload decoder
// (DecodeWorkloadRequest: a refusal is INVALID_ARGUMENT, an acceptance keeps its ranges); the router's answer must be one of the statuses the router gives
// (200 from a route, 400, 404, 405) with a JSON body that parses, and a 405 names what is allowed.
// The body also goes through the control plane's other decoders (tenant bodies, node
// inventories), each of which may refuse only with INVALID_ARGUMENT; an accepted workload
// request survives its own encoding (Encode then Decode gives the same request), and its
// resolution to a mode and a pod is refused only with INVALID_ARGUMENT or stored and read back.
// The usage decoder (a node agent's batch) refuses a body only with INVALID_ARGUMENT or
// RESOURCE_EXHAUSTED (too many samples); each sample it refuses names a field of that sample,
// and each it accepts keeps the rules (end after start, quantities >= 0, used <= allocated <=
// one GPU) and goes through the metering ledger (Check then Ingest agree); the query's
// from/to go through the usage time parser (refused only with INVALID_ARGUMENT). The body also
// goes through every decoder of the api module (inventory, heartbeat and its answer, register
// answer, desired state; workload request, submit answer, view and page; event; error envelope):
// refused only with INVALID_ARGUMENT, and what one accepts survives Encode then Decode unchanged.
//
// Build and run: tests/fuzz/run.sh [seconds].
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "src/daemon/http_server.h"
#include "src/daemon/api_codec.h"
#include "src/daemon/usage_codec.h"
#include "src/daemon/workload_request.h"
#include "src/daemon/workload_shape.h"
#include "tessera/api/event_wire.h"
#include "tessera/api/node_wire.h"
#include "tessera/api/workload_wire.h"
#include "tessera/core/gpu_model.h"

namespace {

tessera::daemon::HttpServer& Server() {
  static tessera::daemon::HttpServer* server = [] {
    auto* s = new tessera::daemon::HttpServer({.listen_host = "127.0.0.1", .listen_port = 0,
                                               .max_body_bytes = 2048});
    const auto echo = [](const tessera::daemon::HttpRequest& r) {
      return tessera::daemon::HttpResponse::Json(
          200, nlohmann::json{{"params", r.path_params}, {"query", r.query}}.dump(
                   -1, ' ', false, nlohmann::json::error_handler_t::replace));
    };
    if (!s->Route("GET", "/v1/workloads/{id}", echo).ok() ||
        !s->Route("POST", "/v1/workloads", echo).ok() ||
        !s->Route("GET", "/v1/tenants/{name}/usage", echo).ok())
      std::abort();
    return s;
  }();
  return *server;
}

// The usage endpoints' decoding (see the header comment); aborts on a broken rule.
void CheckUsage(const tessera::daemon::HttpRequest& req) {
  using tessera::StatusCode;
  std::string field;
  auto batch = tessera::daemon::DecodeUsageBatch("n1", req.body, &field, 8);
  if (!batch.ok()) {
    const auto code = batch.status().code();
    if (code != StatusCode::kInvalidArgument && code != StatusCode::kResourceExhausted) std::abort();
  } else {
    tessera::metering::Ledger ledger;
    for (const tessera::daemon::UsageItem& item : *batch) {
      const std::string at = "samples[" + std::to_string(item.index) + "]";
      if (!item.error.ok()) {
        if (item.error.code() != StatusCode::kInvalidArgument || !item.field.starts_with(at)) std::abort();
        continue;
      }
      const tessera::store::UsageSampleRecord& s = item.sample;
      const int64_t span = s.end_s - s.start_s;
      if (s.node != "n1" || span <= 0 || s.seq < 0 || s.gpu_milli_s_used < 0 ||
          s.gpu_milli_s_used > 1000 * span || s.gpu_milli_s_allocated > 1000 * span ||
          s.memory_mib_s < 0 || s.peak_memory_mib < 0 || s.kernel_launches < 0 || s.bytes_transferred < -1)
        std::abort();
      const auto key = tessera::daemon::UsageSourceKey(s);
      const auto values = tessera::daemon::UsageValues(s);
      auto check = ledger.Check(key, values);
      auto in = ledger.Ingest(key, values);
      if (check.ok() != in.ok() || (check.ok() && *check != *in)) std::abort();
      if (!check.ok() && !tessera::daemon::LedgerErrorField(check.status(), item.index).starts_with(at)) std::abort();
    }
  }
  for (const char* key : {"from", "to"}) {
    auto it = req.query.find(key);
    if (it == req.query.end()) continue;
    auto t = tessera::daemon::ParseUsageTime(it->second, key);
    if (!t.ok() && t.status().code() != StatusCode::kInvalidArgument) std::abort();
  }
}

// Every message of the api module (node_wire.h, workload_wire.h, event_wire.h): each decoder refuses only with
// INVALID_ARGUMENT, and what it accepts survives its own encoding (Decode(Encode(x)) == x).
void CheckNodeWire(const std::string& body) {
  namespace api = tessera::api;
  std::string field;
  const auto round_trip = [&](auto decoded, auto encode, auto decode) {
    if (!decoded.ok()) {
      if (decoded.status().code() != tessera::StatusCode::kInvalidArgument) std::abort();
      return;
    }
    auto again = decode(encode(*decoded), &field);
    if (!again.ok() || !(*again == *decoded)) std::abort();
  };
  round_trip(api::DecodeNodeInventory(body, &field), api::EncodeNodeInventory, api::DecodeNodeInventory);
  round_trip(api::DecodeHeartbeat(body, &field), api::EncodeHeartbeat, api::DecodeHeartbeat);
  round_trip(api::DecodeHeartbeatAnswer(body, &field), api::EncodeHeartbeatAnswer, api::DecodeHeartbeatAnswer);
  round_trip(api::DecodeRegisterAnswer(body, &field), api::EncodeRegisterAnswer, api::DecodeRegisterAnswer);
  round_trip(api::DecodeDesiredState(body, &field), api::EncodeDesiredState, api::DecodeDesiredState);
  round_trip(api::DecodeWorkloadRequest(body, &field), api::EncodeWorkloadRequest, api::DecodeWorkloadRequest);
  round_trip(api::DecodeWorkloadCreated(body, &field), api::EncodeWorkloadCreated, api::DecodeWorkloadCreated);
  round_trip(api::DecodeWorkloadView(body, &field), api::EncodeWorkloadView, api::DecodeWorkloadView);
  round_trip(api::DecodeWorkloadPage(body, &field), api::EncodeWorkloadPage, api::DecodeWorkloadPage);
  round_trip(api::DecodeEvent(body, &field), api::EncodeEvent, api::DecodeEvent);
  round_trip(api::DecodeErrorEnvelope(body, &field), api::EncodeErrorEnvelope, api::DecodeErrorEnvelope);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view raw(reinterpret_cast<const char*>(data), size);
  auto req = tessera::daemon::ParseHttpRequest(raw, {.max_body_bytes = 2048});
  if (!req.ok()) {
    const auto code = req.status().code();
    if (code != tessera::StatusCode::kInvalidArgument && code != tessera::StatusCode::kResourceExhausted)
      std::abort();
    return 0;
  }
  if (req->body.size() > 2048) std::abort();
  // The body as a workload submission: refused only with INVALID_ARGUMENT, naming a field that
  // exists in the body (or none for the body as a whole).
  std::string field;
  auto workload = tessera::daemon::DecodeWorkloadRequest(req->body, tessera::GpuModelCatalog::Builtin(), &field);
  if (!workload.ok() && workload.status().code() != tessera::StatusCode::kInvalidArgument) std::abort();
  if (workload.ok() && (workload->gpus < 1 || workload->gpu_milli < 1 || workload->gpu_milli > 1000 ||
                        (workload->gpu_milli < 1000 && workload->gpus != 1)))
    std::abort();
  const auto& catalog = tessera::GpuModelCatalog::Builtin();
  const auto only_invalid = [](const tessera::Status& st) {
    if (!st.ok() && st.code() != tessera::StatusCode::kInvalidArgument) std::abort();
  };
  if (workload.ok()) {
    auto again = tessera::daemon::DecodeWorkloadRequest(tessera::daemon::EncodeWorkloadRequest(*workload, catalog),
                                                        catalog, &field);
    if (!again.ok() || !(*again == *workload)) std::abort();
    auto shape = tessera::daemon::ResolveWorkload(*workload, catalog.Find("H100-80GB").value(), catalog, &field);
    only_invalid(shape.status());
    if (shape.ok()) {
      if (!tessera::placement::ValidateTask(shape->job.pod).ok()) std::abort();
      auto stored = tessera::daemon::ParseWorkloadSpec(tessera::daemon::WorkloadSpecJson(*shape, catalog), catalog);
      if (!stored.ok() || !(stored->job.pod == shape->job.pod)) std::abort();
    }
  }
  only_invalid(tessera::daemon::DecodeTenantBody(req->body, true, catalog, &field).status());
  only_invalid(tessera::daemon::DecodeTenantBody(req->body, false, catalog, &field).status());
  auto inventory = tessera::daemon::DecodeNodeInventory("n1", req->body, catalog, &field);
  only_invalid(inventory.status());
  if (inventory.ok() && (inventory->spec.gpu_count < 0 || inventory->spec.gpu_count > 16)) std::abort();
  CheckUsage(*req);
  CheckNodeWire(req->body);
  const tessera::daemon::HttpResponse res = Server().Handle(*req);
  if (res.status != 200 && res.status != 400 && res.status != 404 && res.status != 405) std::abort();
  if (!nlohmann::json::accept(res.body)) std::abort();
  if (res.status == 405 && res.headers.empty()) std::abort();
  return 0;
}
