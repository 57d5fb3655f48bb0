// Private: the JSON checkpoint files of the k8s node plugins (the DRA driver's
// <plugin dir>/checkpoint.json, the device plugin's <state dir>/checkpoint.json). A checkpoint is
// one JSON object {"version": V, <the plugin's members>..., "<list>": [...]}, written whole and
// atomically (a temporary file renamed over the old one) after every change, and read once when
// the plugin starts, which joins the slots it names again.
//
//   WriteCheckpoint("/s/checkpoint.json", 1, {{"slots", json::array()}})
//     -> /s/checkpoint.json = {"slots": [], "version": 1}
//   ReadCheckpoint("/s/checkpoint.json", 1, "slots") -> that object; no file -> nullopt (nothing
//   to adopt).
//
// Errors name the file and the field (DATA_LOSS: the plugin does not start on a checkpoint it
// cannot read, rather than forget the limits of running containers):
//   "checkpoint '/s/checkpoint.json': not a version 1 checkpoint with a 'slots' list"
//   "checkpoint '/s/checkpoint.json': slots[2].index: not a number"   (CheckpointField)
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "tessera/core/status.h"

namespace tessera::k8s {

StatusOr<std::optional<nlohmann::json>> ReadCheckpoint(const std::string& path, int version, const std::string& list);
Status WriteCheckpoint(const std::string& path, int version, nlohmann::json doc);

// The DATA_LOSS error of a checkpoint's field: "checkpoint '<path>': <field>: <problem>".
Status CheckpointError(const std::string& path, const std::string& field, const std::string& problem);

// object[key] as T, or CheckpointError naming "<where>.<key>" (missing, or of another type).
template <typename T>
StatusOr<T> CheckpointField(const std::string& path, const nlohmann::json& object, const std::string& where,
                            const char* key) {
  const std::string field = where.empty() ? key : where + "." + key;
  if (!object.is_object() || !object.contains(key)) return CheckpointError(path, field, "missing");
  try {
    return object.at(key).get<T>();
  } catch (const nlohmann::json::exception& e) {
    return CheckpointError(path, field, std::string("wrong type (") + e.what() + ")");
  }
}

}  // namespace tessera::k8s
