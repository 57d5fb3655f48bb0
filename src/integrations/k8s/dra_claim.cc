// ParseResourceClaim and the claim sources (tessera/integrations/k8s/dra_claim.h).
#include "tessera/integrations/k8s/dra_claim.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tessera/api/json_fields.h"
#include "tessera/enforce/segment.h"
#include "tessera/integrations/k8s/kube_client.h"
#include "tessera/integrations/k8s/names.h"

namespace tessera::k8s {
namespace {

using nlohmann::json;
using api::JsonFields;

constexpr size_t kMaxName = 253;  // a Kubernetes object name or a qualified name
__extension__ typedef unsigned __int128 Wide;  // a quantity times its suffix, before range checks

// A required non-empty string.
StatusOr<std::string> RequiredStr(const JsonFields& f, const std::string& field) {
  TESSERA_RETURN_IF_ERROR(f.Require(field));
  return f.Str(field, kMaxName);
}

// gpu.tessera.io's opaque parameters, strictly (tessera's own type).
Status ParseShareConfig(const JsonFields& params, GpuShareConfig* config) {
  TESSERA_RETURN_IF_ERROR(
      params.OnlyKnown({"apiVersion", "kind", "tenant", "priority", "scrub"}));
  TESSERA_ASSIGN_OR_RETURN(std::string api_version, params.Str("apiVersion", kMaxName));
  if (!api_version.empty() && api_version != "gpu.tessera.io/v1alpha1") {
    return params.Fail("apiVersion", "'" + api_version + "' is not gpu.tessera.io/v1alpha1");
  }
  TESSERA_ASSIGN_OR_RETURN(std::string kind, params.Str("kind", kMaxName));
  if (!kind.empty() && kind != "GpuShareConfig") return params.Fail("kind", "'" + kind + "' is not GpuShareConfig");
  if (params.Has("tenant")) {
    TESSERA_ASSIGN_OR_RETURN(config->tenant, params.Str("tenant", kMaxName));
  }
  TESSERA_ASSIGN_OR_RETURN(int64_t priority, params.Int("priority", 0, 1000, config->priority));
  config->priority = static_cast<int>(priority);
  TESSERA_ASSIGN_OR_RETURN(config->scrub, params.Bool("scrub", config->scrub));
  return Status::Ok();
}

// Whether a config entry's `requests` list covers a result's request ("gpu" covers "gpu/sub").
bool Covers(const std::vector<std::string>& requests, const std::string& request) {
  if (requests.empty()) return true;
  const std::string parent = request.substr(0, request.find('/'));
  for (const std::string& r : requests) {
    if (r == request || r == parent) return true;
  }
  return false;
}

Status ParseResult(const JsonFields& r, AllocatedDevice* d) {
  TESSERA_ASSIGN_OR_RETURN(d->request, RequiredStr(r, "request"));
  TESSERA_ASSIGN_OR_RETURN(d->driver, RequiredStr(r, "driver"));
  TESSERA_ASSIGN_OR_RETURN(d->pool, RequiredStr(r, "pool"));
  TESSERA_ASSIGN_OR_RETURN(d->device, RequiredStr(r, "device"));
  TESSERA_ASSIGN_OR_RETURN(d->share_id, r.Str("shareID", kMaxName));
  if (d->driver != kDriverName) return Status::Ok();
  if (d->device.find("-mig-") != std::string::npos) {
    StatusOr<MigDeviceParts> mig = ParseMigDeviceName(d->device);
    if (!mig.ok()) return r.Fail("device", std::string(mig.status().message()));
    d->gpu = mig->gpu;
    d->mig_profile_label = mig->profile_label;
    d->mig_start = mig->start;
    if (r.Has("consumedCapacity")) return r.Fail("consumedCapacity", "a MIG device is allocated whole, never shared");
    return Status::Ok();
  }
  StatusOr<int> gpu = GpuIndexOfDevice(d->device);
  if (!gpu.ok()) return r.Fail("device", std::string(gpu.status().message()));
  d->gpu = *gpu;
  if (!r.Has("consumedCapacity")) return Status::Ok();
  TESSERA_ASSIGN_OR_RETURN(const json capacity, r.Object("consumedCapacity"));
  d->shared = true;
  TESSERA_ASSIGN_OR_RETURN(JsonFields c, r.Nested(capacity, "consumedCapacity"));
  for (const char* name : {"memory", "compute"}) {
    if (!c.Has(name)) return c.Fail(name, "missing (a share of a GPU consumes memory and compute)");
    TESSERA_ASSIGN_OR_RETURN(std::string text, c.Str(name, 64));
    StatusOr<uint64_t> value = ParseQuantity(text);
    if (!value.ok()) return c.Fail(name, std::string(value.status().message()));
    if (std::strcmp(name, "memory") == 0) {
      if (*value == 0) return c.Fail(name, "must be more than 0");
      d->memory_bytes = *value;
    } else {
      if (*value < 1 || *value > 1000) return c.Fail(name, "'" + text + "' is not 1..1000 milli-GPU");
      d->compute_milli = static_cast<int64_t>(*value);
    }
  }
  return Status::Ok();
}

// Applies devices.config[] (in order: later entries win) to our results.
Status ApplyConfig(const JsonFields& devices, std::vector<AllocatedDevice>* results) {
  TESSERA_ASSIGN_OR_RETURN(const json configs, devices.Array("config"));
  for (size_t i = 0; i < configs.size(); ++i) {
    const std::string at = "config[" + std::to_string(i) + "]";
    TESSERA_ASSIGN_OR_RETURN(JsonFields entry, devices.Nested(configs[i], at));
    if (!entry.Has("opaque")) continue;  // another kind of configuration: not ours
    TESSERA_ASSIGN_OR_RETURN(const json opaque, entry.Object("opaque"));
    TESSERA_ASSIGN_OR_RETURN(JsonFields o, entry.Nested(opaque, "opaque"));
    TESSERA_ASSIGN_OR_RETURN(std::string driver, RequiredStr(o, "driver"));
    if (driver != kDriverName) continue;
    TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> requests, entry.Strings("requests"));
    TESSERA_RETURN_IF_ERROR(o.Require("parameters"));
    TESSERA_ASSIGN_OR_RETURN(const json parameters, o.Object("parameters"));
    TESSERA_ASSIGN_OR_RETURN(JsonFields p, o.Nested(parameters, "parameters"));
    for (AllocatedDevice& d : *results) {
      if (d.driver != kDriverName || !Covers(requests, d.request)) continue;
      TESSERA_RETURN_IF_ERROR(ParseShareConfig(p, &d.config));
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<AllocatedClaim> ParseResourceClaim(std::string_view text) {
  TESSERA_ASSIGN_OR_RETURN(const json root, api::ParseJsonObject(text));
  JsonFields top(root, "", nullptr);
  AllocatedClaim claim;
  TESSERA_RETURN_IF_ERROR(top.Require("metadata"));
  TESSERA_ASSIGN_OR_RETURN(const json metadata, top.Object("metadata"));
  TESSERA_ASSIGN_OR_RETURN(JsonFields m, top.Nested(metadata, "metadata"));
  TESSERA_ASSIGN_OR_RETURN(claim.ns, RequiredStr(m, "namespace"));
  TESSERA_ASSIGN_OR_RETURN(claim.name, RequiredStr(m, "name"));
  TESSERA_ASSIGN_OR_RETURN(claim.uid, RequiredStr(m, "uid"));

  TESSERA_RETURN_IF_ERROR(top.Require("status"));
  TESSERA_ASSIGN_OR_RETURN(const json status, top.Object("status"));
  TESSERA_ASSIGN_OR_RETURN(JsonFields s, top.Nested(status, "status"));
  if (!s.Has("allocation")) return s.Fail("allocation", "missing (the claim is not allocated)");
  TESSERA_ASSIGN_OR_RETURN(const json allocation, s.Object("allocation"));
  TESSERA_ASSIGN_OR_RETURN(JsonFields a, s.Nested(allocation, "allocation"));
  TESSERA_ASSIGN_OR_RETURN(const json devices, a.Object("devices"));
  TESSERA_ASSIGN_OR_RETURN(JsonFields d, a.Nested(devices, "devices"));
  TESSERA_ASSIGN_OR_RETURN(const json results, d.Array("results"));
  for (size_t i = 0; i < results.size(); ++i) {
    const std::string at = "results[" + std::to_string(i) + "]";
    TESSERA_ASSIGN_OR_RETURN(JsonFields r, d.Nested(results[i], at));
    AllocatedDevice device;
    TESSERA_RETURN_IF_ERROR(ParseResult(r, &device));
    claim.devices.push_back(std::move(device));
  }
  TESSERA_RETURN_IF_ERROR(ApplyConfig(d, &claim.devices));
  if (s.Has("reservedFor")) {
    TESSERA_ASSIGN_OR_RETURN(const json reserved, s.Array("reservedFor"));
    for (size_t i = 0; i < reserved.size(); ++i) {
      TESSERA_ASSIGN_OR_RETURN(JsonFields c, s.Nested(reserved[i], "reservedFor[" + std::to_string(i) + "]"));
      TESSERA_ASSIGN_OR_RETURN(std::string resource, RequiredStr(c, "resource"));
      // apiGroup is "" (or left out) for the core group's pods.
      const json group = reserved[i].value("apiGroup", json(""));
      if (resource != "pods" || !group.is_string() || !group.get<std::string>().empty()) continue;
      TESSERA_ASSIGN_OR_RETURN(std::string uid, RequiredStr(c, "uid"));
      claim.pod_uids.push_back(std::move(uid));
    }
  }
  return claim;
}

StatusOr<uint64_t> ParseQuantity(std::string_view text) {
  const std::string quoted = "'" + std::string(text) + "'";
  size_t i = 0;
  Wide whole = 0, frac = 0, frac_scale = 1;
  bool digits = false;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    whole = whole * 10 + static_cast<unsigned>(text[i] - '0');
    if (whole > (static_cast<Wide>(1) << 64)) return InvalidArgumentError(quoted + " is too large");
    digits = true;
    ++i;
  }
  if (i < text.size() && text[i] == '.') {
    ++i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      if (frac_scale < 1'000'000'000'000'000ULL) {
        frac = frac * 10 + static_cast<unsigned>(text[i] - '0');
        frac_scale *= 10;
      }
      digits = true;
      ++i;
    }
  }
  if (!digits) return InvalidArgumentError(quoted + " is not a quantity (e.g. 10Gi, 512Mi, 300)");
  const std::string_view suffix = text.substr(i);
  static const std::pair<std::string_view, uint64_t> kSuffixes[] = {
      {"", 1},          {"Ki", 1ULL << 10}, {"Mi", 1ULL << 20}, {"Gi", 1ULL << 30}, {"Ti", 1ULL << 40},
      {"Pi", 1ULL << 50}, {"Ei", 1ULL << 60}, {"k", 1000ULL},     {"M", 1000'000ULL}, {"G", 1000'000'000ULL},
      {"T", 1000'000'000'000ULL}, {"P", 1000'000'000'000'000ULL}, {"E", 1000'000'000'000'000'000ULL}};
  for (const auto& [name, multiplier] : kSuffixes) {
    if (suffix != name) continue;
    const Wide scaled_frac = frac * multiplier;
    if (scaled_frac % frac_scale != 0) {
      return InvalidArgumentError(quoted + " is not a whole number of units");
    }
    const Wide value = whole * multiplier + scaled_frac / frac_scale;
    if (value > static_cast<Wide>(INT64_MAX)) return InvalidArgumentError(quoted + " is too large");
    return static_cast<uint64_t>(value);
  }
  return InvalidArgumentError(quoted + ": unknown suffix '" + std::string(suffix) +
                              "' (whole units: Ki Mi Gi Ti Pi Ei k M G T P E, or none)");
}

StatusOr<int> GpuIndexOfDevice(std::string_view device) {
  const std::string why = "'" + std::string(device) + "' is not one of tessera's GPU devices (gpu-0..gpu-" +
                          std::to_string(enforce::kMaxGpus - 1) + ")";
  if (!device.starts_with("gpu-") || device.size() < 5 || device.size() > 6) return InvalidArgumentError(why);
  int n = 0;
  for (char c : device.substr(4)) {
    if (c < '0' || c > '9') return InvalidArgumentError(why);
    n = n * 10 + (c - '0');
  }
  if ((device.size() == 6 && device[4] == '0') || n >= enforce::kMaxGpus) return InvalidArgumentError(why);
  return n;
}

void InMemoryClaimSource::Put(const std::string& ns, const std::string& name, std::string json_text) {
  std::lock_guard lock(mu_);
  claims_[ns + "/" + name] = std::move(json_text);
}

void InMemoryClaimSource::Remove(const std::string& ns, const std::string& name) {
  std::lock_guard lock(mu_);
  claims_.erase(ns + "/" + name);
}

StatusOr<std::string> InMemoryClaimSource::ResourceClaimJson(const std::string& ns, const std::string& name) {
  std::lock_guard lock(mu_);
  auto it = claims_.find(ns + "/" + name);
  if (it == claims_.end()) return NotFoundError("not found");
  return it->second;
}

StatusOr<std::string> FileClaimSource::ResourceClaimJson(const std::string& ns, const std::string& name) {
  if (ns.find('/') != std::string::npos || name.find('/') != std::string::npos || ns.starts_with('.') ||
      name.starts_with('.')) {
    return InvalidArgumentError("'" + ns + "/" + name + "' is not a claim's namespace/name");
  }
  const std::string path = dir_ + "/" + ns + "/" + name + ".json";
  std::ifstream in(path);
  if (!in) return NotFoundError("not found (" + path + ": " + std::strerror(errno) + ")");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

namespace {

// A namespace or object name as it may appear in a request path: RFC 1123 labels joined by dots.
bool IsDnsName(const std::string& s) {
  if (s.empty() || s.size() > kMaxName || s.front() == '.' || s.back() == '.' || s.front() == '-') return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.')) return false;
  }
  return true;
}

}  // namespace

StatusOr<std::string> KubeClaimSource::ResourceClaimJson(const std::string& ns, const std::string& name) {
  if (!IsDnsName(ns)) return InvalidArgumentError("namespace '" + ns + "' is not a DNS name");
  if (!IsDnsName(name)) return InvalidArgumentError("name '" + name + "' is not a DNS name");
  std::lock_guard lock(mu_);
  TESSERA_ASSIGN_OR_RETURN(nlohmann::json claim, client_.GetResourceClaim(ns, name));
  return claim.dump();
}

}  // namespace tessera::k8s
