// Reading JSON bodies field by field, with errors that name the field: the one field reader of
// the wire contract. The api module's codecs (node_wire.h, usage_wire.h) and the daemon's
// request decoders (workloads, tenants, tokens) use it; nothing else reads a peer's JSON.
// nlohmann::json appears in this header's signatures (the project's one JSON library); the typed
// codecs of this module take and give strings and structs only.
//
//   StatusOr<nlohmann::json> j = ParseJsonObject(R"({"name": "a", "weight": "2"})");
//   JsonFields f(*j, "quota.", &bad_field);       // field names in messages get the prefix
//   f.Int("weight", 1, 100, 1)  -> INVALID_ARGUMENT "quota.weight: expected an integer, got a
//                                  string", bad_field == "quota.weight"
//   f.OnlyKnown({"name", "weight"})  -> OK; with {"name"} -> "quota.weight: unknown field
//                                  (known: name)"
//
// Thread-safety: a JsonFields is used by one thread; ParseJsonObject is a pure function.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/core/status.h"

namespace tessera::api {

// The body as a JSON object. INVALID_ARGUMENT "the body is not JSON (error at character N,
// counting from 1)" or "the body must be a JSON object".
StatusOr<nlohmann::json> ParseJsonObject(std::string_view body);

// "an integer", "a string", ... for messages.
std::string JsonTypeName(const nlohmann::json& v);

class JsonFields {
 public:
  // `prefix` is put before every field name in messages ("quota.guaranteed."); `bad_field`
  // (may be null) receives the full name of the field a refusal is about.
  JsonFields(const nlohmann::json& object, std::string prefix, std::string* bad_field)
      : j_(object), prefix_(std::move(prefix)), bad_field_(bad_field) {}

  Status Fail(const std::string& field, const std::string& message) const;
  bool Has(const std::string& field) const { return j_.contains(field); }
  Status Require(const std::string& field) const;
  // Every key of the object is one of `known` (else the first unknown one is refused).
  Status OnlyKnown(std::initializer_list<std::string_view> known) const;

  // The integer at `field` within [lo, hi], or `absent` when the object has no such field.
  // (Plain values, no std::optional: GCC 12 warns maybe-uninitialized on optional<string>
  // through StatusOr under -fsanitize=thread.)
  StatusOr<int64_t> Int(const std::string& field, int64_t lo, int64_t hi, int64_t absent) const;
  // The string at `field`, 1..max_len characters; "" when absent (an empty one is refused).
  StatusOr<std::string> Str(const std::string& field, size_t max_len) const;
  // The number at `field`; NaN when absent.
  StatusOr<double> Number(const std::string& field) const;
  StatusOr<bool> Bool(const std::string& field, bool absent) const;
  // The object at `field` (an empty object when absent).
  StatusOr<nlohmann::json> Object(const std::string& field) const;
  // The array at `field` (an empty array when absent).
  StatusOr<nlohmann::json> Array(const std::string& field) const;
  // The array of strings at `field` (empty when absent); elements may be empty strings (a
  // command's argument may be). A non-string element is refused naming "field[i]".
  StatusOr<std::vector<std::string>> Strings(const std::string& field) const;
  // A reader of the object `v` found at `field` ("gpus[2]"), whose messages are prefixed
  // "<prefix><field>."; INVALID_ARGUMENT "field: expected an object, got ..." when it is not one.
  StatusOr<JsonFields> Nested(const nlohmann::json& v, const std::string& field) const;

  const std::string& prefix() const { return prefix_; }
  std::string* bad_field() const { return bad_field_; }

 private:
  const nlohmann::json& j_;
  std::string prefix_;
  std::string* bad_field_;
};

}  // namespace tessera::api
