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
//   ledger = RenderScenarioLedger(tenants, nodes, jobs, Seconds{7 * 86400}, catalog);
//
// Thread-safety: a pure function of its inputs.
#pragma once

#include <string>
#include <vector>

#include "tessera/core/gpu_model.h"
#include "tessera/placement/cluster_snapshot.h"
#include "tessera/sched/tenant.h"
#include "tessera/sim/multitenant.h"

namespace tessera::sim {

inline constexpr int64_t kScenarioEpoch = 1793491200;  // 2026-11-01T00:00:00Z

std::string RenderScenarioLedger(const sched::TenantTree& tenants, const std::vector<placement::NodeSpec>& nodes,
                                 const std::vector<WorkloadJob>& jobs, sched::Seconds horizon,
                                 const GpuModelCatalog& catalog);

}  // namespace tessera::sim
