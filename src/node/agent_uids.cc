// The agent's tenant uids (tessera/node/agent.h, "Tenant uids"): which uid each tenant's
// workloads run under, the allotment file that keeps it across restarts, and the command's HOME.
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "src/node/agent_impl.h"
#include "tessera/node/agent.h"

namespace tessera::node {

using nlohmann::json;

namespace {

std::string TenantUidsFile(const std::string& agent_dir) { return agent_dir + "/tenant_uids.json"; }

// The first ancestor of `dir` (itself included) that a process of another uid cannot search
// (no o+x), or "" when every one can: the tenants' processes must reach the segment's files.
std::string UnreachableAncestor(const std::string& dir) {
  std::string path = dir;
  while (!path.empty()) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & S_IXOTH) == 0) return path;
    const size_t slash = path.rfind('/');
    if (slash == std::string::npos || slash == 0) break;
    path.resize(slash);
  }
  return "";
}

// A uid of --tenant-uids / --tenant-uid: 1..INT_MAX (0 is root, not a tenant's).
bool ParseUid(const std::string& text, long* uid) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos || text.size() > 10) return false;
  const long long v = std::stoll(text);
  if (v < 1 || v > INT_MAX) return false;
  *uid = static_cast<long>(v);
  return true;
}

}  // namespace

Status Agent::LoadTenantUids() {
  const TenantUidOptions& o = options_.tenant_uids;
  if (!o.enabled) return Status::Ok();
  char real[4096];
  const std::string dir = ::realpath(options_.run_dir.c_str(), real) != nullptr ? real : options_.run_dir;
  if (const std::string closed = UnreachableAncestor(dir); !closed.empty())
    return FailedPreconditionError("tenant uids: '" + closed + "' (of the node directory " + options_.run_dir +
                                   ") is not searchable by other users (no o+x), so a workload under its tenant's "
                                   "uid could not reach the segment; give it o+x or another --run-dir");
  const std::string path = TenantUidsFile(AgentDir());
  StatusOr<std::string> text = internal::ReadWholeFile(path);
  if (!text.ok() && text.status().code() != StatusCode::kNotFound) return text.status();
  if (text.ok()) {
    const json j = json::parse(*text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return DataLossError("'" + path + "': not a JSON object");
    for (const auto& [tenant, uid] : j.items()) {
      if (!uid.is_number_integer() || uid.get<long>() <= 0)
        return DataLossError("'" + path + "': tenant '" + tenant + "': the uid is not a positive integer");
      allotted_uids_[tenant] = uid.get<long>();
    }
  }
  // A fixed uid that the file gave another tenant would put two tenants under one uid.
  for (const auto& [tenant, uid] : o.fixed)
    for (const auto& [other, allotted] : allotted_uids_)
      if (other != tenant && allotted == uid)
        return FailedPreconditionError("tenant uids: --tenant-uid " + tenant + "=" + std::to_string(uid) +
                                       " is the uid allotted to tenant '" + other + "' in " + path +
                                       " (one uid per tenant; give another uid, or remove the entry once '" + other +
                                       "' runs nothing here)");
  return Status::Ok();
}

StatusOr<long> Agent::TenantUid(const std::string& tenant) {
  const TenantUidOptions& o = options_.tenant_uids;
  if (!o.enabled) return -1;
  if (auto f = o.fixed.find(tenant); f != o.fixed.end()) return f->second;
  if (auto a = allotted_uids_.find(tenant); a != allotted_uids_.end()) return a->second;
  std::set<long> taken;
  for (const auto& [t, uid] : allotted_uids_) taken.insert(uid);
  for (const auto& [t, uid] : o.fixed) taken.insert(uid);
  long uid = -1;
  for (long u = o.first; u <= o.last && uid < 0; ++u)
    if (!taken.count(u)) uid = u;
  if (uid < 0)
    return ResourceExhaustedError("tenant '" + tenant + "': no uid left in --tenant-uids " + std::to_string(o.first) +
                                  "-" + std::to_string(o.last) + " (" + std::to_string(allotted_uids_.size()) +
                                  " tenants hold one, " + TenantUidsFile(AgentDir()) +
                                  "); not running its workloads under the agent's uid");
  json j = json::object();
  for (const auto& [t, u] : allotted_uids_) j[t] = u;
  j[tenant] = uid;
  // Written before any of the tenant's files is chown'ed to it: a restart never hands it out again.
  TESSERA_RETURN_IF_ERROR(internal::WriteFileAtomically(TenantUidsFile(AgentDir()), j.dump(2) + "\n"));
  allotted_uids_[tenant] = uid;
  Log("tenant '" + tenant + "': runs under uid " + std::to_string(uid));
  return uid;
}

StatusOr<std::string> Agent::TenantHome(long uid) {
  struct passwd pw {};
  struct passwd* found = nullptr;
  char buf[4096];
  if (::getpwuid_r(static_cast<uid_t>(uid), &pw, buf, sizeof(buf), &found) == 0 && found != nullptr &&
      found->pw_dir != nullptr && found->pw_dir[0] == '/')
    return std::string(found->pw_dir);
  const std::string homes = AgentDir() + "/home";
  const std::string home = homes + "/" + std::to_string(uid);
  if (::mkdir(homes.c_str(), 0755) != 0 && errno != EEXIST)
    return InternalError("cannot create '" + homes + "': " + std::strerror(errno));
  if (::mkdir(home.c_str(), 0700) != 0 && errno != EEXIST)
    return InternalError("cannot create '" + home + "': " + std::strerror(errno));
  // lchown: never follow a link that a tenant could have left in its place.
  if (::lchown(home.c_str(), static_cast<uid_t>(uid), static_cast<gid_t>(-1)) != 0)
    return InternalError("cannot give '" + home + "' to uid " + std::to_string(uid) + ": " + std::strerror(errno));
  return home;
}

StatusOr<TenantUidOptions> ParseTenantUidFlags(const std::string& tenant_uids, const std::vector<std::string>& tenant_uid,
                                               bool root) {
  TenantUidOptions o;
  std::vector<std::string> problems;
  const std::string range = tenant_uids.empty() ? (root ? kDefaultTenantUids : "off") : tenant_uids;
  o.enabled = range != "off";
  if (o.enabled) {
    const size_t dash = range.find('-');
    if (dash == std::string::npos || !ParseUid(range.substr(0, dash), &o.first) ||
        !ParseUid(range.substr(dash + 1), &o.last) || o.first > o.last)
      problems.push_back("--tenant-uids '" + range + "': expected FIRST-LAST, uids 1.." + std::to_string(INT_MAX) +
                         " with FIRST <= LAST, or off");
    if (!root)
      problems.push_back("--tenant-uids " + range + " needs root (the agent chowns each tenant's counters file and "
                         "starts its commands under the tenant's uid); run as root or give --tenant-uids off");
  }
  for (const std::string& item : tenant_uid) {
    const size_t eq = item.rfind('=');
    long uid = 0;
    if (eq == std::string::npos || eq == 0 || !ParseUid(item.substr(eq + 1), &uid)) {
      problems.push_back("--tenant-uid '" + item + "': expected TENANT=UID, uid 1.." + std::to_string(INT_MAX));
      continue;
    }
    const std::string tenant = item.substr(0, eq);
    for (const auto& [other, other_uid] : o.fixed)
      if (other_uid == uid && other != tenant)
        problems.push_back("--tenant-uid '" + item + "': uid " + std::to_string(uid) + " is given to tenant '" +
                           other + "' too (one uid per tenant)");
    if (o.fixed.count(tenant) && o.fixed[tenant] != uid)
      problems.push_back("--tenant-uid '" + item + "': tenant '" + tenant + "' given twice");
    o.fixed[tenant] = uid;
  }
  if (!tenant_uid.empty() && !o.enabled) problems.push_back("--tenant-uid needs tenant uids on (not --tenant-uids off)");
  if (!problems.empty()) {
    std::string all;
    for (const std::string& p : problems) all += (all.empty() ? "" : "\ntessera agent: ") + p;
    return InvalidArgumentError(all);
  }
  return o;
}

}  // namespace tessera::node
