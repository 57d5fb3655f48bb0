#include "tessera/api/json_fields.h"

#include "tessera/core/json_error.h"

#include <algorithm>
#include <cmath>

namespace tessera::api {

using json = nlohmann::json;

StatusOr<json> ParseJsonObject(std::string_view body) {
  json j = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return InvalidArgumentError("the body is not JSON (error at character " + std::to_string(JsonErrorOffset(body)) +
                                ", counting from 1)");
  }
  if (!j.is_object()) return InvalidArgumentError("the body must be a JSON object");
  return j;
}

std::string JsonTypeName(const json& v) {
  if (v.is_number_integer()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_null()) return "null";
  if (v.is_array()) return "an array";
  return "an object";
}

Status JsonFields::Fail(const std::string& field, const std::string& message) const {
  if (bad_field_) *bad_field_ = prefix_ + field;
  return InvalidArgumentError(prefix_ + field + ": " + message);
}

Status JsonFields::Require(const std::string& field) const {
  return j_.contains(field) ? Status::Ok() : Fail(field, "missing");
}

Status JsonFields::OnlyKnown(std::initializer_list<std::string_view> known) const {
  for (const auto& [key, value] : j_.items()) {
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    std::string list;
    for (std::string_view k : known) list += (list.empty() ? "" : ", ") + std::string(k);
    return Fail(key, "unknown field (known: " + list + ")");
  }
  return Status::Ok();
}

StatusOr<int64_t> JsonFields::Int(const std::string& field, int64_t lo, int64_t hi, int64_t absent) const {
  auto it = j_.find(field);
  if (it == j_.end()) return absent;
  if (!it->is_number_integer()) return Fail(field, "expected an integer, got " + JsonTypeName(*it));
  const bool is_unsigned = it->is_number_unsigned();
  const uint64_t u = is_unsigned ? it->get<uint64_t>() : 0;
  const std::string range = " is out of range " + std::to_string(lo) + ".." + std::to_string(hi);
  if (is_unsigned && u > static_cast<uint64_t>(INT64_MAX)) return Fail(field, it->dump() + range);
  const int64_t v = is_unsigned ? static_cast<int64_t>(u) : it->get<int64_t>();
  if (v < lo || v > hi) return Fail(field, std::to_string(v) + range);
  return v;
}

StatusOr<std::string> JsonFields::Str(const std::string& field, size_t max_len) const {
  auto it = j_.find(field);
  if (it == j_.end()) return std::string();
  if (!it->is_string()) return Fail(field, "expected a string, got " + JsonTypeName(*it));
  std::string s = it->get<std::string>();
  if (s.empty()) return Fail(field, "must not be empty");
  if (s.size() > max_len) return Fail(field, "longer than " + std::to_string(max_len) + " characters");
  return s;
}

StatusOr<double> JsonFields::Number(const std::string& field) const {
  auto it = j_.find(field);
  if (it == j_.end()) return std::nan("");
  if (!it->is_number()) return Fail(field, "expected a number, got " + JsonTypeName(*it));
  return it->get<double>();
}

StatusOr<bool> JsonFields::Bool(const std::string& field, bool absent) const {
  auto it = j_.find(field);
  if (it == j_.end()) return absent;
  if (!it->is_boolean()) return Fail(field, "expected a boolean, got " + JsonTypeName(*it));
  return it->get<bool>();
}

StatusOr<json> JsonFields::Object(const std::string& field) const {
  auto it = j_.find(field);
  if (it == j_.end()) return json::object();
  if (!it->is_object()) return Fail(field, "expected an object, got " + JsonTypeName(*it));
  return *it;
}

StatusOr<json> JsonFields::Array(const std::string& field) const {
  auto it = j_.find(field);
  if (it == j_.end()) return json::array();
  if (!it->is_array()) return Fail(field, "expected an array, got " + JsonTypeName(*it));
  return *it;
}

StatusOr<std::vector<std::string>> JsonFields::Strings(const std::string& field) const {
  TESSERA_ASSIGN_OR_RETURN(const json list, Array(field));
  std::vector<std::string> out;
  out.reserve(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    if (!list[i].is_string())
      return Fail(field + "[" + std::to_string(i) + "]", "expected a string, got " + JsonTypeName(list[i]));
    out.push_back(list[i].get<std::string>());
  }
  return out;
}

StatusOr<JsonFields> JsonFields::Nested(const json& v, const std::string& field) const {
  if (!v.is_object()) return Fail(field, "expected an object, got " + JsonTypeName(v));
  return JsonFields(v, prefix_ + field + ".", bad_field_);
}

}  // namespace tessera::api
