#include "tessera/node/node_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "src/node/registry.h"
#include "tessera/enforce/lease.h"
#include "tessera/enforce/lease_file.h"
#include "tessera/enforce/segment.h"

namespace tessera::node {
namespace {

// Whether /proc says the process has exited and waits to be reaped (state Z or X). A zombie holds
// nothing on the GPU; its parent may never reap it (a SIGKILLed slurmstepd leaves its task to an
// init that does not reap, as in a container). Unreadable: not known to be one.
bool Zombie(long pid) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[512];
  const ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
  ::close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  const char* paren = std::strrchr(buf, ')');  // the command name may hold spaces and ')'
  return paren != nullptr && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X' || paren[2] == 'x');
}

bool ProcessAlive(long pid) {
  return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM) && !Zombie(pid);
}
bool ProcessGroupAlive(long pgid) {
  return pgid > 0 && (::kill(-static_cast<pid_t>(pgid), 0) == 0 || errno == EPERM);
}

// One operation's answers (a join, a leave, a prune, a KeepLive or LiveEntries pass: one reading
// of the registry): while a LivenessPass is in scope on this thread, each pid and each process
// group is asked of the kernel once, however many entries name it. The DRA driver and the device
// plugin are the one member of every slot they hold, so a join beside 63 of their slots asked
// kill(2) + /proc/<pid>/stat 126 times (EveryMemberAlive, then PruneEntries), now once. Within one
// pass a process that dies is seen dead by the next operation, as it was by a later check.
class LivenessPass {
 public:
  LivenessPass() : outer_(current_) { current_ = this; }
  ~LivenessPass() { current_ = outer_; }
  LivenessPass(const LivenessPass&) = delete;
  LivenessPass& operator=(const LivenessPass&) = delete;
  static bool Alive(long pid) { return current_ ? current_->Ask(current_->pids_, pid, ProcessAlive) : ProcessAlive(pid); }
  static bool GroupAlive(long pgid) {
    return current_ ? current_->Ask(current_->groups_, pgid, ProcessGroupAlive) : ProcessGroupAlive(pgid);
  }

 private:
  static bool Ask(std::unordered_map<long, bool>& known, long id, bool (*ask)(long)) {
    auto [it, fresh] = known.try_emplace(id, false);
    if (fresh) it->second = ask(id);
    return it->second;
  }
  static thread_local LivenessPass* current_;
  LivenessPass* outer_;
  std::unordered_map<long, bool> pids_, groups_;
};
thread_local LivenessPass* LivenessPass::current_ = nullptr;

bool Alive(long pid) { return LivenessPass::Alive(pid); }
bool GroupAlive(long pgid) { return LivenessPass::GroupAlive(pgid); }

// Every member and command group of the entry lives: a join or leave need not look at its file.
bool EveryMemberAlive(const TenantEntry& e) {
  return std::all_of(e.pids.begin(), e.pids.end(), Alive) && std::all_of(e.pgids.begin(), e.pgids.end(), GroupAlive);
}

// Live while a member or a process of one of its command groups lives (header comment).
bool EntryAlive(const TenantEntry& e) {
  return std::any_of(e.pids.begin(), e.pids.end(), Alive) || std::any_of(e.pgids.begin(), e.pgids.end(), GroupAlive);
}

// An flock held for the lifetime of the object, on a lock file only the node side may open (mode
// 0600, OpenNodeLockFile): a tenant under a uid of its own cannot hold it and stall the node.
class FileLock {
 public:
  FileLock(const std::string& path, int op) {
    fd_ = OpenNodeLockFile(path);
    if (fd_ >= 0 && ::flock(fd_, op) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  bool held() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// Maps the counters file of `index` for a decision about it. A file its tenant broke (truncated,
// overwritten: enforce::CheckCountersFile) reads as none, as it does for the arbiters: what it
// counted went with it, and what that tenant's processes still hold on a GPU is the NVML backstop's
// to see. Left as an error, one tenant's broken file would stop every join on the node. Errors of
// the node side's own (it cannot open the file) stay errors.
Status MapCountersUnlessBroken(enforce::NodeSegment& seg, int index) {
  Status st = seg.MapCounters(index);
  if (st.code() == StatusCode::kInvalidArgument || st.code() == StatusCode::kFailedPrecondition) return Status::Ok();
  return st;
}

// Drops dead members and groups, and entries with nothing alive (their limit goes back to 0). An
// entry whose runs are gone but one of whose processes still holds a segment slot (a daemon that
// left its command's group) keeps its index and limit: fail closed, the index is handed to nobody
// else and the daemon stays within its tenant's limit. Without the segment nothing can be told,
// and such an entry stays too.
// Drops dead members and entries; returns the entries that went (for RecordDepartures). Only the
// counters files of entries with nothing alive are looked at (a segment opened on demand maps no
// other); one that cannot be mapped keeps its entry (fail closed).
std::vector<TenantEntry> PruneEntries(std::vector<TenantEntry>& tenants, enforce::NodeSegment* seg) {
  std::vector<TenantEntry> kept, gone;
  for (TenantEntry& e : tenants) {
    std::erase_if(e.pids, [](long pid) { return !Alive(pid); });
    std::erase_if(e.pgids, [](long pgid) { return !GroupAlive(pgid); });
    if (e.pids.empty() && e.pgids.empty() &&
        (seg == nullptr || !MapCountersUnlessBroken(*seg, e.index).ok() || seg->TenantHasLiveSlots(e.index))) {
      kept.push_back(std::move(e));
      continue;
    }
    if (e.pids.empty() && e.pgids.empty()) {
      if (seg != nullptr) {
        // Best effort: an index out of the segment's range was rejected when the file was read.
        for (int gpu : e.gpus) (void)seg->SetLimit(e.index, gpu, 0);
        (void)seg->SetTenantFlags(e.index, 0);
      }
      gone.push_back(std::move(e));
      continue;
    }
    kept.push_back(std::move(e));
  }
  tenants = std::move(kept);
  return gone;
}

// What a leave maps and reconciles (a segment opened on demand), as a join does (header comment,
// "Cost of a join"): the entries it changed (`left`: their member or group left) and those with a
// dead member or group, which PruneEntries may drop now; their dead processes' charges are released
// first, so that an entry whose last process was SIGKILLed goes, and its index is free. Another live
// tenant's dead processes are left to its GPU's arbiter (NodeDir::Reconcile every 100 ms).
void ReconcileWhatALeaveDecides(enforce::NodeSegment& seg, const std::vector<TenantEntry>& tenants,
                                const std::set<int>& left) {
  for (const TenantEntry& e : tenants) {
    if (!left.count(e.index) && EveryMemberAlive(e)) continue;
    if (MapCountersUnlessBroken(seg, e.index).ok()) seg.ReconcileTenant(e.index);
  }
}

// Appends one line per gone entry to the departures file, when a usage meter keeps one (the file
// exists: UsageMeter's owner creates it; without a meter nothing is written). Best effort, after
// the registry without them is committed: the counters are the last the board and segment hold.
void RecordDepartures(const NodePaths& paths, const std::vector<TenantEntry>& gone, const enforce::NodeSegment* seg) {
  if (gone.empty()) return;
  const int fd = ::open(paths.departed.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) return;
  StatusOr<enforce::LeaseFile> leases = enforce::LeaseFile::OpenNodeLines(paths.leases);
  std::string text;
  for (const TenantEntry& e : gone) {
    for (int gpu : e.gpus) {  // one departure per GPU, with that GPU's counters
      uint64_t launches = 0, charged_ns = 0, peak = 0;
      if (leases.ok()) charged_ns = leases->board(gpu).node[e.index].charged_ns.load();
      // The tenant's lines of the board are its page in its counters file (enforce/lease_file.h).
      const enforce::CounterSegment* counters = seg != nullptr ? seg->counters(e.index) : nullptr;
      if (counters != nullptr) launches = counters->lease_slots[gpu].tenant.launches.load();
      if (seg != nullptr) peak = seg->PeakBytes(e.index, gpu);
      text += nlohmann::json{{"name", e.name},
                             {"account", e.account},
                             {"workload", e.workload},
                             {"gpu", gpu},
                             {"share", e.share},
                             {"joined_s", e.joined_s},
                             {"left_s", static_cast<int64_t>(::time(nullptr))},
                             {"launches", launches},
                             {"charged_ns", charged_ns},
                             {"peak_bytes", peak},
                             {"mig", !e.mig_instance.empty()}}
                  .dump() +
              "\n";
    }
  }
  (void)!::write(fd, text.data(), text.size());  // one append: whole lines
  ::close(fd);
}

// Whether a free registry index must still not be given to a new tenant: a live process holds a
// slot under it (a daemon of a gone entry), or its memory is still charged on some GPU (Join
// reconciles dead processes first, so that is a reconcile in progress).
bool IndexInUse(const enforce::NodeSegment& seg, int index) {
  if (seg.TenantHasLiveSlots(index)) return true;
  for (int gpu = 0; gpu < enforce::kMaxGpus; ++gpu) {
    if (seg.ReservedBytes(index, gpu) > 0) return true;
  }
  return false;
}

// The whole of a small file, or nullopt.
std::optional<std::string> ReadText(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string text;
  char buf[512];
  ssize_t n = 0;
  while ((n = ::read(fd, buf, sizeof(buf))) > 0) text.append(buf, static_cast<size_t>(n));
  ::close(fd);
  if (n < 0) return std::nullopt;
  return text;
}

// The members directory (node_dir.h): one file per live member, "<start time> <index>" per tenant
// it is a member of, written only by the node side; what the shim takes its tenant from. Files of
// processes that are no longer members are removed; a file is rewritten only when it changes.
Status SyncMembers(const NodePaths& p, const std::vector<TenantEntry>& tenants) {
  if (::mkdir(p.members.c_str(), 0755) != 0 && errno != EEXIST) {
    return InternalError("members directory '" + p.members + "': " + std::strerror(errno));
  }
  std::map<long, std::string> want;
  // Each process's start time is read once: the DRA driver is the one member of all its slots.
  std::map<long, std::optional<std::uint64_t>> starts;
  for (const TenantEntry& e : tenants) {
    for (long pid : e.pids) {
      auto [start, fresh] = starts.try_emplace(pid);
      if (fresh) start->second = enforce::ProcessStartTime(static_cast<pid_t>(pid));
      if (start->second) want[pid] += std::to_string(*start->second) + " " + std::to_string(e.index) + "\n";
    }
  }
  if (DIR* d = ::opendir(p.members.c_str()); d != nullptr) {
    while (dirent* entry = ::readdir(d)) {
      const std::string name = entry->d_name;
      if (name == "." || name == "..") continue;
      char* end = nullptr;
      const long pid = std::strtol(name.c_str(), &end, 10);
      if (*end != '\0' || !want.count(pid)) (void)::unlink((p.members + "/" + name).c_str());
    }
    ::closedir(d);
  }
  for (const auto& [pid, text] : want) {
    const std::string path = p.members + "/" + std::to_string(pid);
    if (ReadText(path) == text) continue;
    const std::string tmp = p.members + "/." + std::to_string(pid) + ".tmp";
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return InternalError("members file '" + tmp + "': " + std::strerror(errno));
    const bool written = ::fchmod(fd, 0644) == 0 &&
                         ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ::close(fd);
    if (!written || ::rename(tmp.c_str(), path.c_str()) != 0) {
      const std::string err = std::strerror(errno);
      (void)::unlink(tmp.c_str());
      return InternalError("members file '" + path + "': " + err);
    }
  }
  return Status::Ok();
}

// Every change of the registry goes through here: the registry, then the members directory.
Status Commit(const NodePaths& p, const std::vector<TenantEntry>& tenants) {
  TESSERA_RETURN_IF_ERROR(internal::WriteRegistry(p.registry, tenants));
  return SyncMembers(p, tenants);
}

// The segment with each tenant's counters file mapped when it is needed (OpenOnDemand): a join
// looks at a few of them, not all 64.
StatusOr<enforce::NodeSegment> CreateOrOpen(const NodePaths& p) {
  if (::access(p.policy.c_str(), F_OK) == 0 && ::access(p.leases.c_str(), F_OK) == 0) {
    return enforce::NodeSegment::OpenOnDemand(p.policy, p.counters);
  }
  enforce::SegmentOptions options;
  options.policy_path = p.policy;
  options.counters_dir = p.counters;
  options.num_gpus = enforce::kMaxGpus;
  TESSERA_ASSIGN_OR_RETURN(enforce::NodeSegment created, enforce::NodeSegment::Create(options));
  TESSERA_ASSIGN_OR_RETURN(enforce::LeaseFile leases, enforce::LeaseFile::Create(p.leases, enforce::kMaxGpus));
  (void)leases;  // created for the arbiters and shims; this process maps it when it needs it
  TESSERA_RETURN_IF_ERROR(Commit(p, {}));
  return created;
}

}  // namespace

std::string GpuList(const std::vector<int>& gpus) {
  std::string out;
  for (int gpu : gpus) out += (out.empty() ? "" : ",") + std::to_string(gpu);
  return out;
}

std::string DefaultNodeDir() {
  if (const char* d = std::getenv("TESSERA_RUN_DIR"); d != nullptr && *d != '\0') return d;
  if (const char* x = std::getenv("XDG_RUNTIME_DIR"); x != nullptr && *x != '\0') return std::string(x) + "/tessera";
  return "/tmp/tessera-" + std::to_string(::getuid());
}

NodePaths::NodePaths(std::string node_dir)
    : dir(std::move(node_dir)),
      policy(dir + "/policy"),
      counters(dir + "/counters"),
      leases(dir + "/leases"),
      registry(dir + "/tenants.json"),
      lock(dir + "/node.lock"),
      members(dir + "/members"),
      departed(dir + "/departed.jsonl") {}

int OpenNodeLockFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  struct stat st {};
  // A file of an earlier version (0666), or one made under a wider umask: narrowed by its owner.
  if (::fstat(fd, &st) == 0 && (st.st_mode & 07777) != 0600 && st.st_uid == ::geteuid()) (void)::fchmod(fd, 0600);
  return fd;
}

std::string NodePaths::ArbiterLock(int gpu) const { return dir + "/arbiter-gpu" + std::to_string(gpu) + ".lock"; }

NodeDir::NodeDir(std::string dir) : paths_(std::move(dir)) {}

StatusOr<int> NodeDir::Join(const TenantRequest& r, long member_pid) const {
  const LivenessPass pass;  // each process asked once
  if (r.gpus.empty()) return InvalidArgumentError("tenant '" + r.name + "': no GPU");
  std::vector<int> gpus = r.gpus;
  std::sort(gpus.begin(), gpus.end());
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (gpus[i] < 0 || gpus[i] >= enforce::kMaxGpus) {
      return InvalidArgumentError("GPU " + std::to_string(gpus[i]) + " is not a node GPU 0.." +
                                  std::to_string(enforce::kMaxGpus - 1));
    }
    if (i > 0 && gpus[i] == gpus[i - 1]) return InvalidArgumentError("GPU " + std::to_string(gpus[i]) + " is given twice");
  }
  if (::mkdir(paths_.dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return InternalError("node directory '" + paths_.dir + "': " + std::strerror(errno));
  }
  FileLock lock(paths_.lock, LOCK_EX);
  if (!lock.held()) return InternalError("cannot lock '" + paths_.lock + "'");
  TESSERA_ASSIGN_OR_RETURN(enforce::NodeSegment seg, CreateOrOpen(paths_));
  TESSERA_ASSIGN_OR_RETURN(std::vector<TenantEntry> tenants, internal::ReadRegistry(paths_.registry));
  // SIGKILLed processes' charges go before an index is chosen, reused or pruned; only the counters
  // files this join decides on are mapped and reconciled (header comment): the joining tenant's,
  // those of entries with a dead member (they may be pruned, their index freed), and below each
  // free index it considers. Another live tenant's dead processes are its GPU arbiter's to
  // reconcile (every 100 ms, NodeDir::Reconcile); until then their charge only keeps that tenant
  // further from its limit, never above it.
  for (const TenantEntry& e : tenants) {
    if (e.name != r.name && EveryMemberAlive(e)) continue;
    // The joining tenant's own broken file refuses its join (naming the file); another's does not.
    TESSERA_RETURN_IF_ERROR(e.name == r.name ? seg.MapCounters(e.index) : MapCountersUnlessBroken(seg, e.index));
    seg.ReconcileTenant(e.index);
  }
  // Recorded before a reused index's peak is reset below (a failed commit would record them again).
  RecordDepartures(paths_, PruneEntries(tenants, &seg), &seg);
  TenantEntry* entry = nullptr;
  std::set<int> used;
  for (TenantEntry& e : tenants) {
    used.insert(e.index);
    if (e.name == r.name) entry = &e;
    // One tenant per MIG instance (header comment): entries left in the registry after the pruning
    // above have a live member.
    if (e.name != r.name && !r.mig_instance.empty() && e.mig_instance == r.mig_instance) {
      return FailedPreconditionError("MIG instance " + r.mig_instance + " is held by tenant '" + e.name +
                                     "' (one tenant per MIG instance)");
    }
  }
  if (entry != nullptr) {
    if (entry->mig_instance != r.mig_instance) {
      const auto shown = [](const std::string& m) { return m.empty() ? std::string("the whole GPU") : "MIG instance " + m; };
      return FailedPreconditionError("tenant '" + r.name + "' already runs on " + shown(entry->mig_instance) + ", not " +
                                     shown(r.mig_instance) + " (every member asks for the same instance)");
    }
    if (entry->gpus != gpus) {
      return FailedPreconditionError("tenant '" + r.name + "' already runs on GPU(s) " + GpuList(entry->gpus) +
                                     ", not " + GpuList(gpus) + " (every member asks for the same GPUs)");
    }
    if (entry->uid != r.uid) {
      return FailedPreconditionError("tenant '" + r.name + "' already runs under uid " + std::to_string(entry->uid) +
                                     ", not " + std::to_string(r.uid) + " (one uid per tenant; -1: the node side's)");
    }
    entry->mem_bytes = r.mem_bytes;
    entry->share = r.share;
    entry->priority = r.priority;
    entry->kernel_estimate_us = r.kernel_estimate_us;
    entry->scrub = entry->scrub || r.scrub;  // sticky (header comment)
    if (!r.account.empty()) entry->account = r.account;
    if (!r.workload.empty()) entry->workload = r.workload;
    entry->pids.push_back(member_pid);
  } else {
    int index = -1;
    for (int i = 0; i < enforce::kMaxTenants && index < 0; ++i) {
      if (used.count(i)) continue;
      TESSERA_RETURN_IF_ERROR(MapCountersUnlessBroken(seg, i));
      seg.ReconcileTenant(i);
      if (!IndexInUse(seg, i)) index = i;
    }
    if (index < 0) return ResourceExhaustedError("all " + std::to_string(enforce::kMaxTenants) + " tenants in use");
    // A new tenant: a counters file of its own (new inode, so a process of the index's previous
    // tenant that still maps the old one writes nothing of it), owned by its uid.
    std::optional<uid_t> owner;
    if (r.uid >= 0) owner = static_cast<uid_t>(r.uid);
    TESSERA_RETURN_IF_ERROR(seg.RecreateTenantCounters(index, owner));
    tenants.push_back(TenantEntry{.name = r.name,
                                  .index = index,
                                  .gpus = gpus,
                                  .mem_bytes = r.mem_bytes,
                                  .share = r.share,
                                  .priority = r.priority,
                                  .kernel_estimate_us = r.kernel_estimate_us,
                                  .scrub = r.scrub,
                                  .account = r.account,
                                  .workload = r.workload,
                                  .joined_s = static_cast<int64_t>(::time(nullptr)),
                                  .uid = r.uid,
                                  .mig_instance = r.mig_instance,
                                  .pids = {member_pid},
                                  .pgids = {}});
    entry = &tenants.back();
  }
  const int index = entry->index;
  TESSERA_RETURN_IF_ERROR(seg.SetTenantFlags(index, entry->scrub ? enforce::kTenantScrubOnFree : 0));
  for (int gpu : gpus) TESSERA_RETURN_IF_ERROR(seg.SetLimit(index, gpu, r.mem_bytes));
  TESSERA_RETURN_IF_ERROR(Commit(paths_, tenants));
  return index;
}

Status NodeDir::AddCommandGroup(long member_pid, long pgid) const {
  FileLock lock(paths_.lock, LOCK_EX);
  if (!lock.held()) return InternalError("cannot lock '" + paths_.lock + "'");
  TESSERA_ASSIGN_OR_RETURN(std::vector<TenantEntry> tenants, internal::ReadRegistry(paths_.registry));
  for (TenantEntry& e : tenants) {
    if (std::find(e.pids.begin(), e.pids.end(), member_pid) != e.pids.end()) {
      e.pgids.push_back(pgid);
      return Commit(paths_, tenants);
    }
  }
  return NotFoundError("process " + std::to_string(member_pid) + " is not a member of a tenant in " + paths_.registry);
}

Status NodeDir::Leave(long member_pid, long pgid) const {
  const LivenessPass pass;  // each process asked once
  FileLock lock(paths_.lock, LOCK_EX);
  if (!lock.held()) return InternalError("cannot lock '" + paths_.lock + "'");
  StatusOr<enforce::NodeSegment> seg = enforce::NodeSegment::OpenOnDemand(paths_.policy, paths_.counters);
  TESSERA_ASSIGN_OR_RETURN(std::vector<TenantEntry> tenants, internal::ReadRegistry(paths_.registry));
  std::set<int> left;
  for (TenantEntry& e : tenants) {
    if (std::erase(e.pids, member_pid) > 0 || (pgid > 0 && std::erase(e.pgids, pgid) > 0)) left.insert(e.index);
  }
  if (seg.ok()) ReconcileWhatALeaveDecides(*seg, tenants, left);
  const std::vector<TenantEntry> gone = PruneEntries(tenants, seg.ok() ? &*seg : nullptr);
  TESSERA_RETURN_IF_ERROR(Commit(paths_, tenants));
  RecordDepartures(paths_, gone, seg.ok() ? &*seg : nullptr);
  return Status::Ok();
}

std::optional<FileStamp> StampOf(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return FileStamp{static_cast<uint64_t>(st.st_ino), static_cast<uint64_t>(st.st_size),
                   static_cast<int64_t>(st.st_ctim.tv_sec) * 1'000'000'000 + st.st_ctim.tv_nsec};
}

Status NodeDir::LeaveTenant(const std::string& name, long member_pid) const {
  const LivenessPass pass;  // each process asked once
  if (::access(paths_.policy.c_str(), F_OK) != 0) return Status::Ok();
  FileLock lock(paths_.lock, LOCK_EX);
  if (!lock.held()) return InternalError("cannot lock '" + paths_.lock + "'");
  StatusOr<enforce::NodeSegment> seg = enforce::NodeSegment::OpenOnDemand(paths_.policy, paths_.counters);
  TESSERA_ASSIGN_OR_RETURN(std::vector<TenantEntry> tenants, internal::ReadRegistry(paths_.registry));
  std::set<int> left;
  for (TenantEntry& e : tenants) {
    if (e.name == name && std::erase(e.pids, member_pid) > 0) left.insert(e.index);
  }
  if (seg.ok()) ReconcileWhatALeaveDecides(*seg, tenants, left);
  const std::vector<TenantEntry> gone = PruneEntries(tenants, seg.ok() ? &*seg : nullptr);
  TESSERA_RETURN_IF_ERROR(Commit(paths_, tenants));
  RecordDepartures(paths_, gone, seg.ok() ? &*seg : nullptr);
  return Status::Ok();
}

Status NodeDir::Relabel(const std::string& name, const std::string& account, const std::string& workload) const {
  if (::access(paths_.policy.c_str(), F_OK) != 0) return NotFoundError("tenant '" + name + "': no node in " + paths_.dir);
  FileLock lock(paths_.lock, LOCK_EX);
  if (!lock.held()) return InternalError("cannot lock '" + paths_.lock + "'");
  TESSERA_ASSIGN_OR_RETURN(std::vector<TenantEntry> tenants, internal::ReadRegistry(paths_.registry));
  auto it = std::find_if(tenants.begin(), tenants.end(), [&](const TenantEntry& e) { return e.name == name; });
  if (it == tenants.end()) return NotFoundError("tenant '" + name + "': not in " + paths_.registry);
  if (it->account == account && it->workload == workload) return Status::Ok();
  it->account = account;
  it->workload = workload;
  return internal::WriteRegistry(paths_.registry, tenants);
}

Status NodeDir::Prune() const {
  const LivenessPass pass;  // each process asked once
  if (::access(paths_.policy.c_str(), F_OK) != 0) return Status::Ok();
  FileLock lock(paths_.lock, LOCK_EX);
  if (!lock.held()) return InternalError("cannot lock '" + paths_.lock + "'");
  // Only the files of entries with nothing alive are mapped (PruneEntries).
  TESSERA_ASSIGN_OR_RETURN(enforce::NodeSegment seg,
                           enforce::NodeSegment::OpenOnDemand(paths_.policy, paths_.counters));
  TESSERA_ASSIGN_OR_RETURN(std::vector<TenantEntry> tenants, internal::ReadRegistry(paths_.registry));
  const std::vector<TenantEntry> gone = PruneEntries(tenants, &seg);
  TESSERA_RETURN_IF_ERROR(Commit(paths_, tenants));
  RecordDepartures(paths_, gone, &seg);
  return Status::Ok();
}

Status NodeDir::KeepDepartures() const {
  if (::mkdir(paths_.dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return InternalError("node directory '" + paths_.dir + "': " + std::strerror(errno));
  }
  const int fd = ::open(paths_.departed.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return UnavailableError(paths_.departed + ": " + std::strerror(errno));
  ::close(fd);
  return Status::Ok();
}

StatusOr<std::vector<Departure>> NodeDir::TakeDepartures() const {
  FileLock lock(paths_.lock, LOCK_EX);  // no writer appends between the read and the truncation
  if (!lock.held()) return InternalError("cannot lock '" + paths_.lock + "'");
  std::optional<std::string> text = ReadText(paths_.departed);
  if (!text || text->empty()) return std::vector<Departure>{};
  if (::truncate(paths_.departed.c_str(), 0) != 0) return UnavailableError(paths_.departed + ": " + std::strerror(errno));
  std::vector<Departure> out;
  size_t line_start = 0;
  int line_no = 0;
  std::string problems;
  while (line_start < text->size()) {
    size_t end = text->find('\n', line_start);
    if (end == std::string::npos) end = text->size();
    const std::string line = text->substr(line_start, end - line_start);
    line_start = end + 1;
    ++line_no;
    if (line.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    Departure d;
    const bool ok = j.is_object() && j.value("name", "") != "" && j.contains("gpu") && j["gpu"].is_number_integer() &&
                    j.contains("left_s") && j["left_s"].is_number_integer();
    if (!ok) {
      problems += (problems.empty() ? "" : "; ") + paths_.departed + ":" + std::to_string(line_no) + ": not a departure";
      continue;
    }
    d.name = j.value("name", "");
    d.account = j.value("account", "");
    d.workload = j.value("workload", "");
    d.gpu = j.value("gpu", 0);
    d.share = j.value("share", 0);
    d.joined_s = j.value("joined_s", int64_t{0});
    d.left_s = j.value("left_s", int64_t{0});
    d.launches = j.value("launches", uint64_t{0});
    d.charged_ns = j.value("charged_ns", uint64_t{0});
    d.peak_bytes = j.value("peak_bytes", uint64_t{0});
    d.mig = j.value("mig", false);
    out.push_back(std::move(d));
  }
  if (!problems.empty() && out.empty()) return DataLossError(problems);
  return out;
}

void NodeDir::Reconcile() const {
  StatusOr<enforce::NodeSegment> seg = enforce::NodeSegment::Open(paths_.policy, paths_.counters);
  if (seg.ok()) seg->Reconcile();
}

StatusOr<std::vector<EndedTenant>> EndTenantsWithBrokenCounters(const NodeDir& node) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<TenantEntry> live, node.LiveTenants());
  std::vector<EndedTenant> ended;
  for (const TenantEntry& e : live) {
    Status file = enforce::CheckCountersFile(node.paths().counters, e.index);
    if (file.ok()) continue;
    for (long pgid : e.pgids) (void)::kill(-static_cast<pid_t>(pgid), SIGKILL);
    // A member that leads its process group (a Slurm task does) takes its group along: what it
    // started is the tenant's too.
    for (long pid : e.pids) {
      const auto p = static_cast<pid_t>(pid);
      (void)::kill(::getpgid(p) == p ? -p : p, SIGKILL);
    }
    ended.push_back({.name = e.name, .pids = e.pids, .pgids = e.pgids, .reason = std::string(file.message())});
  }
  return ended;
}

StatusOr<std::vector<TenantEntry>> NodeDir::LiveTenants() const {
  StatusOr<enforce::NodeSegment> seg = enforce::NodeSegment::Open(paths_.policy, paths_.counters);
  TESSERA_ASSIGN_OR_RETURN(std::vector<TenantEntry> tenants, RegistryEntries());
  return KeepLive(std::move(tenants), seg.ok() ? &*seg : nullptr);
}

StatusOr<std::vector<TenantEntry>> NodeDir::RegistryEntries() const {
  FileLock lock(paths_.lock, LOCK_SH);
  return internal::ReadRegistry(paths_.registry);
}

std::vector<TenantEntry> NodeDir::KeepLive(std::vector<TenantEntry> tenants, const enforce::NodeSegment* seg) const {
  const LivenessPass pass;  // each process asked once
  // An entry held only by a daemon's segment slot is live too (PruneEntries keeps it).
  std::erase_if(tenants, [&](const TenantEntry& e) {
    return !EntryAlive(e) && !(seg != nullptr && seg->TenantHasLiveSlots(e.index));
  });
  for (TenantEntry& e : tenants) {
    std::erase_if(e.pids, [](long pid) { return !Alive(pid); });
    std::erase_if(e.pgids, [](long pgid) { return !GroupAlive(pgid); });
  }
  return tenants;
}

std::vector<TenantEntry> NodeDir::LiveEntries(std::vector<TenantEntry> tenants, const enforce::NodeSegment* seg) const {
  const LivenessPass pass;  // each process asked once
  // A running workload's command group answers one kill(2); a member's Alive costs a kill(2) and
  // a read of /proc/<pid>/stat (its zombie test), so the groups are asked first.
  std::erase_if(tenants, [&](const TenantEntry& e) {
    return !std::any_of(e.pgids.begin(), e.pgids.end(), GroupAlive) && !std::any_of(e.pids.begin(), e.pids.end(), Alive) &&
           !(seg != nullptr && seg->TenantHasLiveSlots(e.index));
  });
  return tenants;
}

StatusOr<NodeStatus> NodeDir::ReadStatus() const {
  NodeStatus out;
  out.dir = paths_.dir;
  if (::access(paths_.policy.c_str(), F_OK) != 0) return out;
  out.exists = true;
  TESSERA_ASSIGN_OR_RETURN(std::vector<TenantEntry> tenants, LiveTenants());
  TESSERA_ASSIGN_OR_RETURN(enforce::NodeSegment seg, enforce::NodeSegment::Open(paths_.policy, paths_.counters));
  TESSERA_ASSIGN_OR_RETURN(enforce::LeaseFile leases, enforce::LeaseFile::OpenNodeLines(paths_.leases));
  std::map<int, GpuStatus> gpus;
  for (const TenantEntry& e : tenants) {
    for (int gpu : e.gpus) {  // a pod's tenant under each of its GPUs, with that GPU's figures
      const enforce::LeaseSlotNodeLine& slot = leases.board(gpu).node[e.index];
      TenantStatus t;
      t.name = e.name;
      t.index = e.index;
      t.limit_bytes = seg.policy().tenants[e.index].limit_bytes[gpu].load();
      t.used_bytes = seg.ReservedBytes(e.index, gpu);
      t.peak_bytes = seg.PeakBytes(e.index, gpu);
      t.share = e.share;
      t.priority = e.priority;
      t.scrub = (seg.TenantFlags(e.index) & enforce::kTenantScrubOnFree) != 0;
      t.pids = e.pids;
      t.account = e.account;
      t.workload = e.workload;
      t.joined_s = e.joined_s;
      const enforce::CounterSegment* counters = seg.counters(e.index);
      t.launches = counters != nullptr ? counters->lease_slots[gpu].tenant.launches.load() : 0;
      t.charged_ns = slot.charged_ns.load();
      t.mig = !e.mig_instance.empty();
      GpuStatus& g = gpus[gpu];
      g.gpu = gpu;
      g.arbiter_alive = enforce::ArbiterAlive(leases.board(gpu), enforce::MonotonicNowNs(), 1'000'000'000);
      g.tenants.push_back(std::move(t));
    }
  }
  for (auto& [gpu, g] : gpus) out.gpus.push_back(std::move(g));
  return out;
}

}  // namespace tessera::node
