// A small checker of JSON values against the OpenAPI v3 component schemas Kubernetes publishes
// (tests/k8s/schema/resource.k8s.io_v1.json, see the README there). It knows what those schemas
// use: $ref, allOf, oneOf, type (object, array, string, integer, number, boolean), format
// (int32/int64 ranges), properties (a field not listed is refused, as the API server's strict
// field validation refuses it), additionalProperties, required, items, enum, and
// x-kubernetes-group-version-kind (apiVersion and kind must be one the schema names). An object
// schema with neither properties nor additionalProperties (RawExtension, FieldsV1) takes anything.
//
//   SchemaSet s = SchemaSet::Load(path);
//   s.Check(slice, "io.k8s.api.resource.v1.ResourceSlice")
//     -> {} when valid, else {"spec.devices[0].allowMultipleAllocation: unknown field", ...}
#pragma once

#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tessera::k8s::testing {

class SchemaSet {
 public:
  using json = nlohmann::json;

  // An empty set (Check reports it) when the file cannot be read or parsed.
  static SchemaSet Load(const std::string& path) {
    SchemaSet s;
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    json doc = json::parse(text.str(), nullptr, false);
    if (doc.is_object() && doc.contains("components")) s.schemas_ = doc["components"]["schemas"];
    return s;
  }

  size_t size() const { return schemas_.is_object() ? schemas_.size() : 0; }
  bool Has(const std::string& name) const { return schemas_.is_object() && schemas_.contains(name); }

  // Every "$ref" anywhere in the set, for the check that each resolves.
  std::vector<std::string> Refs() const {
    std::vector<std::string> out;
    CollectRefs(schemas_, out);
    return out;
  }

  std::vector<std::string> Check(const json& value, const std::string& schema_name) const {
    std::vector<std::string> problems;
    if (!Has(schema_name)) return {"no schema named " + schema_name};
    CheckAgainst(value, schemas_[schema_name], "", problems);
    return problems;
  }

 private:
  static void CollectRefs(const json& j, std::vector<std::string>& out) {
    if (j.is_object()) {
      for (const auto& [k, v] : j.items()) {
        if (k == "$ref" && v.is_string()) out.push_back(v.get<std::string>());
        else CollectRefs(v, out);
      }
    } else if (j.is_array()) {
      for (const auto& v : j) CollectRefs(v, out);
    }
  }

  const json* Resolve(const std::string& ref) const {
    static const std::string kPrefix = "#/components/schemas/";
    if (ref.rfind(kPrefix, 0) != 0) return nullptr;
    const std::string name = ref.substr(kPrefix.size());
    return Has(name) ? &schemas_[name] : nullptr;
  }

  static std::string At(const std::string& path) { return path.empty() ? "(root)" : path; }

  static bool TypeMatches(const json& v, const std::string& type) {
    if (type == "object") return v.is_object();
    if (type == "array") return v.is_array();
    if (type == "string") return v.is_string();
    if (type == "integer") return v.is_number_integer();
    if (type == "number") return v.is_number();
    if (type == "boolean") return v.is_boolean();
    return false;
  }

  void CheckAgainst(const json& v, const json& schema, const std::string& path, std::vector<std::string>& problems) const {
    if (schema.contains("$ref")) {
      const json* target = Resolve(schema["$ref"].get<std::string>());
      if (target == nullptr) {
        problems.push_back(At(path) + ": unresolved $ref " + schema["$ref"].get<std::string>());
        return;
      }
      CheckAgainst(v, *target, path, problems);
    }
    if (schema.contains("allOf")) {
      for (const json& s : schema["allOf"]) CheckAgainst(v, s, path, problems);
    }
    if (schema.contains("oneOf")) {
      int matched = 0;
      for (const json& s : schema["oneOf"]) {
        std::vector<std::string> sub;
        CheckAgainst(v, s, path, sub);
        matched += sub.empty() ? 1 : 0;
      }
      if (matched != 1) problems.push_back(At(path) + ": matches " + std::to_string(matched) + " of oneOf's schemas, not 1");
    }
    if (schema.contains("type")) {
      const std::string type = schema["type"].get<std::string>();
      if (!TypeMatches(v, type)) {
        problems.push_back(At(path) + ": expected " + type + ", got " + v.type_name() + " " + v.dump());
        return;
      }
    }
    if (schema.contains("enum")) {
      bool found = false;
      for (const json& e : schema["enum"]) found = found || e == v;
      if (!found) problems.push_back(At(path) + ": " + v.dump() + " is not one of " + schema["enum"].dump());
    }
    if (schema.contains("format") && v.is_number_integer()) {
      const std::string f = schema["format"].get<std::string>();
      const bool is_unsigned = v.is_number_unsigned();
      if (f == "int32" && (is_unsigned ? v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())
                                       : (v.get<int64_t>() < std::numeric_limits<int32_t>::min() ||
                                          v.get<int64_t>() > std::numeric_limits<int32_t>::max())))
        problems.push_back(At(path) + ": out of int32 range");
      if (f == "int64" && is_unsigned && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        problems.push_back(At(path) + ": out of int64 range");
    }
    if (v.is_object()) CheckObject(v, schema, path, problems);
    if (v.is_array() && schema.contains("items")) {
      for (size_t i = 0; i < v.size(); ++i) CheckAgainst(v[i], schema["items"], path + "[" + std::to_string(i) + "]", problems);
    }
  }

  void CheckObject(const json& v, const json& schema, const std::string& path, std::vector<std::string>& problems) const {
    const std::string prefix = path.empty() ? "" : path + ".";
    if (schema.contains("required")) {
      for (const json& r : schema["required"]) {
        if (!v.contains(r.get<std::string>())) problems.push_back(prefix + r.get<std::string>() + ": required field missing");
      }
    }
    if (schema.contains("x-kubernetes-group-version-kind")) {
      bool found = false;
      for (const json& gvk : schema["x-kubernetes-group-version-kind"]) {
        const std::string group = gvk["group"].get<std::string>();
        const std::string api_version = (group.empty() ? "" : group + "/") + gvk["version"].get<std::string>();
        found = found || (v.value("apiVersion", "") == api_version && v.value("kind", "") == gvk["kind"].get<std::string>());
      }
      if (!found)
        problems.push_back(At(path) + ": apiVersion/kind " + v.value("apiVersion", "?") + "/" + v.value("kind", "?") +
                           " is not " + schema["x-kubernetes-group-version-kind"].dump());
    }
    const bool has_properties = schema.contains("properties");
    const bool has_additional = schema.contains("additionalProperties");
    if (!has_properties && !has_additional) return;  // free-form (or checked by a $ref/allOf above)
    for (const auto& [key, value] : v.items()) {
      if (has_properties && schema["properties"].contains(key)) {
        CheckAgainst(value, schema["properties"][key], prefix + key, problems);
      } else if (has_additional) {
        CheckAgainst(value, schema["additionalProperties"], prefix + key, problems);
      } else {
        problems.push_back(prefix + key + ": unknown field");
      }
    }
  }

  json schemas_;
};

}  // namespace tessera::k8s::testing
