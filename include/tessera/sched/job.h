// A job as the multi-tenant scheduler sees it: a tenant, a QoS class, a priority inside the
// tenant, and one or more identical pods (a gang: all of them start together or none does),
// each a placement::TaskRequest plus the GPU memory it needs for quota purposes.
//
//   Job j{.id = 7, .tenant = *tree.Find("vision"), .qos = QosClass::kBurstable,
//         .pods = 2, .pod = {.cpu = CpuMilli{8000}, .memory = MiB{32768}, .num_gpu = 4,
//                            .gpu_milli = kWholeGpu}};     // 2 nodes x 4 GPUs, all or nothing
//
// QoS classes, as Kubernetes names them:
//   Guaranteed  runs only within the tenant's guarantee; never preempted, never over-committed
//   Burstable   may borrow idle quota of others up to the tenant's limit; borrowed work can be
//               reclaimed (preempted and requeued) when a lender asks for its guarantee
//   BestEffort  leftovers only; first to be preempted; never counts toward a guarantee
// Kinds (what a preemption costs, for the victim choice; batch unless the caller says otherwise):
//   batch    a preempted job starts over (or from its last checkpoint): it loses what it has run
//            since then, GPU milli x seconds
//   service  a replica of a service (e.g. an inference server): a preempted replica is
//            re-created and loses only its start-up time, GPU milli x startup, however long it
//            has served. Example: a 1-GPU service replica with startup 60 s that has served for
//            a day costs 60 000 to preempt; a 1-GPU batch job that has run 5 min costs 300 000.
// Thread-safety: plain values.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "tessera/core/quantity.h"
#include "tessera/placement/task.h"
#include "tessera/sched/tenant.h"

namespace tessera::sched {

using Seconds = std::chrono::seconds;
using JobId = int64_t;

enum class QosClass : uint8_t { kGuaranteed = 0, kBurstable = 1, kBestEffort = 2 };
inline constexpr int kQosClassCount = 3;
std::string_view QosName(QosClass q);  // "Guaranteed", "Burstable", "BestEffort"
// Accepts the names above (case-insensitive) and "BE"/"LS"-free aliases: guaranteed, burstable,
// besteffort, best-effort. INVALID_ARGUMENT otherwise.
StatusOr<QosClass> ParseQos(std::string_view name);

enum class JobKind : uint8_t { kBatch = 0, kService = 1 };
std::string_view JobKindName(JobKind k);  // "batch", "service"

struct Job {
  JobId id = 0;
  TenantIndex tenant = kNoTenant;
  QosClass qos = QosClass::kBurstable;
  int32_t priority = 0;        // within the tenant: higher first
  int32_t pods = 1;            // gang size
  placement::TaskRequest pod;  // what each pod asks of one node
  MiB gpu_memory{0};           // GPU memory per pod, for quotas (0: not accounted)
  // Affinity vocabulary: a workload class ("latency", "batch", ...) and one label value for
  // the scheduler's label rule (e.g. env=dev|prod); small ids interned by the caller, -1 = none.
  int32_t workload_class = -1;
  int32_t label = -1;
  Seconds submit{0};
  JobKind kind = JobKind::kBatch;
  // A service: seconds a re-created replica holds its GPUs before it serves (what its
  // preemption costs). Ignored for batch.
  Seconds startup{0};
  // A batch job: it checkpoints every this many seconds of its run, so a preemption loses only
  // the run since its last checkpoint (0: none; it starts over). Ignored for services.
  Seconds checkpoint_interval{0};
};

}  // namespace tessera::sched
