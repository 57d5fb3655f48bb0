// NodeDir: the node side's shared state on one machine, without a control plane. A node
// directory holds the memory segment (`policy`, and `counters/<tenant index>`, one file per tenant,
// tessera/enforce/segment.h), the lease
// file (`leases`, one board per GPU, tessera/enforce/lease_file.h), the tenant registry
// (`tenants.json`) and lock files. NodeDir creates them on the first Join (16 GPUs' worth), admits
// tenants into slots (tenant indexes), and reports what the segment and the boards say.
//
// Callers: `tessera run` (tools/tessera/commands/node.cc, through node::RunTenantCommand), the
// coming `tessera agent`, the Slurm SPANK plugin (Join in the step's prolog, Leave in its
// epilog) and the Kubernetes device plugin (Join in Allocate). They all find the same directory
// through DefaultNodeDir(), so processes started by any of them share one node.
//
// GPUs. A tenant is on one GPU or several (a pod's): its limit is set on each of them (the
// segment holds one limit per tenant and GPU; every other GPU's stays 0, no access), and each of
// those GPUs' lease arbiters puts it on its board. A later Join of the same tenant must ask for
// the same GPUs. Example: Join({.name = "p", .gpus = {1, 3}, .mem_bytes = 8 GiB}) lets p's
// processes allocate 8 GiB on GPU 1 and 8 GiB on GPU 3, nothing on GPUs 0 and 2.
//
// Tenants. A tenant (by name) gets the lowest free tenant index; a second Join with the same
// name joins it (same index, so all its processes share its memory counter and its lease; the
// latest mem/share/priority win). An entry lives while one of its members (the supervising
// process that joined, e.g. `tessera run`) or one process of a recorded command process group
// lives: a command that outlives its supervisor keeps its slot, so the next tenant never
// inherits its memory charge. `scrub` (zero device memory before every free,
// docs/enforcement.md) is sticky: once one member of a tenant asked for it, it stays on until
// the entry is gone, so a later run without it never turns off a protection a running process
// relies on. When an entry goes, its limit returns to 0 (no access).
//
// Identity. Next to the registry, the `members` directory (mode 0755, written only under the node
// lock by the node side) holds one file per live member pid, `members/<pid>`, with one line
// "<start time> <index>" per tenant it is a member of (start time: /proc/<pid>/stat field 22, so
// a reused pid does not match). It is how the shim learns its tenant (docs/security.md): a
// process's tenant is the one of its nearest ancestor (itself included) with a file of exactly
// one line whose start time matches, else the one of the leader of its session; never
// TESSERA_SHIM_TENANT alone. Every registry change rewrites it (files of processes that are no
// longer members go).
//
// Worked example: Join({.name = "a", .gpus = {0}, .mem_bytes = 64 MiB, .share = 30}, pid 100) on a
// fresh directory creates the files and registers a at index 0 (limit 64 MiB on GPU 0). Join of
// "b" (share 70) by pid 200 gets index 1. Join of "a" by pid 300 joins index 0 (pids 100, 300);
// members/100 and members/300 say "<start> 0", members/200 "<start> 1".
// pid 100 and 300 exit (Leave, or SIGKILL: the next Join, Leave or Prune drops them, ReadStatus
// no longer shows them): index 0's limit goes to 0 and index 0 is free again, unless its memory
// is still charged (IndexInUse in node_dir.cc).
//
// Cost of a join. A Join maps only the counters files it decides on (NodeSegment::OpenOnDemand),
// not all 64 (about 150 KiB each): the joining tenant's, those of entries with a dead member or
// group (reconciled, then pruned if nothing of them lives), and each free index it considers for a
// new tenant (reconciled first: a SIGKILLed process's charge keeps an index in use). Dead
// processes of another live tenant are left to its GPU's arbiter, which reconciles the whole node
// every 100 ms (Reconcile); their charge only keeps that tenant further below its limit meanwhile.
// Worked example: 63 tenants with live members, a 64th joins: one counters file is opened (index
// 63's, replaced by a fresh one), no other (bench/node_dir_bench.cc).
// A leave (Leave, LeaveTenant) likewise maps and reconciles only the entries it changed and those
// with a dead member or group (ReconcileWhatALeaveDecides in node_dir.cc): the 64th tenant above
// leaving opens its own file, no other.
//
// Process-safety: every change of the registry happens under an exclusive flock on `node.lock`,
// reads under a shared one; any number of processes may use the same directory at once. The
// registry file is replaced atomically (write + rename). A registry that is not valid (not JSON,
// wrong types, missing fields) is an error naming the file and the field; it is never reset.
// Thread-safety: a NodeDir holds no mutable state; calls from several threads are safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tessera/core/status.h"

namespace tessera::enforce {
class NodeSegment;
}

namespace tessera::node {

// {1, 3} -> "1,3": TESSERA_SHIM_GPUS, `tessera run --gpu`, messages.
std::string GpuList(const std::vector<int>& gpus);

// TESSERA_RUN_DIR, else $XDG_RUNTIME_DIR/tessera, else /tmp/tessera-<uid>.
std::string DefaultNodeDir();

// Opens (creating it) a lock file of the node directory (`node.lock`, `arbiter-gpu<N>.lock`) for
// flock, with mode 0600 whatever the umask and whatever an earlier version made it (0666): only
// the node side's uid may open it. flock works on a descriptor opened read-only, so a lock file a
// tenant can read is one it can hold: joins would wait on it, and a GPU whose arbiter lock it held
// would have no arbiter (docs/security.md). Returns the descriptor, or -1 with errno set.
int OpenNodeLockFile(const std::string& path);

// One version of a file the node side replaces by a rename at every change (the registry): its
// inode, size and change time. Two stats that give the same stamp saw the same version, so a
// reader parses the file again only when the stamp changed. nullopt when it cannot be stat'ed.
// Example: a join commits the registry (a new file renamed over the old) -> another inode.
struct FileStamp {
  uint64_t inode = 0, size = 0;
  int64_t ctime_ns = -1;
  bool operator==(const FileStamp&) const = default;
};
std::optional<FileStamp> StampOf(const std::string& path);

struct NodePaths {
  explicit NodePaths(std::string node_dir);
  std::string dir, policy, counters, leases, registry, lock;
  std::string members;  // members/<pid>: the tenant(s) the node assigned to a member (header comment)
  std::string departed; // departed.jsonl: entries that went, with their last counters (KeepDepartures)
  std::string ArbiterLock(int gpu) const;  // arbiter-gpu<N>.lock
};

// What a supervisor asks for its tenant.
struct TenantRequest {
  std::string name;
  // Node GPU indexes, 0..enforce::kMaxGpus-1, distinct: one for most tenants, all of a pod's
  // GPUs for a multi-GPU one (its processes may use each of them, each under the same limit).
  std::vector<int> gpus = {0};
  uint64_t mem_bytes = 0;        // device memory limit on each of those GPUs
  // Compute share in milli of the GPU (1000: all of it), >= 1: the lease arbiter's weight against
  // the GPU's other tenants and what a usage meter bills as allocated. Every joiner uses this unit
  // (the agent, the DRA driver, the device plugin, `tessera run`, Slurm's percent x 10).
  int share = 1;
  int priority = 0;              // used by the priority time-slice policy
  int kernel_estimate_us = 1000; // the lease arbiter's duration model: GPU time of one kernel
  bool scrub = false;            // zero device memory before every free (sticky)
  // Metering labels (UsageMeter): who is billed and for what. Empty: the tenant's name, and no
  // workload. The Slurm plugin sets the job's account and "slurm-job-<id>".
  std::string account;
  std::string workload;
  // The uid the tenant's processes run under; -1: the node side's own. Its counters file
  // (counters/<index>) is chown'ed to it; every member of a tenant must ask for the same uid.
  long uid = -1;
  // The MIG device UUID ("MIG-...") the tenant's processes run on; empty: the whole GPU(s). A MIG
  // instance is isolated by the hardware (its own SMs and memory), so such a tenant is not on its
  // GPU's lease board: the arbiter does not time-slice it against the GPU's other tenants (each
  // on an instance of its own) and never admits it, and its processes get no TESSERA_SHIM_LEASES
  // (launcher.h, GpuPin::mig); its memory limit is still the shim's. One tenant per instance:
  // Join refuses another tenant on an instance a live tenant holds, and every member of a tenant
  // must give the same instance. Example: tenants a on MIG-1111 and b on MIG-2222, both on GPU 0,
  // run side by side at full speed; tenant c asking for MIG-1111 is refused while a is alive.
  std::string mig_instance;
};

// One registry entry (tenants.json).
struct TenantEntry {
  std::string name;
  int index = -1;
  std::vector<int> gpus;    // ascending (TenantRequest::gpus); the tenant is on each GPU's board
  uint64_t mem_bytes = 0;
  int share = 1;
  int priority = 0;
  int kernel_estimate_us = 1000;
  bool scrub = false;
  std::string account;      // metering labels (TenantRequest)
  std::string workload;
  int64_t joined_s = 0;     // unix seconds when the entry was created (0: unknown, older registry)
  long uid = -1;            // TenantRequest::uid
  std::string mig_instance; // TenantRequest::mig_instance ("" in registries of earlier versions)
  std::vector<long> pids;   // the members (supervisors) that joined
  std::vector<long> pgids;  // process groups of their commands
};

struct TenantStatus {
  std::string name;
  int index = -1;
  uint64_t limit_bytes = 0;
  uint64_t used_bytes = 0;
  uint64_t peak_bytes = 0;
  int share = 0;
  int priority = 0;
  bool scrub = false;
  std::vector<long> pids;  // live members
  std::string account;     // metering labels (TenantRequest)
  std::string workload;
  int64_t joined_s = 0;    // unix seconds when it joined (0: unknown)
  uint64_t launches = 0;   // from the GPU's lease board
  uint64_t charged_ns = 0;
  bool mig = false;        // on a MIG instance (TenantRequest::mig_instance): not on the board
};

// An entry that went (its last member left or died), with the counters its slot held then.
struct Departure {
  std::string name, account, workload;
  int gpu = 0;
  int share = 0;
  int64_t joined_s = 0, left_s = 0;  // unix seconds
  uint64_t launches = 0, charged_ns = 0, peak_bytes = 0;
  bool mig = false;  // TenantStatus::mig
};

struct GpuStatus {
  int gpu = 0;
  bool arbiter_alive = false;  // heartbeat within the last second
  std::vector<TenantStatus> tenants;
};

struct NodeStatus {
  std::string dir;
  bool exists = false;        // false: no Join has created the node yet
  std::vector<GpuStatus> gpus;  // only GPUs with live tenants, ascending
};

class NodeDir {
 public:
  explicit NodeDir(std::string dir);

  const NodePaths& paths() const { return paths_; }

  // Creates or joins the node and registers `member_pid` as a member of `request.name`. A new
  // tenant gets a fresh counters file, owned by `request.uid` when one is given.
  // Returns the tenant index. INVALID_ARGUMENT for no GPU, a GPU out of range or twice;
  // FAILED_PRECONDITION when the tenant runs on other GPUs or under
  // another uid, PERMISSION_DENIED when the node side may not chown to the uid (not root),
  // RESOURCE_EXHAUSTED when every index is taken, DATA_LOSS for a corrupt registry.
  StatusOr<int> Join(const TenantRequest& request, long member_pid) const;
  // Records the process group of the command that `member_pid` started for its tenant.
  Status AddCommandGroup(long member_pid, long pgid) const;
  // Removes `member_pid` (and `pgid` when > 0) and prunes; reconciles the segment.
  Status Leave(long member_pid, long pgid = 0) const;
  // Sets the metering labels (TenantRequest::account, workload) of tenant `name`: a node side
  // that learns who a slot belongs to after it was made (the Kubernetes device plugin, from the
  // kubelet's PodResources) names the tenant then. A usage meter bills what came before under the
  // old labels (UsageMeter). Limits, members and index stay. NOT_FOUND when no such tenant.
  Status Relabel(const std::string& name, const std::string& account, const std::string& workload) const;
  // Removes `member_pid` from tenant `name` only (a supervisor of several tenants, the agent,
  // leaves one of them) and prunes. OK when the tenant or the node does not exist.
  Status LeaveTenant(const std::string& name, long member_pid) const;
  // The live entries (shared lock; dead members are not shown, nothing is written). An entry
  // whose runs are gone but one of whose processes still holds a segment slot (a daemon) is
  // live: its index and limit stay reserved, and its GPU's arbiter keeps it on the board.
  StatusOr<std::vector<TenantEntry>> LiveTenants() const;
  // LiveTenants in two steps, for a GPU's arbiter that syncs its board every 100 ms: the entries as
  // the registry file holds them (dead members included; read again only when the file changed),
  // and the live ones among entries read before, judged now (with the segment the caller keeps
  // open; null: entries held only by a daemon's segment slot are not seen).
  StatusOr<std::vector<TenantEntry>> RegistryEntries() const;
  std::vector<TenantEntry> KeepLive(std::vector<TenantEntry> entries, const enforce::NodeSegment* segment) const;
  // KeepLive's entries with their members and groups as the file holds them (dead ones included):
  // what a GPU's arbiter syncs its board with each second, which needs only whether an entry lives.
  // A command group is asked first (one kill(2) for a running workload; pruning the members cost
  // an agent of 64 tenants 4 kill(2) and 3 reads of /proc per tenant and second).
  std::vector<TenantEntry> LiveEntries(std::vector<TenantEntry> entries, const enforce::NodeSegment* segment) const;
  // Releases what SIGKILLed processes held (NodeSegment::Reconcile); a GPU's arbiter calls it
  // every 100 ms, and Leave before it prunes (Join reconciles the files it decides on: header
  // comment). No-op without a segment.
  void Reconcile() const;
  // Drops dead members and entries (their limits go to 0) without joining or leaving; what the
  // agent's periodic sweep or a SPANK epilog after a killed step calls. OK when no node exists.
  Status Prune() const;
  // Per GPU: the live tenants with limit, usage, share and lease counters (read-only).
  StatusOr<NodeStatus> ReadStatus() const;
  // From now on, every entry that goes is recorded with its last counters (departed.jsonl), so
  // that a usage meter bills a tenant that came and went between two of its looks. Creates the
  // node directory if needed.
  Status KeepDepartures() const;
  // The departures recorded since the previous call (the file is emptied under the node lock).
  // A line that is not a departure is skipped; DATA_LOSS naming file:line when none was.
  StatusOr<std::vector<Departure>> TakeDepartures() const;

 private:
  NodePaths paths_;
};

// A tenant whose processes were SIGKILLed because its counters file broke (EndTenantsWithBrokenCounters).
struct EndedTenant {
  std::string name;
  std::vector<long> pids, pgids;  // what was signalled
  std::string reason;             // enforce::CheckCountersFile's message
};
// For a node side without supervisors (`tessera node arbiter`, whose tenants are Slurm tasks):
// every live tenant whose own counters file its processes changed (truncated, grown or
// overwritten: enforce::CheckCountersFile) no longer has its memory accounted, so its members (with
// their process groups where they lead one, as a Slurm task does) and command groups are SIGKILLed (fail closed, as the agent and `tessera run` end such a command;
// the entry then goes with its members). Worked example: Slurm task 4242 of tenant physics.42
// truncates counters/0 -> {name "physics.42", pids {4242}, reason "counters file '.../0': size 0,
// ..."} and task 4242 is killed; the step ends with the signal.
StatusOr<std::vector<EndedTenant>> EndTenantsWithBrokenCounters(const NodeDir& node);

}  // namespace tessera::node
