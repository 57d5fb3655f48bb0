// DraBackstop: the NVML backstop for the claims of the DRA driver (`tessera k8s dra-driver
// --backstop-period`), the same check as the agent's (tessera/node/agent.h, step 5) for work the
// agent did not start. The shim in a container enforces its claim's limit only while it is loaded
// and its counters file is intact; a container that starts a process without LD_PRELOAD, loads a
// second copy of the driver, or truncates its counters file is caught here, from outside:
//
// Each pass reads every GPU's compute processes and their memory from NVML and finds each
// process's pod from its cgroup (<proc dir>/<pid>/cgroup: the kubelet puts a container in a cgroup
// whose path names its pod's uid, "/kubepods.slice/kubepods-burstable.slice/
// kubepods-burstable-pod<uid, '-' as '_'>.slice/cri-containerd-<id>.scope" under the systemd
// driver, "/kubepods/burstable/pod<uid>/<container id>" under cgroupfs; PodUidOfCgroup), and the
// process's claim from the pods each claim is reserved for (ResourceClaim status.reservedFor).
// Then:
//   * per claim and GPU of its own, its processes' memory beyond a context allowance each (the
//     CUDA context the driver charges every process, which the shim does not count) over the
//     claim's limit, or a process of the claim on a GPU that is not the claim's: violated;
//   * the claim's counters file broken (enforce::CheckCountersFile: truncated, grown, header
//     overwritten): violated, as its memory is no longer accounted (fail closed);
//   * a process of a pod that holds no claim, on a GPU where a shared claim is prepared (a process
//     no shim fences, next to tenants with limits): killed. The claims are read again first
//     (`refresh`: a pod that started to use an already-prepared claim is not announced to the
//     driver by the kubelet), and such a process is judged only after a read that succeeded;
//     a failed read is reported and the process judged at the next pass.
//   * Processes of no pod (the host's, the agent's workloads: the agent's own backstop judges
//     those) and of the driver's own pod are left alone, as is an MPS server.
// A violated claim's GPU processes are SIGKILLed (kill mode, the default; the kubelet restarts the
// container by its restartPolicy); report mode only reports. A claim is reported once per episode
// (until it is within bounds again); in kill mode it is killed at every pass it is over.
//
// Worked example: claim team-a/infer (limit 1 GiB on GPU 0, shared, pod c4...) and team-b/train
// (the whole GPU 1, pod d5...); allowance 500 MiB. NVML: GPU 0 pids 4242 (1,300 MiB) and 4343
// (2,100 MiB), GPU 1 pid 5151 (30,000 MiB), GPU 0 pid 6060 (800 MiB). Cgroups: 4242 and 4343 in
// pod c4..., 5151 in pod d5..., 6060 in pod e6... (no claim, none after the refresh either).
// Pass: infer is charged (1300-500) + (2100-500) = 2,400 MiB > 1,024 MiB: violated, 4242 and 4343
// killed; train has no limit; 6060 is on shared GPU 0 with no claim: killed.
//
// The device plugin's slots (`tessera k8s device-plugin --backstop-ms`; SharePlugin::BackstopUses)
// get the same check. The device plugin API names no pod, so a slot has no pods; a process's slot
// is found from its mounts instead (options.slot_mount, <proc dir>/<pid>/mountinfo): the kubelet
// bind-mounts each slot's tenant file read-only at "<container dir>/node/tenant", a container
// cannot change its own mounts, and the mount's root field is the host file's path within its
// filesystem, whose last component is the slot's file name (ClaimUse::slot_file; SlotFileOfMountinfo).
// A process with no such mount, or one naming no slot of the plugin, falls to the pod rule above
// (a process of a pod with no slot on a GPU where a share is handed out: killed; of no pod, or of
// the plugin's own pod: left alone). Worked example: slot k8s-dp/U::0 (file U__0, 4 GiB on GPU 0,
// shared); pid 7070's mountinfo has "... /tessera/device-plugin/tenants/U__0 /run/tessera/node/tenant
// ro ..." and NVML says it holds 5,000 MiB on GPU 0: charged 4,500 MiB > 4,096 MiB: violated, killed.
//
// Thread-safety: one pass at a time (Check is not reentrant); the claims and refresh callbacks are
// called on the caller's thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "tessera/core/status.h"
#include "tessera/enforce/nvml.h"
#include "tessera/integrations/k8s/proc_text.h"  // PodUidOfCgroup, SlotFileOfMountinfo

namespace tessera::k8s {

// What the backstop needs of one prepared claim (one tenant of the node: DraDriver::ClaimUses).
struct ClaimUse {
  std::string claim;                  // "<namespace>/<name>"
  std::string uid;                    // the claim's metadata.uid
  std::vector<std::string> pod_uids;  // status.reservedFor's pods
  std::vector<int> gpus;              // the claim's GPUs (node indices)
  std::optional<uint64_t> mem_bytes;  // its memory limit on each GPU; none for a whole GPU
  bool shared = false;                // a share of a GPU (consumedCapacity), not a whole one
  int index = -1;                     // its counters file, counters/<index>; -1: none
  std::string slot_file;              // device plugin: its tenant file's name (matched by slot_mount)
};

struct DraBackstopOptions {
  std::string proc_dir = "/proc";
  std::string counters_dir;             // the node directory's counters folder; "" = not checked
  int64_t context_allowance_mib = 500;  // per process, not counted against the limit
  bool kill = true;                     // false: --enforce report
  long own_pid = 0;                     // whose pod is the driver's own; 0 = this process
  // Device plugin: where a container sees its slot's tenant file (TenantMountPath); a process is
  // then the slot's whose file name its mount there names. "": processes are known by pod only.
  std::string slot_mount;
  std::string owner = "claim";  // what a ClaimUse is called in the findings ("slot")
};

struct BackstopFinding {
  std::string claim;  // "<namespace>/<name>"; "" for a process of a pod with no claim
  std::string detail;  // e.g. "2400 MiB on GPU 0 over its limit of 1024 MiB (pids 4242, 4343)"
  std::vector<uint32_t> pids;
  bool killed = false;
};

struct BackstopStats {
  int64_t passes = 0;
  int64_t violations = 0;       // claims found over their bounds (once per episode)
  int64_t unclaimed = 0;        // processes of pods without a claim (slot) on a shared GPU
  int64_t counters_broken = 0;  // claims whose counters file was broken
  int64_t kills = 0;            // SIGKILLs sent
  int64_t nvml_errors = 0;      // GPUs NVML could not list in a pass
  int64_t refresh_errors = 0;   // claim reads that failed
};

class DraBackstop {
 public:
  using ClaimsFn = std::function<std::vector<ClaimUse>()>;
  using RefreshFn = std::function<Status()>;

  // `nvml` must be initialised and outlive the backstop.
  DraBackstop(DraBackstopOptions options, const enforce::NvmlApi& nvml);

  struct Pass {
    std::vector<BackstopFinding> findings;
    std::vector<std::string> problems;  // what could not be checked: "GPU 1: GPU is lost", a failed read
  };

  // One pass over every GPU NVML lists (see the header comment). `claims` gives the prepared
  // claims (called again after a successful `refresh`); `refresh` (may be empty) re-reads the
  // claims' pods.
  Pass Check(const ClaimsFn& claims, const RefreshFn& refresh);

  const BackstopStats& stats() const { return stats_; }

 private:
  std::optional<std::string> PodOf(uint32_t pid) const;
  std::optional<std::string> SlotFileOf(uint32_t pid) const;
  void Kill(const std::vector<uint32_t>& pids);

  DraBackstopOptions options_;
  const enforce::NvmlApi& nvml_;
  std::optional<std::string> own_pod_;
  std::set<std::string> over_;  // claims reported in their current episode
  std::set<uint32_t> unclaimed_seen_;  // report mode: processes already reported
  BackstopStats stats_;
};

// Runs DraBackstop::Check every `period` on a thread of its own until Stop (or destruction),
// handing each pass to `report` (on that thread). `tessera k8s dra-driver` prints what it is given.
class DraBackstopLoop {
 public:
  using ReportFn = std::function<void(const DraBackstop::Pass&)>;
  DraBackstopLoop(DraBackstop& backstop, DraBackstop::ClaimsFn claims, DraBackstop::RefreshFn refresh,
                  std::chrono::milliseconds period, ReportFn report);
  ~DraBackstopLoop();
  DraBackstopLoop(const DraBackstopLoop&) = delete;
  DraBackstopLoop& operator=(const DraBackstopLoop&) = delete;
  void Stop();

 private:
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tessera::k8s
