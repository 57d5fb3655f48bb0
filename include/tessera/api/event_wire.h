// Events and the error envelope of the wire contract (docs/api.md, "Events", "Errors"): what
// GET /v1/events streams as the `data:` of each server-sent event, and the body of every 4xx/5xx
// answer. The control plane writes them (src/daemon/event_feed.cc, http_server.cc); `tessera ctl
// events`, the API client, the node agent and the control plane's refusal audit read them.
//
// Event: a workload event names its workload and tenant; an object event names its object by its
// subject's key, and a token event also its tenant (null for an admin token):
//   {"detail":"","id":41,"kind":"placed","tenant":"ml","time_ms":1700000000000,"workload":7}
//   {"detail":"","id":42,"kind":"node.cordoned","node":"n1","time_ms":1700000000500}
//   {"detail":"","id":43,"kind":"token.revoked","tenant":null,"time_ms":...,"token":"t9"}
//   {"detail":"","id":44,"kind":"tenant.created","tenant":"ml","time_ms":...}
// so Event{.subject = "tenant", .name = "ml"} is the last one, and DecodeEvent tells the subject
// by which key is there (workload, node, token; else tenant).
//
// Error envelope: {"error": {"code": "invalid_argument", "message": "gpus: missing",
//                            "field": "gpus"}}  ("field" only when the refusal names one).
//   DecodeErrorEnvelope(R"({"error":{"code":"x","mesage":"m"}})", &f)
//     -> "error.mesage: unknown field (known: code, message, field)", f == "error.mesage"
//
// Encoders write keys in order and replace invalid UTF-8 (a detail may quote a client's bytes),
// so Encode(Decode(Encode(x))) is the same bytes. Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tessera/core/status.h"

namespace tessera::api {

struct Event {
  int64_t id = 0;                   // >= 1
  std::string subject = "workload";  // "workload", "node", "tenant" or "token"
  int64_t workload = 0;             // subject "workload": the workload's id (>= 1)
  std::string name;                 // the node's, tenant's or token's name (other subjects)
  std::string tenant;  // a workload's tenant; a token's ("" written null); unused for node, tenant
  int64_t time_ms = 0;
  std::string kind;
  std::string detail;
  friend bool operator==(const Event&, const Event&) = default;
};

std::string EncodeEvent(const Event& event);
StatusOr<Event> DecodeEvent(std::string_view body, std::string* bad_field);

struct ErrorEnvelope {
  std::string code;     // "invalid_argument", "not_found", "forbidden", ...
  std::string message;  // may be ""
  std::string field;    // left out when ""
  friend bool operator==(const ErrorEnvelope&, const ErrorEnvelope&) = default;
};

std::string EncodeErrorEnvelope(const ErrorEnvelope& error);
StatusOr<ErrorEnvelope> DecodeErrorEnvelope(std::string_view body, std::string* bad_field);

}  // namespace tessera::api
