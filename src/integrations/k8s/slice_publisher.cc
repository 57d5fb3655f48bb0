#include "tessera/integrations/k8s/slice_publisher.h"

#include <algorithm>
#include <initializer_list>
#include <map>
#include <set>
#include <string>

namespace tessera::k8s {
namespace {

using nlohmann::json;

std::string Name(const json& o) {
  if (!o.is_object() || !o.contains("metadata") || !o["metadata"].is_object()) return "";
  const json& name = o["metadata"].value("name", json(""));
  return name.is_string() ? name.get<std::string>() : "";
}

// The string at `path` in `o`, or "" where anything on the way is missing or of another type
// (the server's objects are read, never trusted).
std::string StringAt(const json& o, std::initializer_list<const char*> path) {
  const json* at = &o;
  for (const char* key : path) {
    if (!at->is_object() || !at->contains(key)) return "";
    at = &(*at)[key];
  }
  return at->is_string() ? at->get<std::string>() : "";
}

std::string ResourceVersion(const json& o) { return StringAt(o, {"metadata", "resourceVersion"}); }

std::string HashAnnotation(const json& o) { return StringAt(o, {"metadata", "annotations", kSpecHashAnnotation}); }

int64_t Generation(const json& o) {
  if (!o.is_object() || !o.contains("spec") || !o["spec"].is_object() || !o["spec"].contains("pool") ||
      !o["spec"]["pool"].is_object())
    return 0;
  const json& g = o["spec"]["pool"].value("generation", json(0));
  return g.is_number_integer() ? g.get<int64_t>() : 0;
}

}  // namespace

Status SlicePublisher::Write(json slice, const json* existing, PublishResult& result) {
  const std::string name = Name(slice);
  std::string rv = existing != nullptr ? ResourceVersion(*existing) : "";
  bool exists = existing != nullptr;
  for (int attempt = 0;; ++attempt) {
    if (exists) {
      slice["metadata"]["resourceVersion"] = rv;
      StatusOr<json> r = client_.UpdateResourceSlice(slice);
      if (r.ok()) {
        ++result.updated;
        return Status::Ok();
      }
      if (r.status().code() == StatusCode::kNotFound) {
        exists = false;  // deleted since the LIST: create it
      } else if (r.status().code() == StatusCode::kAborted) {
        ++result.conflicts;
        if (attempt >= options_.max_conflict_retries)
          return Status(StatusCode::kAborted, r.status().message() + " (still in conflict after " +
                                                  std::to_string(attempt + 1) + " tries)");
        StatusOr<json> current = client_.GetResourceSlice(name);
        if (current.ok()) {
          rv = ResourceVersion(*current);
        } else if (current.status().code() == StatusCode::kNotFound) {
          exists = false;
        } else {
          return current.status();
        }
      } else {
        return r.status();
      }
    } else {
      slice["metadata"].erase("resourceVersion");
      StatusOr<json> r = client_.CreateResourceSlice(slice);
      if (r.ok()) {
        ++result.created;
        return Status::Ok();
      }
      if (r.status().code() != StatusCode::kAlreadyExists || attempt >= options_.max_conflict_retries)
        return r.status();
      ++result.conflicts;  // created by someone else since the LIST: update it
      TESSERA_ASSIGN_OR_RETURN(json current, client_.GetResourceSlice(name));
      rv = ResourceVersion(current);
      exists = true;
    }
  }
}

StatusOr<PublishResult> SlicePublisher::Publish(const std::vector<api::InventoryGpu>& gpus) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<json> listed, client_.ListResourceSlices(options_.slices.node_name));
  std::map<std::string, json> existing;
  int64_t highest = 0;
  std::set<int64_t> generations;
  for (json& s : listed) {
    highest = std::max(highest, Generation(s));
    generations.insert(Generation(s));
    const std::string name = Name(s);
    existing[name] = std::move(s);
  }
  SliceOptions o = options_.slices;
  o.generation = highest;
  TESSERA_ASSIGN_OR_RETURN(std::vector<json> desired, RenderResourceSlices(gpus, catalog_, o));

  bool same = !existing.empty() && existing.size() == desired.size() && generations.size() == 1;
  for (const json& d : desired) {
    auto it = existing.find(Name(d));
    same = same && it != existing.end() && HashAnnotation(it->second) == HashAnnotation(d);
  }
  PublishResult result;
  if (same) {
    result.unchanged = static_cast<int>(desired.size());
    result.generation = highest;
    last_published_ = gpus;
    return result;
  }
  o.generation = highest + 1;
  TESSERA_ASSIGN_OR_RETURN(desired, RenderResourceSlices(gpus, catalog_, o));
  std::set<std::string> wanted;
  for (json& d : desired) {
    const std::string name = Name(d);
    wanted.insert(name);
    auto it = existing.find(name);
    TESSERA_RETURN_IF_ERROR(Write(std::move(d), it == existing.end() ? nullptr : &it->second, result));
  }
  for (const auto& [name, slice] : existing) {
    if (wanted.count(name)) continue;
    TESSERA_RETURN_IF_ERROR(client_.DeleteResourceSlice(name));
    ++result.deleted;
  }
  result.generation = o.generation;
  last_published_ = gpus;
  return result;
}

StatusOr<std::optional<PublishResult>> SlicePublisher::PublishIfChanged(const std::vector<api::InventoryGpu>& gpus) {
  if (last_published_ && *last_published_ == gpus) return std::optional<PublishResult>();
  TESSERA_ASSIGN_OR_RETURN(PublishResult r, Publish(gpus));
  return std::optional<PublishResult>(r);
}

}  // namespace tessera::k8s
