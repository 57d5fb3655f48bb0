// DraBackstop (tessera/integrations/k8s/dra_backstop.h): NVML's per-process memory checked
// against the DRA claims' (or the device plugin's slots') limits, processes known by their pod's
// cgroup (or their slot's tenant file mount).
#include "tessera/integrations/k8s/dra_backstop.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "tessera/enforce/segment.h"

namespace tessera::k8s {
namespace {

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string Mib(int64_t mib) { return std::to_string(mib) + " MiB"; }

std::string PidList(const std::vector<uint32_t>& pids) {
  std::string out;
  for (uint32_t p : pids) out += (out.empty() ? "" : ", ") + std::to_string(p);
  return out;
}

// A process of a pod with no claim, on a GPU with a shared claim.
struct Unclaimed {
  uint32_t pid = 0;
  int gpu = 0;
  int64_t used_mib = 0;
  std::string pod;
};

// What one claim's processes hold, as NVML says.
struct ClaimHolding {
  std::map<int, int64_t> charged_mib;   // per GPU of its own: beyond the allowances
  std::vector<uint32_t> pids;
  std::vector<std::string> elsewhere;   // "pid 12 on GPU 1 (900 MiB)"
};

}  // namespace

DraBackstop::DraBackstop(DraBackstopOptions options, const enforce::NvmlApi& nvml)
    : options_(std::move(options)), nvml_(nvml) {
  const long self = options_.own_pid > 0 ? options_.own_pid : static_cast<long>(::getpid());
  own_pod_ = PodOf(static_cast<uint32_t>(self));
}

std::optional<std::string> DraBackstop::PodOf(uint32_t pid) const {
  std::optional<std::string> cgroup = ReadFile(options_.proc_dir + "/" + std::to_string(pid) + "/cgroup");
  return cgroup ? PodUidOfCgroup(*cgroup) : std::nullopt;
}

std::optional<std::string> DraBackstop::SlotFileOf(uint32_t pid) const {
  if (options_.slot_mount.empty()) return std::nullopt;
  std::optional<std::string> text = ReadFile(options_.proc_dir + "/" + std::to_string(pid) + "/mountinfo");
  return text ? SlotFileOfMountinfo(*text, options_.slot_mount) : std::nullopt;
}

void DraBackstop::Kill(const std::vector<uint32_t>& pids) {
  for (uint32_t pid : pids) {
    if (pid <= 1 || static_cast<pid_t>(pid) == ::getpid()) continue;
    if (::kill(static_cast<pid_t>(pid), SIGKILL) == 0) ++stats_.kills;
  }
}

DraBackstop::Pass DraBackstop::Check(const ClaimsFn& claims_fn, const RefreshFn& refresh) {
  ++stats_.passes;
  Pass pass;
  StatusOr<uint32_t> count = nvml_.DeviceCount();
  if (!count.ok()) {
    ++stats_.nvml_errors;
    pass.problems.push_back("NVML: " + std::string(count.status().message()));
    return pass;
  }
  std::vector<ClaimUse> claims = claims_fn();
  std::map<size_t, ClaimHolding> held;
  std::vector<Unclaimed> unclaimed;
  std::set<uint32_t> seen;
  // At most two rounds: the second after the claims were read again for a pod none of them named.
  for (int round = 0; round < 2; ++round) {
    held.clear();
    unclaimed.clear();
    std::map<std::string, size_t> by_pod, by_slot;
    std::set<int> shared_gpus;
    for (size_t i = 0; i < claims.size(); ++i) {
      for (const std::string& pod : claims[i].pod_uids) by_pod[pod] = i;
      if (!claims[i].slot_file.empty()) by_slot[claims[i].slot_file] = i;
      if (claims[i].shared) shared_gpus.insert(claims[i].gpus.begin(), claims[i].gpus.end());
    }
    for (uint32_t gpu = 0; gpu < *count; ++gpu) {
      StatusOr<std::vector<enforce::GpuProcess>> procs = nvml_.RunningProcesses(gpu);
      if (!procs.ok()) {
        if (round == 0) {
          ++stats_.nvml_errors;
          pass.problems.push_back("GPU " + std::to_string(gpu) + ": " + std::string(procs.status().message()));
        }
        continue;
      }
      for (const enforce::GpuProcess& p : *procs) {
        if (static_cast<pid_t>(p.pid) == ::getpid()) continue;
        seen.insert(p.pid);
        const int64_t used = p.used_memory ? p.used_memory->value() : 0;
        // A device-plugin slot's container: known by its tenant file's mount, which it cannot change.
        const std::optional<std::string> slot = SlotFileOf(p.pid);
        auto c = slot ? by_slot.find(*slot) : by_slot.end();
        const bool by_mount = c != by_slot.end();
        const std::optional<std::string> pod = by_mount ? std::nullopt : PodOf(p.pid);
        if (!by_mount && (!pod || pod == own_pod_)) continue;  // not a container's, or the driver's own pod
        if (!by_mount) c = by_pod.find(*pod);
        if (!by_mount && c == by_pod.end()) {
          if (shared_gpus.count(static_cast<int>(gpu)))
            unclaimed.push_back({.pid = p.pid, .gpu = static_cast<int>(gpu), .used_mib = used, .pod = *pod});
          continue;
        }
        const ClaimUse& claim = claims[c->second];
        ClaimHolding& h = held[c->second];
        h.pids.push_back(p.pid);
        if (std::find(claim.gpus.begin(), claim.gpus.end(), static_cast<int>(gpu)) != claim.gpus.end()) {
          h.charged_mib[static_cast<int>(gpu)] += std::max<int64_t>(0, used - options_.context_allowance_mib);
        } else {
          h.elsewhere.push_back("pid " + std::to_string(p.pid) + " on GPU " + std::to_string(gpu) + " (" + Mib(used) +
                                ")");
        }
      }
    }
    std::erase_if(unclaimed, [&](const Unclaimed& u) {
      const std::optional<std::string> stat =
          ReadFile(options_.proc_dir + "/" + std::to_string(u.pid) + "/stat");  // an MPS server is the node's
      return stat && stat->find("(nvidia-cuda-mps") != std::string::npos;
    });
    if (unclaimed.empty() || round == 1) break;
    if (Status read = refresh ? refresh() : Status::Ok(); !read.ok()) {
      ++stats_.refresh_errors;
      pass.problems.push_back("reading the claims again for a pod none of them names (pid " +
                              std::to_string(unclaimed.front().pid) + ", pod " + unclaimed.front().pod +
                              "): " + std::string(read.message()) + "; judged at the next pass");
      unclaimed.clear();
      break;
    }
    claims = claims_fn();
  }

  // The claims: over their limit, on a GPU not theirs, or with a broken counters file.
  std::set<std::string> still_over;
  for (size_t i = 0; i < claims.size(); ++i) {
    const ClaimUse& claim = claims[i];
    const ClaimHolding* h = held.count(i) ? &held[i] : nullptr;
    std::string detail;
    if (h != nullptr && claim.mem_bytes) {
      const int64_t limit_mib = static_cast<int64_t>(*claim.mem_bytes >> 20);
      for (const auto& [gpu, mib] : h->charged_mib) {
        if (mib > limit_mib) {
          detail += (detail.empty() ? "" : "; ") + Mib(mib) + " on GPU " + std::to_string(gpu) +
                    " over its limit of " + Mib(limit_mib) + " (beyond " + Mib(options_.context_allowance_mib) +
                    " of context per process)";
        }
      }
    }
    if (h != nullptr) {
      for (const std::string& e : h->elsewhere) detail += (detail.empty() ? "" : "; ") + e + ", a GPU not its own";
    }
    bool broken = false;
    if (!options_.counters_dir.empty() && claim.index >= 0) {
      if (Status st = enforce::CheckCountersFile(options_.counters_dir, claim.index); !st.ok()) {
        broken = true;
        detail += (detail.empty() ? "" : "; ") + std::string(st.message()) + "; its memory is no longer accounted";
      }
    }
    if (detail.empty()) continue;
    still_over.insert(claim.uid);
    const bool first = over_.insert(claim.uid).second;
    if (first) {
      ++stats_.violations;
      if (broken) ++stats_.counters_broken;
    }
    BackstopFinding f{.claim = claim.claim, .detail = detail, .pids = h ? h->pids : std::vector<uint32_t>{}};
    if (options_.kill && !f.pids.empty()) {
      Kill(f.pids);
      f.killed = true;
    }
    if (!f.pids.empty()) f.detail += " (pids " + PidList(f.pids) + ")";
    if (first || f.killed) pass.findings.push_back(std::move(f));
  }
  std::erase_if(over_, [&](const std::string& uid) { return !still_over.count(uid); });

  // Processes of pods without a claim on a GPU with tenants' limits.
  for (const Unclaimed& u : unclaimed) {
    const bool first = unclaimed_seen_.insert(u.pid).second;
    if (first) ++stats_.unclaimed;
    BackstopFinding f{.claim = "",
                      .detail = "pid " + std::to_string(u.pid) + " of pod " + u.pod + " uses " + Mib(u.used_mib) +
                                " on shared GPU " + std::to_string(u.gpu) + " and the pod holds no " +
                                options_.owner + " of it",
                      .pids = {u.pid}};
    if (options_.kill) {
      Kill(f.pids);
      f.killed = true;
    }
    if (first || f.killed) pass.findings.push_back(std::move(f));
  }
  std::erase_if(unclaimed_seen_, [&](uint32_t pid) { return !seen.count(pid); });
  return pass;
}

DraBackstopLoop::DraBackstopLoop(DraBackstop& backstop, DraBackstop::ClaimsFn claims, DraBackstop::RefreshFn refresh,
                                 std::chrono::milliseconds period, ReportFn report) {
  thread_ = std::thread([this, &backstop, claims = std::move(claims), refresh = std::move(refresh), period,
                         report = std::move(report)] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      lock.unlock();
      report(backstop.Check(claims, refresh));
      lock.lock();
      wake_.wait_for(lock, period, [this] { return stop_; });
    }
  });
}

DraBackstopLoop::~DraBackstopLoop() { Stop(); }

void DraBackstopLoop::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace tessera::k8s
