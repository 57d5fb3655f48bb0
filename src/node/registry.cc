#include "src/node/registry.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "tessera/enforce/segment.h"

namespace tessera::node::internal {
namespace {

using nlohmann::json;

// Field readers: nlohmann's get<T>() throws on a wrong type, so every type is checked first.
Status Bad(const std::string& path, const std::string& where, const std::string& what) {
  return DataLossError(path + ": " + where + ": " + what);
}

StatusOr<long long> Integer(const std::string& path, const json& t, const std::string& where, const char* key,
                            long long lo, long long hi, std::optional<long long> fallback = std::nullopt) {
  auto it = t.find(key);
  if (it == t.end()) {
    if (fallback) return *fallback;
    return Bad(path, where, std::string("missing \"") + key + "\"");
  }
  if (!it->is_number_integer()) return Bad(path, where + "." + key, "not an integer");
  if (it->is_number_unsigned()) {
    const auto u = it->get<unsigned long long>();
    if (u > static_cast<unsigned long long>(hi)) {
      return Bad(path, where + "." + key, "out of range " + std::to_string(lo) + ".." + std::to_string(hi));
    }
    return static_cast<long long>(u);
  }
  const auto v = it->get<long long>();
  if (v < lo || v > hi) {
    return Bad(path, where + "." + key, "out of range " + std::to_string(lo) + ".." + std::to_string(hi));
  }
  return v;
}

StatusOr<std::vector<long>> Pids(const std::string& path, const json& t, const std::string& where, const char* key,
                                 bool required) {
  std::vector<long> out;
  auto it = t.find(key);
  if (it == t.end()) {
    if (required) return Bad(path, where, std::string("missing \"") + key + "\"");
    return out;
  }
  if (!it->is_array()) return Bad(path, where + "." + key, "not an array");
  for (size_t i = 0; i < it->size(); ++i) {
    const json& p = (*it)[i];
    if (!p.is_number_integer() || p.get<long long>() <= 0 || p.get<long long>() > std::numeric_limits<int>::max()) {
      return Bad(path, where + "." + key + "[" + std::to_string(i) + "]", "not a process id");
    }
    out.push_back(static_cast<long>(p.get<long long>()));
  }
  return out;
}

StatusOr<TenantEntry> Entry(const std::string& path, const json& t, const std::string& where) {
  if (!t.is_object()) return Bad(path, where, "not an object");
  TenantEntry e;
  auto name = t.find("name");
  if (name == t.end()) return Bad(path, where, "missing \"name\"");
  if (!name->is_string() || name->get<std::string>().empty()) return Bad(path, where + ".name", "not a name");
  e.name = name->get<std::string>();
  TESSERA_ASSIGN_OR_RETURN(long long index, Integer(path, t, where, "index", 0, enforce::kMaxTenants - 1));
  TESSERA_ASSIGN_OR_RETURN(long long gpu, Integer(path, t, where, "gpu", 0, enforce::kMaxGpus - 1));
  TESSERA_ASSIGN_OR_RETURN(long long mem, Integer(path, t, where, "mem_bytes", 0,
                                                  static_cast<long long>(enforce::kMaxCountedBytes)));
  TESSERA_ASSIGN_OR_RETURN(long long share, Integer(path, t, where, "share", 0, 1'000'000));
  TESSERA_ASSIGN_OR_RETURN(long long priority, Integer(path, t, where, "priority", std::numeric_limits<int>::min(),
                                                       std::numeric_limits<int>::max()));
  TESSERA_ASSIGN_OR_RETURN(long long estimate, Integer(path, t, where, "kernel_estimate_us", 1, 10'000'000, 1000));
  e.index = static_cast<int>(index);
  e.gpus = {static_cast<int>(gpu)};
  if (auto gpus = t.find("gpus"); gpus != t.end()) {  // absent in files of earlier versions: "gpu" alone
    if (!gpus->is_array() || gpus->empty()) return Bad(path, where + ".gpus", "not a list of GPUs");
    e.gpus.clear();
    for (const json& g : *gpus) {
      if (!g.is_number_integer() || g.get<long long>() < 0 || g.get<long long>() >= enforce::kMaxGpus ||
          (!e.gpus.empty() && g.get<long long>() <= e.gpus.back()))
        return Bad(path, where + ".gpus", "not ascending node GPUs 0.." + std::to_string(enforce::kMaxGpus - 1));
      e.gpus.push_back(static_cast<int>(g.get<long long>()));
    }
    if (e.gpus.front() != gpu) return Bad(path, where + ".gpu", "not the first of \"gpus\"");
  }
  e.mem_bytes = static_cast<uint64_t>(mem);
  e.share = static_cast<int>(share);
  e.priority = static_cast<int>(priority);
  e.kernel_estimate_us = static_cast<int>(estimate);
  if (auto scrub = t.find("scrub"); scrub != t.end()) {
    if (!scrub->is_boolean()) return Bad(path, where + ".scrub", "not true or false");
    e.scrub = scrub->get<bool>();
  }
  for (auto [key, field] : {std::pair{"account", &e.account}, std::pair{"workload", &e.workload},
                            std::pair{"mig_instance", &e.mig_instance}}) {
    if (auto v = t.find(key); v != t.end()) {
      if (!v->is_string()) return Bad(path, where + "." + key, "not a string");
      *field = v->get<std::string>();
    }
  }
  TESSERA_ASSIGN_OR_RETURN(long long joined, Integer(path, t, where, "joined_s", 0, std::numeric_limits<int64_t>::max(), 0));
  e.joined_s = joined;
  TESSERA_ASSIGN_OR_RETURN(long long uid, Integer(path, t, where, "uid", -1, std::numeric_limits<int>::max(), -1));
  e.uid = static_cast<long>(uid);
  TESSERA_ASSIGN_OR_RETURN(e.pids, Pids(path, t, where, "pids", /*required=*/true));
  TESSERA_ASSIGN_OR_RETURN(e.pgids, Pids(path, t, where, "pgids", /*required=*/false));
  return e;
}

}  // namespace

StatusOr<std::vector<TenantEntry>> ReadRegistry(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    if (errno == ENOENT) return std::vector<TenantEntry>{};
    return UnavailableError(path + ": " + std::strerror(errno));
  }
  std::stringstream text;
  text << in.rdbuf();
  const json j = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return DataLossError(path + ": not valid JSON");
  if (!j.is_object()) return DataLossError(path + ": not a JSON object");
  auto tenants = j.find("tenants");
  if (tenants == j.end()) return DataLossError(path + ": missing \"tenants\"");
  if (!tenants->is_array()) return DataLossError(path + ": \"tenants\" is not an array");
  std::vector<TenantEntry> out;
  std::set<int> indexes;
  for (size_t i = 0; i < tenants->size(); ++i) {
    const std::string where = "tenants[" + std::to_string(i) + "]";
    TESSERA_ASSIGN_OR_RETURN(TenantEntry e, Entry(path, (*tenants)[i], where));
    if (!indexes.insert(e.index).second) {
      return Bad(path, where + ".index", "index " + std::to_string(e.index) + " twice");
    }
    out.push_back(std::move(e));
  }
  return out;
}

Status WriteRegistry(const std::string& path, const std::vector<TenantEntry>& tenants) {
  json list = json::array();
  for (const TenantEntry& e : tenants) {
    list.push_back(json{{"name", e.name},
                        {"index", e.index},
                        {"gpu", e.gpus.empty() ? 0 : e.gpus.front()},  // what earlier versions read
                        {"gpus", e.gpus},
                        {"mem_bytes", e.mem_bytes},
                        {"share", e.share},
                        {"priority", e.priority},
                        {"kernel_estimate_us", e.kernel_estimate_us},
                        {"scrub", e.scrub},
                        {"account", e.account},
                        {"workload", e.workload},
                        {"joined_s", e.joined_s},
                        {"uid", e.uid},
                        {"mig_instance", e.mig_instance},
                        {"pids", e.pids},
                        {"pgids", e.pgids}});
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << json{{"version", 1}, {"tenants", list}}.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
    if (!out) return InternalError("cannot write '" + tmp + "'");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return InternalError("cannot rename '" + tmp + "': " + std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace tessera::node::internal
