// Agent: `tessera agent`, the control plane's hands on one GPU node. It registers the node's
// inventory (inventory.h), heartbeats, reads the node's desired state, and makes it true in the
// node directory (node_dir.h) the shim enforces: one slot per placed workload with the
// workload's memory limit and compute share, the workload's command run under the shim, usage
// samples back to the control plane. The control plane decides; the agent never places work.
//
// Callers: tools/tessera/commands/agent.cc (the process: flags, signals, the HTTP link) and the
// tests (tests/node/agent_test.cc with a scripted control plane; tests/e2e with the real one).
//
// One round (Round, every `interval_ms`):
//   1. register the inventory if the control plane does not know the node (first round, or a
//      404 from heartbeat: it restarted without it or declared the node lost);
//   2. heartbeat, reporting the workloads that ended since the last acknowledged heartbeat
//      ({"finished": [{"id", "exit_code"}]}; kept and resent until a 200), and the node
//      directory's other tenants (issue 34: DRA claims, device-plugin slots, Slurm tasks, `tessera
//      run` by hand; "local_slots", agent_local.cc) when their list differs from the one the
//      control plane last acknowledged (none after a registration) and every kLocalSlotsResendMs
//      while it is not empty (a restarted control plane holds none); the GPUs those tenants are on
//      get an arbiter thread of this agent too (EnsureArbiter: no other process of a Kubernetes
//      node drives their boards, so their shares would go ungated); a control plane that refuses
//      the field (an older version) gets the heartbeat again without it, and the list waits
//      kLocalSlotsRetryMs;
//   3. the desired state: GET desired when the heartbeat's answer named a version
//      (desired_version) other than the one the agent holds, when it named none (an older
//      control plane), or kDesiredRefetchMs after the last GET (a safety net); else the held copy
//      (issue 32: a fleet of idle nodes sends half the requests). Either way the same reconcile
//      runs on it each round, so a change is acted on in the round whose heartbeat saw it.
//      For each desired workload not held yet: join its slot `w<id>` on its GPU
//      (limit = gpu_mem_mib, or the whole GPU's memory when 0; share = gpu_milli; priority) and,
//      when it has a command, start `<supervisor> run --tenant w<id> ... -- COMMAND` (the same
//      launcher `tessera run` uses: shim, GPU pinning, process group, arbiter) with its output
//      in <run_dir>/agent/w<id>.log and its exit code written to w<id>.exit; for a held one
//      whose limit, share or priority changed: join again (the policy page changes under the
//      running process: a lowered limit refuses new allocations, never frees); for a held one no
//      longer desired (cancelled, preempted, moved): SIGTERM its supervisor, SIGKILL its process
//      groups after `stop_grace_ms`, then leave its slot;
//   4. every `usage_interval_s`: one usage sample per held workload, from the segment (memory
//      now and peak) and the GPU's lease board (launches, GPU time charged), with a sequence
//      number per workload; unacknowledged samples are resent with the same seq and values (the
//      control plane counts a resend once).
// The register body carries the agent's instance id ("agent_id", kept in <run_dir>/agent/agent_id):
// a restarted agent registers its node again as the same agent; a second agent with the same name
// (another machine, another run directory) is refused (409) while the node is live, and
// Round returns UNAVAILABLE with the control plane's message until the node is lost.
//   5. every `backstop_period_ms` (when `nvml` is given): the NVML backstop (Backstop). The shim
//      enforces limits inside each process, and a process that drops LD_PRELOAD (re-exec under
//      `env -u LD_PRELOAD`, a static binary) escapes it; the driver still sees it. Each GPU's
//      compute processes (NvmlApi::RunningProcesses) are mapped to workloads: a process belongs
//      to workload w when w's supervisor is among its ancestors (the /proc/<pid>/stat ppid chain)
//      or leads its session (the supervisor is started with setsid, so double-forked daemons stay
//      in it). A workload's use on its GPU is the sum over its processes of (used - allowance),
//      the allowance being `context_allowance_mib` per process (the CUDA context the driver
//      charges to every process: ~500 MiB measured on an H200). Over the limit, any use on a
//      GPU it was not placed on, or (a time-sliced `share` workload, not MPS) a compute process on
//      its GPU without the shim mapped (MapsHoldTheShim of /proc/<pid>/maps: re-exec'd without
//      LD_PRELOAD or a static binary, so its launches bypass the time slices even under its memory
//      limit; a process whose maps cannot be read is not judged): a `violated_limit` event (heartbeat "events") and, with
//      `backstop_kill`, SIGKILL of its processes and supervisor; it is then reported finished
//      with reason `violated_limit` (the control plane marks it failed). A compute process that
//      belongs to no workload on a GPU shared by `share` workloads is logged and counted and,
//      with `backstop_kill`, killed. A violation can last up to one period before it is seen.
//      Each pass also sets the node's "nvml" condition (api::NodeCondition), sent with every
//      heartbeat from then on: ok when NVML listed every GPU's processes, else not ok with the
//      GPUs and NVML's errors ("GPU 1: GPU is lost"); the control plane makes each change a
//      `node.condition` event.
//      Each period (with or without NVML) the counters file of each running workload's tenant is
//      checked too (enforce::CheckCountersFile): a tenant that truncated, grew or overwrote its
//      own file (the node side maps it: enforce/fault_guard.h keeps the agent alive through the
//      SIGBUS) broke the accounting of its memory, and its workload ends as violated_limit.
//
//      NVML's view for the usage samples (issue 32): each pass also reads each GPU's per-process
//      utilisation (NvmlApi::ProcessUtilizations, the samples newer than the newest seen before on
//      that GPU), maps the pids to workloads as above, and adds to each running workload's window
//      on each of its GPUs: its processes' SM utilisation (the mean of each pid's new samples, summed
//      over its pids, in milli of the GPU, at most 1000) times the time since the previous pass
//      (at most two periods), and the most device memory its processes held (the sum of
//      RunningProcesses' figures, contexts included). The next usage sample of that GPU carries
//      "nvml_used_milli" (the window's time average) and "nvml_memory_mib" (its peak), and the
//      window starts again. A figure is left out of the sample, never sent as zero, when the driver
//      did not give it: utilisation when a pass's call failed (NOT_SUPPORTED under MIG, say) or no
//      sample of any process came for that GPU during the window (an idle GPU reads the same as a
//      driver that does not sample), memory when a pass could not list the GPU's processes or NVML
//      could not tell one of the workload's processes' memory; both without NVML, and for a
//      workload without a command (the agent knows none of its pids).
//      Worked example: workload 5 on GPU 0, its supervisor pid 100 and command pid 101; each pass
//      NVML samples 100 at 30 % and 101 at 25 %, and lists 101 with 164 MiB: the window adds
//      550 milli x 1000 ms per pass, and the next sample carries "nvml_used_milli": 550,
//      "nvml_memory_mib": 164 (the shim's own figures, "gpu_milli_s_used" and "peak_memory_mib",
//      stay beside them: a tenant that under-reports shows as the difference).
//
//      NVML's view charged to the arbiter (issue 29; agent_observed.cc): each pass also compares,
//      for each time-sliced workload ("share"; not MPS, not MIG) on each GPU with a new sample,
//      NVML's time (its processes' SM milli x the pass's span) with the growth of its slot's board
//      charge since the previous pass, less what this step added then (the arbiter has charged it
//      since). What node::UnderChargeTracker finds in the two (NVML's time 5 s late, against the
//      charge, decayed over a minute: clearly more, twice the charge and 50 milli of the span;
//      the lag keeps a tenant whose report of a long kernel comes late from paying twice) is
//      added to the slot's node-line observed_extra_ns, which the GPU's arbiter charges
//      at its next step (tessera/node/lease_arbiter.h, "Observed time"): the workload's turns and
//      its billed GPU time follow what the driver saw. One `gpu_time_recharged` event per episode.
//      Worked example: passes of 1000 ms, workload 5 sampled at 60 % (600 ms) in each, its charge
//      growing 0 ms (it zeroed its gpu_ns): from the sixth pass on (the first five within the
//      lag) about 600 ms goes to observed_extra_ns each pass; the pass after an add its charge
//      grows by that extra, which is not its own: own stays 0.
// Worked example of the backstop: workload 7 has a 1024 MiB limit on GPU 0 and allowance 500 MiB;
// NVML lists pid 4242 (its command, a child of its supervisor) with 4596 MiB: 4596 - 500 = 4096
// MiB > 1024 MiB, so 4242 and the supervisor are killed and the next heartbeat carries
// {"finished": [{"id": 7, "exit_code": 137, "reason": "violated_limit"}], "events": [{"id": 7,
// "kind": "violated_limit", "detail": "GPU 0: 4096 MiB over the allowance ..."}]}.
// MPS (mps_control.h): a workload whose mode is "mps(P,MMiB)" is an MPS client. Before it starts,
// its GPU's control daemon (`<mps_control> -d`, pipe and log directories <run_dir>/mps/gpu<N>/)
// is started unless it runs, and the supervisor's environment (so the command's) gets
// CUDA_MPS_PIPE_DIRECTORY, CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=P and
// CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=<limit + context_allowance_mib>M; the shim's limit (the
// slot's) stays in force as well. At the end of every round, each GPU with a running MPS workload
// has its daemon checked (its pid file and process) and started again if it died; a GPU whose
// last MPS workload ended has its daemon stopped (quit). Without the control program the workload
// is not run: it ends with exit code 126 and reason "mps_unavailable", with an event whose detail
// names the program and the flag (`tessera agent --mps-control PATH`). A limit changed while it
// runs reaches the shim at once; the MPS variables are the ones it started with.
// Tenant uids (docs/security.md, "Separate uids"; AgentOptions::tenant_uids): with `enabled`,
// each control-plane tenant's workloads run under a uid of that tenant's own, so that no tenant
// can open another's counters file (counters/<index>, 0600, chown'ed to the uid by
// NodeDir::Join). The agent joins each slot with the uid (TenantRequest::uid) and starts
// `tessera run ... --uid UID`, whose supervisor stays the agent's uid and drops the command to
// UID (no supplementary groups; gid: the uid's primary group, else the uid's number). A tenant's
// uid is, in this order: `fixed[tenant]` (`--tenant-uid T=UID`); the uid allotted to it before
// (<run_dir>/agent/tenant_uids.json, replaced atomically: stable across restarts); else the
// lowest uid of first..last that no tenant holds (allotted or fixed), written to that file
// before the workload starts. The range exhausted: the workload is not held (logged each
// round; fail closed, it never runs under the agent's uid). The command's HOME is the uid's
// home in the password database, else <run_dir>/agent/home/<uid> (0700, the uid's); its output
// file is opened by the agent and inherited. A workload keeps the uid it started with
// (w<id>.json), whatever the options of a restarted agent say. Start refuses (FAILED_PRECONDITION)
// a node directory that other uids cannot reach (an ancestor without o+x) and a fixed uid that
// the file allots to another tenant.
// Worked example: first..last = 2000000000..2000065535, file {"vision": 2000000000}, fixed
// {"audio": 4242}: workload 9 of "nlp" gets 2000000001 (written to the file), "vision" keeps
// 2000000000, "audio" runs under 4242; after a restart "nlp" gets 2000000001 again.
// MIG (agent_mig.cc): the desired state carries each MIG GPU's target layout ("gpus": [{"index",
// "mig_layout"}], chosen by the control plane). Each round, before the workloads, every such GPU's
// instances (read through `mig_nvml`) are compared with it. With `allow_mig_reconfigure` (the CLI's
// --allow-mig-reconfigure; off by default: cutting a GPU is the operator's decision per node) the
// difference is applied with enforce/mig_apply.h (free instances the target lacks destroyed, then
// the new ones created; checked against the model and the driver first) and the new inventory is
// registered at once; an instance in use (a process runs in it, a held workload has its profile
// on that GPU, or a tenant of the node directory holds its MIG device UUID: a DRA claim or a Slurm
// task whose process has not started yet) is never destroyed. Without the flag nothing changes. Either way the node's
// "mig_layout" condition says whether every GPU has its layout ("GPU 0: layout differs, not
// applied: has '', desired '3g.40gb@0' (the agent runs without --allow-mig-reconfigure)"), and a
// MIG workload is started only once its instance (profile at its pod's mig_start) exists.
// Each held workload's state (slot, supervisor pid and start time, next usage seq, the counters
// already reported) is in <run_dir>/agent/w<id>.json, replaced atomically: a restarted agent
// re-adopts what is running (same slot and limit: the slot is joined again by name, nothing is
// reset), continues the seq and counts nothing twice. The unsent samples are in
// <run_dir>/agent/outbox.json. What each usage sample moves (the next seq, the start of the next
// span, the counters reported) goes to one file of every held workload's, usage_cursors.json
// ({"7": {"next_seq": ..., "usage_from_s": ..., "reported_launches": [...],
// "reported_charged_ns": [...]}}), written after the outbox: one atomic write per sample, not one
// per workload (64 workloads: 64 fsyncs every usage interval). A restarted agent takes, per
// workload, whichever of w<id>.json and that file has the higher next_seq.
//
// Worked example: desired = [{"id": 7, "tenant": "vision", "mode": "fraction(500,2048MiB)",
// "gpu_milli": 500, "gpu_mem_mib": 2048, "pods": [{"gpus": [1]}], "command": ["./train"]}].
// Round joins slot w7 on GPU 1 (limit 2 GiB, share 500), starts `tessera run --tenant w7 --gpu 1
// --mem 2147483648B --share 500 --exit-file .../w7.exit -- ./train`. When ./train exits 0 the
// next round's heartbeat carries {"finished": [{"id": 7, "exit_code": 0}]}, the slot is left
// and w7.json removed once the control plane acknowledged it.
//
// Errors: Round returns UNAUTHENTICATED / PERMISSION_DENIED when the control plane refuses the
// token (the process exits), INVALID_ARGUMENT when it refuses the inventory (400: the message
// names the GPU), UNAVAILABLE while it cannot be reached (the caller retries next round); a
// corrupt w<id>.json or registry is DATA_LOSS naming the file. Thread-safety: one thread calls
// Round and Stop. Ownership: the agent owns its supervisor children and the arbiter threads
// (StopArbiters joins them); the workloads themselves outlive the agent.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "tessera/api/node_wire.h"
#include "tessera/core/status.h"
#include "tessera/enforce/lease_file.h"
#include "tessera/enforce/nvml.h"
#include "tessera/enforce/segment.h"
#include "tessera/node/inventory.h"
#include "tessera/node/lease_arbiter.h"
#include "tessera/node/mps_control.h"
#include "tessera/node/node_dir.h"
#include "tessera/node/proc_maps.h"
#include "tessera/node/usage_meter.h"

namespace tessera::node {

namespace internal {
using DesiredWorkload = api::DesiredWorkload;  // one workload of the desired state (agent_impl.h)
}

struct LinkResponse {
  int status = 0;
  std::string body;
};

// The agent's transport to the control plane: the CLI gives the HTTP client with the node-agent
// token; tests give a scripted control plane. UNAVAILABLE when the server cannot be reached.
class ControlPlaneLink {
 public:
  virtual ~ControlPlaneLink() = default;
  virtual StatusOr<LinkResponse> Call(std::string_view method, std::string_view path, std::string_view body) = 0;
};

// Which uid each tenant's workloads run under (see "Tenant uids" above).
struct TenantUidOptions {
  bool enabled = false;  // false: every workload runs under the agent's own uid
  long first = 0;        // the range allotted from, inclusive; first > last: none (fixed only)
  long last = -1;
  std::map<std::string, long> fixed;  // tenant name -> uid, given by the operator
};

// `tessera agent --tenant-uids` when the agent runs as root and the flag is not given: above the
// uids systemd hands to containers (up to 1879048191) and below its foreign range (2147352576);
// the node registry keeps uids up to INT_MAX.
inline constexpr char kDefaultTenantUids[] = "2000000000-2000065535";

// The flags --tenant-uids (`tenant_uids`: "FIRST-LAST", "off", or "" for the default: the range
// above as root, else off) and --tenant-uid (`tenant_uid`: "TENANT=UID" items), as TenantUidOptions.
// INVALID_ARGUMENT naming every problem at once, one line each ("--tenant-uid 'a=x': expected
// TENANT=UID, ..."): a range that does not parse or needs root, a uid given to two tenants, a
// tenant given twice, fixed uids with the range off. Example: ("", {"vision=4242"}, root) ->
// enabled, 2000000000..2000065535, fixed {vision: 4242}.
StatusOr<TenantUidOptions> ParseTenantUidFlags(const std::string& tenant_uids, const std::vector<std::string>& tenant_uid,
                                               bool root);

// How long the agent may act on a desired state the heartbeat's answers said is still current
// before it fetches it again anyway (step 3): the control plane's version is a hash of the body,
// so this only covers a control plane that answers a stale version.
inline constexpr int64_t kDesiredRefetchMs = 30'000;

// The node directory's other tenants (step 2) are sent again, unchanged, this long after they
// were last acknowledged while there are any: the control plane keeps them in memory only, so a
// restarted one (which the agent does not notice: its node is restored from the store) counts
// them again within this time. An idle fleet with none sends nothing more.
inline constexpr int64_t kLocalSlotsResendMs = 30'000;
// A control plane that refused "local_slots" (400 naming it: a version before the field) is sent
// heartbeats without it, and the list is tried again this long after.
inline constexpr int64_t kLocalSlotsRetryMs = 600'000;

struct AgentOptions {
  std::string name;        // the node's name at the control plane
  std::string run_dir;     // the node directory (DefaultNodeDir() unless given)
  std::string supervisor;  // the `tessera` executable that runs each workload (`tessera run`)
  std::string nvml_library = "libnvidia-ml.so.1";  // given to `tessera run --nvml` for GPU UUIDs
  // Extra environment of the supervisors and so of the workloads (e.g. TESSERA_SHIM_PATH).
  std::vector<std::pair<std::string, std::string>> child_env;
  int64_t usage_interval_s = 10;
  int64_t stop_grace_ms = 5000;
  bool run_arbiters = true;  // drive each GPU's lease board from this process (tests may not)
  // Meter the node directory's other tenants (the local slots: DRA claims, device-plugin slots)
  // into the usage outbox as the node arbiter's UsageMeter does, billed to each entry's account
  // (the namespace). Off by default: on a Slurm node `tessera node arbiter --usage-ledger` meters
  // them, and both would bill them twice. The Kubernetes DaemonSet turns it on.
  bool meter_local_slots = false;
  // The NVML backstop (step 5): null turns it off. Initialised by the caller; must outlive the
  // agent.
  enforce::NvmlApi* nvml = nullptr;
  int64_t backstop_period_ms = 1000;   // between two NVML checks
  int64_t context_allowance_mib = 500;  // per process, not counted against the limit
  bool backstop_kill = true;            // false: report only (events, log, counters)
  // The MPS control program (a path, or a name looked up on PATH) for workloads in MPS mode.
  std::string mps_control = "nvidia-cuda-mps-control";
  // Tenant uids (see above). Off by default here; `tessera agent` turns it on when it runs as
  // root (--tenant-uids). Needs root when on (the counters file is chown'ed, the command setuid).
  TenantUidOptions tenant_uids;
  // MIG layouts (see above): the NVML they are read and applied through (null: the inventory's
  // instances are taken as current and nothing is applied; initialised by the caller, must outlive
  // the agent), and whether the agent may change them (registered as "mig_reconfigure").
  enforce::NvmlApi* mig_nvml = nullptr;
  bool allow_mig_reconfigure = false;
};

// One workload the agent holds (a slot, and a supervisor when it has a command).
struct HeldWorkload {
  int64_t id = 0;
  std::string tenant;
  std::string slot;       // "w<id>": the node directory's tenant name
  std::string partition;  // "whole", "share" or the MIG profile (usage samples)
  std::vector<int> gpus = {0};  // node GPUs, ascending: one, or each GPU of a multi-GPU pod
  uint64_t mem_bytes = 0;        // limit on each GPU
  int share = 1;
  int priority = 0;
  int gpu_milli = 1000;
  int mps_thread_pct = 0;  // > 0: an MPS client (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE); 0: not MPS
  int mig_start = -1;      // >= 0: its MIG instance's first slice (the command sees that instance only)
  std::string mig_uuid;    // that instance's MIG device UUID (NVML), the slot's mig_instance (node_dir.h)
  std::vector<std::string> command;
  long pid = 0;                  // the supervisor; 0 when there is no command
  uint64_t pid_start_ticks = 0;  // /proc/<pid>/stat start time (guards against pid reuse)
  bool ended = false;            // the supervisor exited; exit_code is its code
  int exit_code = 0;
  bool final_sampled = false;    // the last usage sample after the end was taken
  int64_t stop_deadline_ms = 0;  // > 0: being stopped (no longer desired)
  std::string end_reason;        // "violated_limit" / "mps_unavailable" (persisted)
  long uid = -1;                 // the command's uid (its tenant's); -1: the agent's (persisted)
  // Usage accounting (persisted): the next sample's seq and start, the counters already reported.
  // The first seq is the placement's time in ms, so that a workload placed here again (after a
  // preemption) continues with higher seqs: its samples share a source (node, workload, GPU).
  int64_t next_seq = 1;
  int64_t usage_from_s = 0;
  // Per GPU of `gpus` (same order): the lease-board counters already reported.
  std::vector<uint64_t> reported_launches = {0};
  std::vector<uint64_t> reported_charged_ns = {0};
};

struct AgentStats {
  int64_t rounds = 0;
  int64_t registrations = 0;
  int64_t started = 0;
  int64_t stopped = 0;
  int64_t finished_reported = 0;
  int64_t limit_changes = 0;
  int64_t samples_sent = 0;      // acknowledged (counted or duplicate)
  int64_t samples_rejected = 0;  // refused by the control plane (logged)
  int64_t samples_pending = 0;
  int64_t backstop_checks = 0;      // NVML passes
  int64_t backstop_violations = 0;  // workloads found over their limit (once per episode)
  int64_t backstop_unknown = 0;     // processes of no workload on a shared GPU (once per pid)
  int64_t backstop_kills = 0;       // processes the backstop sent SIGKILL
  int64_t counters_broken = 0;      // workloads whose tenant changed its counters file (CheckCountersFiles)
  int64_t mps_starts = 0;           // MPS control daemons started (first start on a GPU)
  int64_t mps_restarts = 0;         // ... started again after they died
  int64_t mps_stops = 0;            // ... stopped after their GPU's last MPS workload ended
  int64_t mig_reconfigurations = 0;  // GPUs whose desired MIG layout was applied
  int64_t mig_steps = 0;             // MIG instances destroyed or created for them
  int64_t desired_fetches = 0;       // GETs of the desired state (a round may reuse the held one)
  int64_t local_slot_reports = 0;    // heartbeats acknowledged that carried "local_slots" (step 2)
  int64_t gpu_time_recharged_ns = 0;  // GPU time NVML saw beyond workloads' charges (ChargeObservedTime)
};

class Agent {
 public:
  // `inventory` is what DiscoverInventory found; `link` must outlive the agent.
  Agent(AgentOptions options, Inventory inventory, ControlPlaneLink* link);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Loads the agent's instance id (<run_dir>/agent/agent_id; drawn and written on the first
  // start), re-adopts the workloads of <run_dir>/agent (a restart) and loads the outbox. Call once.
  Status Start();
  // One round (see above); `now_ms`: wall-clock milliseconds since the epoch.
  Status Round(int64_t now_ms);
  // Step 5 alone, when `backstop_period_ms` passed since the last check (Round calls it too), so
  // that the process may check more often than it rounds. NVML errors are logged, not returned.
  void Backstop(int64_t now_ms);
  // Stops the arbiter threads. The workloads keep running (a restarted agent re-adopts them).
  void StopArbiters();

  const std::map<int64_t, HeldWorkload>& held() const { return held_; }
  const AgentStats& stats() const { return stats_; }
  bool registered() const { return registered_; }
  // What the agent last registered or found (MIG instances as of the last reconciliation).
  const Inventory& inventory() const { return inventory_; }
  // Log lines since the last call (what the process prints: starts, stops, refusals).
  std::vector<std::string> TakeLog();

 private:
  Status Register();
  Status Heartbeat(int64_t now_ms);
  // The node directory's live tenants that are not held workloads' slots, as the heartbeat sends
  // them (agent_local.cc; sorted by tenant). nullopt when the registry cannot be read (logged).
  std::optional<std::vector<api::LocalSlot>> LocalSlots();
  // With meter_local_slots: a look at the local slots for local_meter_ each round (while there
  // are any, or the meter still has one open), its due samples into the outbox.
  Status MeterLocalSlots(int64_t now_ms);
  Status ApplyDesired(int64_t now_ms);
  // The desired state this round: desired_ when it is still current (see step 3), else a GET.
  // nullptr: the control plane does not know the node (registered_ is then false).
  StatusOr<const api::DesiredState*> CurrentDesired(int64_t now_ms);
  Status Hold(const internal::DesiredWorkload& want, int64_t now_ms);
  Status LoadAgentId();  // <run_dir>/agent/agent_id, drawn on the first start
  Status Adopt();
  Status LoadOutbox();
  Status LoadTenantUids();  // <run_dir>/agent/tenant_uids.json, and the checks of Start
  // The uid `tenant`'s workloads run under (allotted and written down on first use); -1 when
  // tenant uids are off. RESOURCE_EXHAUSTED when the range has no uid left.
  StatusOr<long> TenantUid(const std::string& tenant);
  // HOME for a command under `uid` (created for a uid with no account).
  StatusOr<std::string> TenantHome(long uid);
  bool HasUnsampledEnd() const;
  Status Spawn(HeldWorkload& w);
  void Reap(int64_t now_ms);
  void StopWorkload(HeldWorkload& w, int64_t now_ms);
  Status Release(HeldWorkload& w);
  Status SampleUsage(int64_t now_ms);
  // What SampleUsage reads of each held slot on each of its GPUs (agent_usage.cc).
  struct SlotFigures {
    uint64_t launches = 0, charged_ns = 0, used_bytes = 0, peak_bytes = 0;
  };
  // The figures of every held workload's slot, keyed by (slot, GPU): from the segment and the lease
  // boards this agent keeps mapped (NodeDir::ReadStatus mapped 64 counters files and the lease file,
  // and judged every member alive, at each sample). A slot the registry does not name is absent.
  StatusOr<std::map<std::pair<std::string, int>, SlotFigures>> HeldSlotFigures();
  // usage_segment_ and usage_leases_ mapped, kept between rounds (the segment refreshed when the
  // registry changed): what HeldSlotFigures and MeterLocalSlots read. Needs a node directory.
  Status MapUsageFiles();
  // slot_index_ as of the registry file now (read again only when it changed); false when the
  // registry cannot be read (`why` says why).
  bool RefreshSlotIndex(std::string* why);
  Status SendUsage();
  Status SaveWorkload(const HeldWorkload& w) const;
  Status SaveOutbox() const;
  Status SaveUsageCursors() const;  // usage_cursors.json (see above)
  Status LoadUsageCursors();        // ... into held_ where it is ahead of w<id>.json
  void EnsureArbiter(int gpu);
  uint64_t ShimInode() const;  // shim_inode_'s value (agent.cc)
  Status EnsureMps(int gpu);  // agent_mps.cc
  Status ReconcileMig(const std::vector<api::DesiredGpu>& desired);  // agent_mig.cc
  Status MigInstanceReady(const api::DesiredWorkload& d) const;
  void ReconcileMps();
  void AdoptMps();
  void Violated(HeldWorkload& w, const std::string& detail, const std::vector<uint32_t>& pids);
  void CheckCountersFiles();  // agent_backstop.cc, step 5
  // What one NVML pass saw for the usage samples (Backstop fills it, AddNvmlWindows reads it).
  struct NvmlPass {
    std::set<int> util_read;   // GPUs whose per-process utilisation was read
    std::set<int> sampled;     // ... with a new sample of some process
    std::set<int> procs_read;  // GPUs whose compute processes were listed
    std::map<std::pair<int64_t, int>, int64_t> sm_milli;    // (workload, GPU): its processes' SM milli
    std::map<std::pair<int64_t, int>, int64_t> memory_mib;  // (workload, GPU): their device memory
    std::set<std::pair<int64_t, int>> memory_untold;        // (workload, GPU): a process NVML gave no memory for
  };
  // One pass into nvml_windows_ (agent_backstop.cc); returns the ms the pass stands for.
  int64_t AddNvmlWindows(int64_t now_ms, const NvmlPass& pass);
  // "NVML's view charged to the arbiter" (agent_observed.cc): the pass's SM time of each time-sliced
  // workload against the growth of its board charge; what UnderChargedNs finds goes to its slot's
  // observed_extra_ns.
  void ChargeObservedTime(const NvmlPass& pass, int64_t elapsed_ms);
  void KillProcess(uint32_t pid);
  std::string AgentDir() const;
  void Log(std::string line);

  AgentOptions options_;
  Inventory inventory_;
  ControlPlaneLink* link_;
  NodeDir node_;
  bool registered_ = false;
  std::string agent_id_;  // sent with the inventory; see LoadAgentId
  std::map<int64_t, HeldWorkload> held_;
  std::set<int64_t> done_;  // ended here and acknowledged (never started again)
  // The end of the last usage sample of workloads that left this node (in memory): a workload
  // placed here again within the same second starts its usage there, never overlapping.
  std::map<int64_t, int64_t> released_usage_end_s_;
  std::vector<api::FinishedWorkload> finished_;  // reported until acknowledged
  std::vector<api::AgentEvent> events_;          // reported until acknowledged (in memory)
  // The desired state last fetched, its version (api::DesiredVersion of the body; "": none
  // held), when; and the version the last heartbeat's answer named ("": it named none).
  api::DesiredState desired_;
  std::string desired_version_;
  int64_t desired_fetched_ms_ = 0;
  std::string heard_version_;
  int64_t next_backstop_ms_ = 0;
  // The "nvml" condition of the last backstop pass, sent with every heartbeat (none without NVML).
  std::optional<api::NodeCondition> nvml_condition_;
  // The "mig_layout" condition of the last reconciliation (none while no MIG layout is desired).
  std::optional<api::NodeCondition> mig_condition_;
  // NVML's view of each held workload on each of its GPUs since its last usage sample (see "NVML's
  // view for the usage samples"): filled by Backstop, read and cleared by SampleUsage. In memory:
  // a restarted agent's first window covers less of the span (it is averaged over what it covers).
  struct NvmlWindow {
    int64_t busy_milli_ms = 0;  // sum over passes of (SM milli of its processes) x (ms since the last pass)
    int64_t covered_ms = 0;     // sum over passes of the ms since the last pass
    bool sampled = false;       // some process of the GPU had a new sample in some pass
    bool util_unknown = false;  // a pass could not read the GPU's per-process utilisation
    int64_t peak_mib = -1;      // the most its processes held in one pass; -1: no pass yet
    bool memory_unknown = false;  // a pass could not list the GPU's processes or their memory
  };
  std::map<std::pair<int64_t, int>, NvmlWindow> nvml_windows_;  // (workload, GPU)
  std::map<int, uint64_t> util_last_seen_us_;  // per GPU: the newest utilisation sample seen
  int64_t last_backstop_ms_ = 0;               // the previous NVML pass; 0: none yet
  // ChargeObservedTime's view of each time-sliced workload on each GPU at the previous pass: its
  // board charge and observed_extra_ns then, and whether an episode of extra charges is running
  // (its event was sent). In memory: a restarted agent starts from the board as it finds it.
  struct ObservedWatch {
    uint64_t charged_ns = 0;
    uint64_t extra_ns = 0;
    bool episode = false;
    int quiet_passes = 0;  // passes without an add since the last one
    UnderChargeTracker tracker;  // lease_arbiter.h: the 5 s lag and the decayed comparison
  };
  std::map<std::pair<int64_t, int>, ObservedWatch> observed_watch_;  // (workload, GPU)
  std::optional<enforce::LeaseFile> observed_leases_;  // the lease file, read-write (node lines)
  int64_t recharge_events_refused_until_ms_ = 0;  // an older control plane refused the event kind
  std::set<int64_t> over_limit_;     // workloads reported over their limit (report mode)
  std::set<uint32_t> unknown_seen_;  // processes of no workload already reported
  // Compute processes of time-sliced workloads whose /proc/<pid>/maps could not be read (logged
  // once; dropped when NVML stops listing the pid), and the inode of the shim the supervisors load
  // (ResolveShim of the agent's TESSERA_SHIM_PATH at the start; 0: unknown, the name alone counts).
  std::set<uint32_t> shim_unjudged_;
  uint64_t shim_inode_ = 0;
  // CheckCountersFiles' slot -> index map, read again only when the registry file changed
  // (node::StampOf).
  std::optional<FileStamp> slots_stamp_;
  std::map<std::string, int> slot_index_;
  // LocalSlots' registry entries, read again only when the file changed (liveness is judged each
  // round); the list the control plane last acknowledged (empty after a registration: it holds
  // none then) and when; until when the list is not sent (a control plane that refused it).
  std::optional<FileStamp> local_stamp_;
  std::vector<TenantEntry> local_entries_;
  std::optional<std::vector<api::LocalSlot>> local_acked_;
  int64_t local_acked_ms_ = 0;
  int64_t local_refused_until_ms_ = 0;
  std::optional<UsageMeter> local_meter_;  // MeterLocalSlots' (created at the first local slot)
  // HeldSlotFigures' and MeterLocalSlots' mappings: the segment (opened on demand: the tenants' files they read; files
  // replaced since are mapped again when the registry changed) and the lease boards' node lines.
  std::optional<enforce::NodeSegment> usage_segment_;
  std::optional<enforce::LeaseFile> usage_leases_;
  std::optional<FileStamp> usage_stamp_;  // the registry as of usage_segment_'s last refresh
  std::vector<std::string> outbox_;                // usage samples as JSON objects
  int64_t next_usage_ms_ = 0;
  AgentStats stats_;
  std::vector<std::string> log_;
  std::atomic<bool> stop_arbiters_{false};
  std::map<int, std::thread> arbiters_;
  MpsControl mps_;
  std::set<int> mps_gpus_;  // GPUs whose MPS daemon this agent started or found running
  std::map<std::string, long> allotted_uids_;  // tenant_uids.json: tenant -> uid from the range
};

}  // namespace tessera::node
