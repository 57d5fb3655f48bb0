// The time-driven multi-tenant simulator and the dedicated-vs-shared scenario.
//
// Workload: the Alibaba openb pod list with its creation, scheduled and deletion times; a pod is
// one job (duration = deletion - scheduled, or deletion - creation for a pod the trace never
// scheduled). The list is a snapshot: most pods were still running when it was taken (no
// deletion time, or the trace's last one), so their lifetime is censored; each of them draws
// (seeded) the lifetime of a pod that did finish inside the trace. Arrivals: the trace's busy
// window (from the 1st percentile of creation times to the last one; pods created before it
// are left out) is compressed by a stated factor, by default the one that maps the window onto
// the simulated horizon (about 5.3 for the default list and a week); durations are kept, so
// the compression raises the load. Tenants come from a seeded draw whose skew is the real one
// of the Alibaba DLRM v2025 trace's applications (data/tenants/dlrm-app-skew.csv): the quota
// file's leaves, ranked by guarantee, get the applications' shares in rank order (renormalised
// over the leaves), and every submission (the pods of one request shape created in the same
// trace hour: replicas of one deployment or job) goes to one tenant. By default the draw is
// the same at every hour (each tenant sees the trace's overall arrival pattern, scaled by its
// share); with WorkloadOptions::app_arrivals it follows each application's real day-by-day
// arrivals (data/tenants/dlrm-app-arrivals.csv), so tenants burst and go quiet as real
// applications do. QoS (seeded): a `guaranteed_fraction` of the trace's LS pods are
// Guaranteed (a team's critical services), a `best_effort_fraction` of its BE pods BestEffort,
// everything else Burstable.
//
// The same jobs run twice:
//   dedicated  each tenant owns a fixed slice of the cluster sized by its guarantee (whole GPUs;
//              each GPU model is apportioned by guarantee and carved node by node; a node split
//              between tenants splits its CPU and memory in the same proportion); a fractional
//              pod takes a whole GPU; no borrowing, no preemption; a job its slice can never
//              hold is rejected.
//   shared     one pool, fractional sharing, quotas, borrowing and reclaim (sched::Scheduler).
// Job kinds (sched::JobKind, from the trace's qos: WorkloadOptions::service_qos, LS by default):
//   batch    a preempted job restarts from the beginning (or from its last checkpoint,
//            ScenarioOptions::checkpoint_interval) when it starts again: the run since then is
//            waste
//   service  an inference replica: it serves until its deletion time (first start + its
//            lifetime) whatever happens; a preempted replica is re-created when the scheduler
//            places it again (or withdrawn if its deletion time comes first) and holds its GPUs
//            for its start-up (WorkloadOptions::service_startup) before it serves: the start-up
//            is waste, what it served is not. Example: a 1-GPU replica with a 60 s start-up,
//            first started at 0 with lifetime 1000, preempted at 400, re-created at 500: it holds
//            the GPU over [0, 400) and [500, 1000), 900 GPU-seconds of allocation, 60 of them
//            waste; a batch job in its place would waste its first 400 s and end at 1500.
//
// Event loop on a virtual clock: at each instant, completions, then arrivals, then one
// scheduling cycle. Metrics (time-weighted over [0, horizon]):
//   gpu_allocation_pct   GPU milli the running jobs asked for / capacity (the FGD paper's GPU
//                        allocation: a 0.25-GPU job counts 250 milli in both modes)
//   gpu_held_pct         GPU milli held by running jobs / capacity (a fractional pod in the
//                        dedicated mode holds a whole GPU and counts 1000)
//   jobs_completed, jobs_rejected, preemptions, consolidation_moves
//   wait_seconds_p50/p99 submit -> first start, overall and per QoS class; a job still waiting
//                        at the horizon counts with its wait so far, and so does a job the mode
//                        rejected (it can never run there: in the dedicated mode, one its
//                        tenant's slice cannot hold); wait_by_qos_admitted leaves those out
//   jain_fairness        Jain's index of weighted dominant shares (GPU share / over-quota weight)
//                        among tenants with runnable waiting work that claims a share (a
//                        pending Guaranteed or Burstable job not held back by its own tenant's
//                        limit or Guaranteed cap; BestEffort work runs on leftovers only),
//                        time-averaged over the time with at least two such tenants;
//                        jain_fairness_top_level is the same among the top-level tenants (an
//                        organisation waits if one of its teams does);
//                        jain_fairness_with_best_effort also counts tenants waiting with
//                        BestEffort work only
//   guarantee_violations tenant-seconds during which a tenant was below its guarantee (counting
//                        its Guaranteed and Burstable work) with a waiting job that fits in the
//                        unused part (sched::Scheduler::BelowGuaranteeWithWaiting)
//
// Thread-safety: pure functions of their inputs (seeded).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/gpu_model.h"
#include "tessera/core/status.h"
#include "tessera/placement/cluster_snapshot.h"
#include "tessera/sched/job.h"
#include "tessera/sched/scheduler.h"
#include "tessera/sched/tenant.h"
#include "tessera/sim/trace.h"

namespace tessera::sim {

// A trace pod with its times (seconds from the trace start; -1 = empty) and QoS label.
struct TimedPod {
  PodRecord pod;
  int64_t creation = 0;
  int64_t scheduled = -1;
  int64_t deletion = -1;
  std::string qos;
};

// Reads an openb pod list that has creation_time/scheduled_time/deletion_time/qos columns.
StatusOr<std::vector<TimedPod>> ReadTimedPods(const std::string& path, const GpuModelCatalog& catalog);
// data/tenants/dlrm-app-skew.csv: application shares, largest first.
StatusOr<std::vector<double>> ReadAppSkew(const std::string& path);
// data/tenants/dlrm-app-arrivals.csv (columns rank, day, gpus_created; others ignored): the
// GPUs each application created on each trace day, indexed [rank - 1][day]. Every rank 1..R on
// every day 0..D-1 exactly once; errors name path:line:column and the field.
StatusOr<std::vector<std::vector<double>>> ParseAppArrivals(std::string_view text, std::string_view path);
StatusOr<std::vector<std::vector<double>>> ReadAppArrivals(const std::string& path);

struct WorkloadJob {
  sched::Job job;
  sched::Seconds duration{0};
};

struct WorkloadOptions {
  double time_compression = 0;      // arrival times are divided by this; 0: fit the busy window
  sched::Seconds horizon{7 * 86400};
  sched::Seconds submission_window{3600};  // pods of one shape created in one window: one tenant
  double guaranteed_fraction = 0.25;   // of the trace's LS pods
  double best_effort_fraction = 0.25;  // of the trace's BE pods
  uint64_t seed = 42;
  // The trace's qos labels whose pods are services (sched::JobKind::kService: a preempted
  // replica is re-created and loses its start-up, not what it served); the others are batch.
  std::vector<std::string> service_qos = {"LS"};
  sched::Seconds service_startup{60};  // of a re-created service replica (sched::Job::startup)
  // Per-application daily arrivals (ReadAppArrivals), or null. When set, the tenant of a
  // submission made at relative position x of the busy window is drawn with weight
  // share_i * a_i(d) / mean(a_i), d = the trace day at position x of the DLRM trace: each leaf
  // follows the bursts and lulls of its application, with the same skew on average.
  const std::vector<std::vector<double>>* app_arrivals = nullptr;
};

// Jobs sorted by submit time, ids 1..n; only jobs arriving before the horizon.
StatusOr<std::vector<WorkloadJob>> BuildTenantWorkload(const std::vector<TimedPod>& pods,
                                                       const sched::TenantTree& tenants,
                                                       const std::vector<double>& app_skew,
                                                       const WorkloadOptions& options);

// How one leaf tenant fared while it waited with Guaranteed/Burstable work (the tenants that
// jain_fairness counts).
struct TenantFairness {
  std::string tenant;
  double hours_waiting = 0;
  // Its weighted share / the mean weighted share of the waiting tenants, averaged over the time
  // it waited: 1 = served like the others, 0.5 = half as much (0 if it never waited).
  double relative_share_while_waiting = 0;
  double jain_loss_pct = 0;  // its part of the Jain loss (see ModeMetrics)
};

struct ModeMetrics {
  double gpu_allocation_pct = 0;
  // The part of gpu_allocation_pct that did no lasting work because of a preemption (or a move
  // that restarts a whole-GPU pod): a batch job's run since its last checkpoint (it starts over
  // from there), a re-created service replica's start-up (it holds its GPUs, serves nothing).
  double gpu_allocation_wasted_pct = 0;
  double gpu_allocation_useful_pct = 0;  // gpu_allocation_pct - gpu_allocation_wasted_pct
  double gpu_held_pct = 0;
  double cpu_allocation_pct = 0;    // CPU held by running jobs / capacity
  int64_t jobs_submitted = 0;
  int64_t jobs_completed = 0;
  int64_t jobs_rejected = 0;
  int64_t preemptions = 0;
  // Preemptions and wasted allocation (in points of gpu_allocation_pct) by cause: "reclaim" (a
  // job within its tenant's guarantee took back borrowed GPUs), "fair_share" (a borrowing job
  // of a less-served tenant took them: sched::PreemptEvent::fair_share), "restart_move" (a
  // whole-GPU pod moved with a restart to make room). Every cause is present, zeros included.
  std::map<std::string, int64_t> preemptions_by_cause;
  std::map<std::string, double> gpu_allocation_wasted_pct_by_cause;
  // The same by the victim's kind (sched::JobKindName: "batch", "service"), zeros included.
  std::map<std::string, int64_t> preemptions_by_kind;
  std::map<std::string, double> gpu_allocation_wasted_pct_by_kind;
  int64_t consolidation_moves = 0;
  double wait_seconds_p50 = 0, wait_seconds_p99 = 0;
  std::map<std::string, std::pair<double, double>> wait_by_qos;  // class -> (p50, p99)
  // The same without the jobs the mode rejected (they count as waiting until the horizon above).
  std::map<std::string, std::pair<double, double>> wait_by_qos_admitted;
  double jain_fairness = 1.0;
  double jain_fairness_top_level = 1.0;  // the same among organisations (roots of the tree)
  double jain_fairness_with_best_effort = 1.0;  // leaf tenants waiting with BestEffort only too
  double guarantee_violations = 0;  // tenant-seconds
  // Where jain_fairness loses: at each instant the loss (1 - J) x duration is split among the
  // waiting tenants below the mean share, in proportion to how far below they are. By tenant
  // (fairness_by_tenant) and by the GPUs of the smallest job the tenant had waiting ("0-0.9
  // GPUs", "1-1.9 GPUs", "2-3.9 GPUs", "4-7.9 GPUs", "8+ GPUs"), in % of the whole loss.
  // Example: waiting shares 1.0, 1.0 and 0.25 (mean 0.75): J = 0.82; the third tenant, whose
  // smallest waiting job asks 8 GPUs, takes all 0.18 of the loss: "8+ GPUs" = 100 %.
  std::map<std::string, double> jain_loss_by_smallest_waiting_job;
  std::vector<TenantFairness> fairness_by_tenant;  // leaf tenants, in tree order
  // Pending jobs by wait reason (sched::WaitReasonName), averaged over hourly samples.
  std::map<std::string, double> mean_pending_by_reason;
  double wall_seconds = 0;          // time the simulation took
  int64_t cycles = 0;
  // For plots: allocation per hour, and mean wait per tenant.
  std::vector<double> allocation_by_hour;
  std::vector<std::pair<std::string, double>> mean_wait_by_tenant;
  // The control plane's SLA observation (guaranteed_wait_p99_s, docs/api.md#anomalies): per leaf
  // tenant and clock hour (seconds from the start, a multiple of 3600) in which some of its
  // Guaranteed jobs first started, the nearest-rank p99 of their waits (submission to first
  // start) in seconds. Example: jobs of tenant a submitted at 0 and 100, started at 3000 and
  // 4000: {"a": {0: 3000, 3600: 3900}}. Not in the JSON; the ledger's "sla" lines take the month's
  // worst hour (sim/ledger_export.h).
  std::map<std::string, std::map<int64_t, double>> guaranteed_wait_p99_by_hour;
};

struct ScenarioOptions {
  sched::SchedulerOptions scheduler;   // policy, min runtime, affinity ... (shared mode)
  sched::Seconds horizon{7 * 86400};
  // A stopped job (preempted, or a whole-GPU pod moved by defragmentation) resumes from its
  // last checkpoint, taken every this many seconds of its run; 0: it starts over.
  sched::Seconds checkpoint_interval{0};
  // > 0: the control plane restarts at the first instant at or after this time: before that
  // instant's events, every scheduler is replaced by a fresh one (same tenants, nodes and
  // options) rebuilt from what a control plane persists: its running jobs (Scheduler::Adopt,
  // with their placements, start times and seq) and its pending queue with the last wait
  // reasons (SubmitRestored). Results are identical to a run without the restart (tested):
  // what makes a restart of `tessera serve` safe.
  sched::Seconds restart_at{0};
};

// Runs `jobs` on `nodes` in the shared mode.
StatusOr<ModeMetrics> RunShared(const sched::TenantTree& tenants,
                                const std::vector<placement::NodeSpec>& nodes,
                                const std::vector<WorkloadJob>& jobs, const ScenarioOptions& options);
// Runs `jobs` with each tenant on its own slice.
StatusOr<ModeMetrics> RunDedicated(const sched::TenantTree& tenants,
                                   const std::vector<placement::NodeSpec>& nodes,
                                   const std::vector<WorkloadJob>& jobs,
                                   const ScenarioOptions& options);
// An upper bound on the time-averaged useful GPU allocation (%, allocation minus waste) that
// any scheduler reaches on `jobs` with `capacity_milli` GPU milli over [0, horizon]: a job does
// useful work for at most its duration (a batch job's repeated runs and a service replica's
// start-ups are waste; a service serves at most its lifetime) and never before its
// submission, so for every instant t1 the useful allocation integral over [0, t1] is at most min(capacity * t1, sum over jobs of request * min(duration,
// t1 - submit)), and over [t1, horizon] at most capacity * (horizon - t1). The bound is the
// least of these over hourly t1. Node packing is ignored (a pool of GPU milli).
// Example: capacity 2 GPUs, horizon 2 h, one 1-GPU job submitted at 0 for 1 h: at t1 = 1 h the
// first hour holds at most 1 GPU-hour and the second 2: bound (1 + 2) / 4 = 75 %; t1 = 2 h:
// min(4, 1) = 1 GPU-hour: 25 % (the bound).
double AllocationUpperBoundPct(const std::vector<WorkloadJob>& jobs, int64_t capacity_milli,
                               sched::Seconds horizon);

// The slices of RunDedicated: for each leaf tenant its nodes (whole GPUs by guarantee).
StatusOr<std::vector<std::vector<placement::NodeSpec>>> CarveDedicatedSlices(
    const sched::TenantTree& tenants, const std::vector<placement::NodeSpec>& nodes);

}  // namespace tessera::sim
