// The usage ledger of a simulated scenario, in the metering module's file format
// (metering/ledger_file.h), for `tessera simulate --scenario ... --ledger OUT` and the example
// ledger in data/examples/.
//
// What it holds (the demand ledger of the scenario's workload): every job's pods, each GPU of
// each pod one source, metered from the job's submission for its duration (cut at the horizon),
// one sample per source and clock hour (seq 1, 2, ...). The scenario's epoch (its second 0) is
// 2026-11-01T00:00:00Z. Model: the first of the job's allowed models among the kept nodes, else
// the model with the most GPUs. Partition: "whole" for whole-GPU pods, else "share";
// gpu_milli_s_allocated = the request x seconds; memory_mib_s = the job's GPU memory per GPU x
// seconds; the simulator does not model utilisation, kernels or transfers, so gpu_milli_s_used is
// the allocation, kernel_launches 0 and bytes_transferred unknown. CPU-only jobs are left out.
// It is the workload's ledger, not the shared run's: it does not include queueing delays and
// preemptions (the scheduler's runs are not exported yet).
//
// After the usage, the SLA observations the control plane records (docs/api.md#anomalies), from
// the shared run (ModeMetrics::guaranteed_wait_p99_by_hour): per tenant and clock hour in which
// some of its Guaranteed jobs started, one hourly "sla" line with their wait p99 in seconds, so
// the price plan's sla_credits rules apply to the ledger as to GET /v1/invoices (an invoice run
// tests the worst hour of its period):
//   {"hour":"2026-11-03T14:00:00Z","metric":"guaranteed_wait_p99_s","tenant":"app-18","type":"sla","value":8420.0}
// They depend on the cluster (--node-stride); the usage lines do not.
//
//   ledger = RenderScenarioLedger(tenants, nodes, jobs, Seconds{7 * 86400}, catalog,
//                                 shared.guaranteed_wait_p99_by_hour);
//
// Thread-safety: a pure function of its inputs.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/gpu_model.h"
#include "tessera/metering/ledger_file.h"
#include "tessera/placement/cluster_snapshot.h"
#include "tessera/sched/tenant.h"
#include "tessera/sim/multitenant.h"

namespace tessera::sim {

inline constexpr int64_t kScenarioEpoch = 1793491200;  // 2026-11-01T00:00:00Z
using metering::kSlaGuaranteedWaitP99;

std::string RenderScenarioLedger(const sched::TenantTree& tenants, const std::vector<placement::NodeSpec>& nodes,
                                 const std::vector<WorkloadJob>& jobs, sched::Seconds horizon,
                                 const GpuModelCatalog& catalog,
                                 const std::map<std::string, std::map<int64_t, double>>& guaranteed_wait_p99_by_hour = {});

}  // namespace tessera::sim
