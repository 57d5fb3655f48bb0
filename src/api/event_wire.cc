#include "tessera/api/event_wire.h"

#include <nlohmann/json.hpp>

#include "src/api/wire_json.h"
#include "tessera/api/json_fields.h"

namespace tessera::api {

using json = nlohmann::json;

namespace {

StatusOr<std::string> MaybeEmpty(const json& j, const JsonFields& f, const std::string& field) {
  if (!j.contains(field)) return std::string();
  if (!j[field].is_string()) return f.Fail(field, "expected a string, got " + JsonTypeName(j[field]));
  return j[field].get<std::string>();
}

}  // namespace

std::string EncodeEvent(const Event& e) {
  json data = {{"id", e.id}, {"time_ms", e.time_ms}, {"kind", e.kind}, {"detail", e.detail}};
  if (e.subject == "workload") {
    data["workload"] = e.workload;
    data["tenant"] = e.tenant;
  } else {
    // An object event names its object by its subject ("node": "node-1"); a tenant event's
    // tenant is the tenant itself.
    data[e.subject] = e.name;
    if (e.subject == "token") data["tenant"] = e.tenant.empty() ? json(nullptr) : json(e.tenant);
  }
  return Dump(data);
}

StatusOr<Event> DecodeEvent(std::string_view body, std::string* bad_field) {
  if (bad_field) bad_field->clear();
  TESSERA_ASSIGN_OR_RETURN(const json j, ParseJsonObject(body));
  JsonFields f(j, "", bad_field);
  TESSERA_RETURN_IF_ERROR(f.OnlyKnown({"id", "workload", "node", "token", "tenant", "time_ms", "kind", "detail"}));
  for (const char* required : {"id", "time_ms", "kind"}) TESSERA_RETURN_IF_ERROR(f.Require(required));
  Event e;
  TESSERA_ASSIGN_OR_RETURN(e.id, f.Int("id", 1, INT64_MAX, 0));
  TESSERA_ASSIGN_OR_RETURN(e.time_ms, f.Int("time_ms", 0, INT64_MAX, 0));
  TESSERA_ASSIGN_OR_RETURN(e.kind, f.Str("kind", 64));
  TESSERA_ASSIGN_OR_RETURN(e.detail, MaybeEmpty(j, f, "detail"));
  const int objects = static_cast<int>(j.contains("workload")) + static_cast<int>(j.contains("node")) +
                      static_cast<int>(j.contains("token"));
  if (objects > 1) return f.Fail(j.contains("token") ? "token" : "node", "an event has one subject");
  if (j.contains("workload")) {
    e.subject = "workload";
    TESSERA_RETURN_IF_ERROR(f.Require("tenant"));
    TESSERA_ASSIGN_OR_RETURN(e.workload, f.Int("workload", 1, INT64_MAX, 0));
    TESSERA_ASSIGN_OR_RETURN(e.tenant, f.Str("tenant", 253));
  } else if (j.contains("node")) {
    e.subject = "node";
    if (j.contains("tenant")) return f.Fail("tenant", "a node event has no tenant");
    TESSERA_ASSIGN_OR_RETURN(e.name, f.Str("node", 253));
  } else if (j.contains("token")) {
    e.subject = "token";
    TESSERA_ASSIGN_OR_RETURN(e.name, f.Str("token", 253));
    TESSERA_RETURN_IF_ERROR(f.Require("tenant"));
    if (!j["tenant"].is_null()) {
      TESSERA_ASSIGN_OR_RETURN(e.tenant, f.Str("tenant", 253));
    }
  } else {
    e.subject = "tenant";
    TESSERA_RETURN_IF_ERROR(f.Require("tenant"));
    TESSERA_ASSIGN_OR_RETURN(e.name, f.Str("tenant", 253));
  }
  return e;
}

std::string EncodeErrorEnvelope(const ErrorEnvelope& e) {
  json inner = {{"code", e.code}, {"message", e.message}};
  if (!e.field.empty()) inner["field"] = e.field;
  return Dump(json{{"error", std::move(inner)}});
}

StatusOr<ErrorEnvelope> DecodeErrorEnvelope(std::string_view body, std::string* bad_field) {
  if (bad_field) bad_field->clear();
  TESSERA_ASSIGN_OR_RETURN(const json j, ParseJsonObject(body));
  JsonFields f(j, "", bad_field);
  TESSERA_RETURN_IF_ERROR(f.OnlyKnown({"error"}));
  TESSERA_RETURN_IF_ERROR(f.Require("error"));
  TESSERA_ASSIGN_OR_RETURN(const JsonFields e, f.Nested(j["error"], "error"));
  TESSERA_RETURN_IF_ERROR(e.OnlyKnown({"code", "message", "field"}));
  TESSERA_RETURN_IF_ERROR(e.Require("code"));
  ErrorEnvelope out;
  TESSERA_ASSIGN_OR_RETURN(out.code, e.Str("code", 64));
  TESSERA_ASSIGN_OR_RETURN(out.message, MaybeEmpty(j["error"], e, "message"));
  TESSERA_ASSIGN_OR_RETURN(out.field, e.Str("field", 253));
  return out;
}

}  // namespace tessera::api
