// The agent's NVML backstop (tessera/node/agent.h, step 5): what the driver says each process
// holds, checked against the workloads' limits, for the processes the shim does not see.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "src/node/agent_impl.h"
#include "tessera/enforce/segment.h"
#include "tessera/node/agent.h"

namespace tessera::node {

namespace {

struct ProcStat {
  std::string comm;  // field 2, at most 15 characters
  long ppid = 0;
  long sid = 0;
};

// The MPS server lists as a compute process of no workload on the GPUs it serves; it is the node's,
// not a tenant's, and is never killed.
bool IsMpsServer(const ProcStat& s) { return s.comm.rfind("nvidia-cuda-mps", 0) == 0; }

// /proc/<pid>/stat's command, ppid (field 4) and session (field 6); nullopt when it is gone.
std::optional<ProcStat> ReadProcStat(long pid) {
  StatusOr<std::string> stat = internal::ReadWholeFile("/proc/" + std::to_string(pid) + "/stat");
  if (!stat.ok()) return std::nullopt;
  const size_t paren = stat->rfind(')');  // the command name may hold spaces and parentheses
  const size_t open = stat->find('(');
  if (paren == std::string::npos || open == std::string::npos || open > paren || paren + 2 >= stat->size())
    return std::nullopt;
  std::istringstream rest(stat->substr(paren + 2));
  std::string state;
  ProcStat s;
  s.comm = stat->substr(open + 1, paren - open - 1);
  long pgrp = 0;
  if (!(rest >> state >> s.ppid >> pgrp >> s.sid)) return std::nullopt;
  return s;
}

std::string Mib(int64_t mib) { return std::to_string(mib) + " MiB"; }

// Whether `pid` has the shim mapped (nullopt: its maps cannot be read, e.g. it is gone).
std::optional<bool> ProcessHasShim(uint32_t pid, uint64_t shim_inode) {
  StatusOr<std::string> maps = internal::ReadWholeFile("/proc/" + std::to_string(pid) + "/maps");
  if (!maps.ok()) return std::nullopt;
  return MapsHoldTheShim(*maps, shim_inode);
}

}  // namespace

void Agent::KillProcess(uint32_t pid) {
  if (pid <= 1 || static_cast<pid_t>(pid) == ::getpid()) return;
  if (::kill(static_cast<pid_t>(pid), SIGKILL) == 0) ++stats_.backstop_kills;
}

void Agent::Violated(HeldWorkload& w, const std::string& detail, const std::vector<uint32_t>& pids) {
  ++stats_.backstop_violations;
  events_.push_back({w.id, "violated_limit", detail});
  if (!options_.backstop_kill) {
    Log("workload " + std::to_string(w.id) + ": violated_limit: " + detail + " (--enforce report: not killed)");
    return;
  }
  Log("workload " + std::to_string(w.id) + ": violated_limit: " + detail + "; killing it");
  for (uint32_t pid : pids) KillProcess(pid);
  // The rest of the workload: its command groups, then the supervisor (which would otherwise
  // report the command's death as an ordinary exit).
  if (StatusOr<std::vector<TenantEntry>> live = node_.LiveTenants(); live.ok()) {
    for (const TenantEntry& e : *live)
      if (e.name == w.slot)
        for (long g : e.pgids) ::kill(-static_cast<pid_t>(g), SIGKILL);
  }
  if (w.pid > 0) ::kill(static_cast<pid_t>(w.pid), SIGKILL);
  w.end_reason = "violated_limit";
  (void)SaveWorkload(w);  // a restarted agent still reports the reason
}

void Agent::CheckCountersFiles() {
  bool any = false;
  for (const auto& [id, w] : held_) any = any || (!w.ended && w.pid > 0 && w.end_reason.empty());
  if (!any) return;
  // The registry alone (name -> index): LiveTenants would map every counters file each period.
  // Parsed again only when the file changed (a stat, not a JSON parse, per period).
  if (std::string why; !RefreshSlotIndex(&why)) {
    Log("backstop: counters files not checked: " + why);
    return;
  }
  for (auto& [id, w] : held_) {
    if (w.ended || w.pid <= 0 || !w.end_reason.empty()) continue;
    auto slot = slot_index_.find(w.slot);
    if (slot == slot_index_.end()) continue;
    Status st = enforce::CheckCountersFile(node_.paths().counters, slot->second);
    if (st.ok()) continue;
    ++stats_.counters_broken;
    // What the file counted is lost: the tenant's memory is no longer accounted, so its work
    // ends (fail closed), as if it were over its limit.
    Violated(w, std::string(st.message()) + "; its memory is no longer accounted", {});
  }
}

int64_t Agent::AddNvmlWindows(int64_t now_ms, const NvmlPass& pass) {
  // The time this pass stands for: since the previous one, at most two periods (an agent stalled
  // longer does not stretch one reading over the gap); a first pass stands for one period.
  const int64_t period = std::max<int64_t>(options_.backstop_period_ms, 1);
  const int64_t elapsed =
      last_backstop_ms_ > 0 ? std::clamp<int64_t>(now_ms - last_backstop_ms_, 0, 2 * period) : period;
  last_backstop_ms_ = now_ms;
  for (const auto& [id, w] : held_) {
    if (w.ended || w.pid <= 0) continue;  // no command: the agent knows none of its pids
    for (int gpu : w.gpus) {
      NvmlWindow& win = nvml_windows_[{id, gpu}];
      if (pass.util_read.count(gpu)) {
        auto busy = pass.sm_milli.find({id, gpu});
        win.busy_milli_ms += std::min<int64_t>(busy != pass.sm_milli.end() ? busy->second : 0, 1000) * elapsed;
        win.covered_ms += elapsed;
        win.sampled = win.sampled || pass.sampled.count(gpu) > 0;
      } else {
        win.util_unknown = true;
      }
      if (pass.procs_read.count(gpu) && !pass.memory_untold.count({id, gpu})) {
        auto mib = pass.memory_mib.find({id, gpu});
        win.peak_mib = std::max(win.peak_mib, mib != pass.memory_mib.end() ? mib->second : 0);
      } else {
        win.memory_unknown = true;
      }
    }
  }
  std::erase_if(nvml_windows_, [&](const auto& e) { return !held_.count(e.first.first); });
  return elapsed;
}

void Agent::Backstop(int64_t now_ms) {
  if (options_.backstop_period_ms <= 0 || now_ms < next_backstop_ms_) return;
  next_backstop_ms_ = now_ms + options_.backstop_period_ms;
  CheckCountersFiles();
  if (options_.nvml == nullptr) return;
  ++stats_.backstop_checks;
  const int64_t allowance = options_.context_allowance_mib;

  // The workloads that own processes: running (or being stopped) and not yet judged.
  std::map<long, HeldWorkload*> by_supervisor;
  std::set<int> shared_gpus;
  for (auto& [id, w] : held_) {
    if (w.ended) continue;
    if (w.partition == "share") shared_gpus.insert(w.gpus.begin(), w.gpus.end());
    if (w.pid > 0) by_supervisor[w.pid] = &w;
  }
  std::map<long, HeldWorkload*> owner_cache;
  auto owner_of = [&](uint32_t pid) -> HeldWorkload* {
    if (auto c = owner_cache.find(pid); c != owner_cache.end()) return c->second;
    HeldWorkload* owner = nullptr;
    long p = pid;
    for (int depth = 0; depth < 64 && p > 1 && owner == nullptr; ++depth) {
      if (auto s = by_supervisor.find(p); s != by_supervisor.end()) owner = s->second;
      const std::optional<ProcStat> st = ReadProcStat(p);
      if (!st) break;
      if (owner == nullptr && depth == 0)
        if (auto s = by_supervisor.find(st->sid); s != by_supervisor.end()) owner = s->second;
      p = st->ppid;
    }
    owner_cache[pid] = owner;
    return owner;
  };

  struct Use {
    std::map<int, int64_t> charged_mib;  // per GPU of the workload's own: over the allowances
    std::vector<uint32_t> pids;
    std::vector<std::string> elsewhere;  // "pid 12 on GPU 1 (900 MiB)"
    std::vector<std::string> unshimmed;  // "pid 12 on GPU 0"
    int64_t processes = 0;
  };
  std::map<int64_t, Use> use;
  std::set<uint32_t> seen;
  std::string unreadable;  // "GPU 1: GPU is lost; GPU 3: ...": the "nvml" condition's detail
  NvmlPass pass;  // this pass's view for the usage samples' NVML figures
  for (size_t gpu = 0; gpu < inventory_.gpus.size(); ++gpu) {
    const int g = static_cast<int>(gpu);
    StatusOr<std::vector<enforce::ProcessUtilization>> utils =
        options_.nvml->ProcessUtilizations(static_cast<uint32_t>(gpu), util_last_seen_us_[g]);
    if (utils.ok()) {
      pass.util_read.insert(g);
      // A pid's mean over its new samples (the driver may keep several per process).
      std::map<uint32_t, std::pair<int64_t, int64_t>> per_pid;  // pid -> (sum of SM %, samples)
      for (const enforce::ProcessUtilization& u : *utils) {
        util_last_seen_us_[g] = std::max(util_last_seen_us_[g], u.timestamp_us);
        per_pid[u.pid].first += u.sm_percent;
        ++per_pid[u.pid].second;
      }
      if (!per_pid.empty()) pass.sampled.insert(g);
      for (const auto& [pid, sum] : per_pid) {
        if (static_cast<pid_t>(pid) == ::getpid()) continue;
        if (HeldWorkload* w = owner_of(pid)) pass.sm_milli[{w->id, g}] += 10 * sum.first / sum.second;
      }
    }
    StatusOr<std::vector<enforce::GpuProcess>> procs = options_.nvml->RunningProcesses(static_cast<uint32_t>(gpu));
    if (!procs.ok()) {
      const std::string what = "GPU " + std::to_string(gpu) + ": " + std::string(procs.status().message());
      Log("backstop: " + what);
      unreadable += (unreadable.empty() ? "" : "; ") + what;
      continue;
    }
    pass.procs_read.insert(g);
    for (const enforce::GpuProcess& p : *procs) {
      if (static_cast<pid_t>(p.pid) == ::getpid()) continue;
      seen.insert(p.pid);
      const int64_t used = p.used_memory ? p.used_memory->value() : 0;
      HeldWorkload* w = owner_of(p.pid);
      if (w != nullptr) {
        if (p.used_memory) pass.memory_mib[{w->id, g}] += used;
        else pass.memory_untold.insert({w->id, g});
      }
      if (w == nullptr) {
        if (!shared_gpus.count(static_cast<int>(gpu)) || unknown_seen_.count(p.pid)) continue;
        unknown_seen_.insert(p.pid);
        if (const std::optional<ProcStat> st = ReadProcStat(p.pid); st && IsMpsServer(*st)) continue;
        ++stats_.backstop_unknown;
        Log("backstop: pid " + std::to_string(p.pid) + " uses " + Mib(used) + " on shared GPU " +
            std::to_string(gpu) + " and belongs to no workload" +
            (options_.backstop_kill ? "; killing it" : " (--enforce report: not killed)"));
        if (options_.backstop_kill) KillProcess(p.pid);
        continue;
      }
      Use& u = use[w->id];
      u.pids.push_back(p.pid);
      ++u.processes;
      if (std::find(w->gpus.begin(), w->gpus.end(), static_cast<int>(gpu)) != w->gpus.end()) {
        u.charged_mib[static_cast<int>(gpu)] += std::max<int64_t>(0, used - allowance);
        // On a time-sliced GPU a compute process without the shim launches outside the lease.
        // Read every pass: a process that had the shim may have exec'd itself without it.
        if (w->partition == "share" && w->mps_thread_pct == 0) {
          const std::optional<bool> has = ProcessHasShim(p.pid, shim_inode_);
          if (has == false) u.unshimmed.push_back("pid " + std::to_string(p.pid) + " on GPU " + std::to_string(gpu));
          if (!has && shim_unjudged_.insert(p.pid).second) {
            Log("backstop: cannot read /proc/" + std::to_string(p.pid) + "/maps (workload " + std::to_string(w->id) +
                "): whether it runs under the shim is not judged");
          }
        }
      } else {
        u.elsewhere.push_back("pid " + std::to_string(p.pid) + " on GPU " + std::to_string(gpu) + " (" + Mib(used) +
                              ")");
      }
    }
  }
  ChargeObservedTime(pass, AddNvmlWindows(now_ms, pass));
  if (unreadable.size() > 1000) unreadable = unreadable.substr(0, 997) + "...";
  nvml_condition_ = api::NodeCondition{std::string(api::kConditionNvml), unreadable.empty(), unreadable};
  std::erase_if(unknown_seen_, [&](uint32_t pid) { return !seen.count(pid); });
  std::erase_if(shim_unjudged_, [&](uint32_t pid) { return !seen.count(pid); });
  std::erase_if(over_limit_, [&](int64_t id) { return !held_.count(id); });

  for (auto& [id, w] : held_) {
    if (w.ended || w.pid <= 0 || !w.end_reason.empty()) continue;
    auto u = use.find(id);
    const int64_t limit_mib = static_cast<int64_t>(w.mem_bytes >> 20);
    bool over_on_own = false;
    if (u != use.end())
      for (const auto& [gpu, mib] : u->second.charged_mib) over_on_own = over_on_own || mib > limit_mib;
    const bool over = u != use.end() && (over_on_own || !u->second.elsewhere.empty() || !u->second.unshimmed.empty());
    if (!over) {
      over_limit_.erase(id);
      continue;
    }
    if (over_limit_.count(id)) continue;  // report mode: once per episode
    over_limit_.insert(id);
    std::string detail;
    for (const auto& [gpu, mib] : u->second.charged_mib) {
      if (mib <= limit_mib) continue;
      detail += (detail.empty() ? "" : "; ") + std::string("GPU ") + std::to_string(gpu) + ": " + Mib(mib) + " over the " +
                Mib(allowance) + " per-process allowance (" + std::to_string(u->second.processes) +
                " process(es)), limit " + Mib(limit_mib) + " (NVML)";
    }
    for (const std::string& e : u->second.elsewhere)
      detail += (detail.empty() ? "" : "; ") + e + ", placed on GPU " + GpuList(w.gpus);
    for (const std::string& e : u->second.unshimmed)
      detail += (detail.empty() ? "" : "; ") + e + " runs without the shim (libtessera-shim is not mapped: " +
                "re-exec'd without LD_PRELOAD, or a static binary): its launches bypass the GPU's time slices";
    Violated(w, detail, u->second.pids);
  }
}

}  // namespace tessera::node
