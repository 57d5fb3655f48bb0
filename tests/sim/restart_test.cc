// The restart property: a control plane that rebuilds its scheduler from what it persisted
// (running jobs adopted with their placements, start times and seq; the pending queue with its
// last wait reasons) makes exactly the decisions the uninterrupted scheduler makes. Checked on
// the default dedicated-vs-shared scenario (the bundled trace, quotas and app skew), restarting
// at half the horizon: every metric of both modes is identical to the bit.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "tessera/config/quota_file.h"
#include "tessera/sim/multitenant.h"
#include "tessera/sim/trace.h"

namespace tessera::sim {
namespace {

std::string Num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

// Every field of ModeMetrics but the wall time, one per line (a diff names what moved).
std::vector<std::string> Dump(const ModeMetrics& m) {
  std::vector<std::string> out = {
      "gpu_allocation_pct " + Num(m.gpu_allocation_pct),
      "gpu_allocation_wasted_pct " + Num(m.gpu_allocation_wasted_pct),
      "gpu_held_pct " + Num(m.gpu_held_pct),
      "cpu_allocation_pct " + Num(m.cpu_allocation_pct),
      "jobs_submitted " + std::to_string(m.jobs_submitted),
      "jobs_completed " + std::to_string(m.jobs_completed),
      "jobs_rejected " + std::to_string(m.jobs_rejected),
      "preemptions " + std::to_string(m.preemptions),
      "consolidation_moves " + std::to_string(m.consolidation_moves),
      "wait_seconds_p50 " + Num(m.wait_seconds_p50),
      "wait_seconds_p99 " + Num(m.wait_seconds_p99),
      "jain_fairness " + Num(m.jain_fairness),
      "jain_fairness_top_level " + Num(m.jain_fairness_top_level),
      "jain_fairness_with_best_effort " + Num(m.jain_fairness_with_best_effort),
      "guarantee_violations " + Num(m.guarantee_violations),
      "cycles " + std::to_string(m.cycles),
  };
  for (const auto& [k, v] : m.preemptions_by_cause) out.push_back("preemptions_by_cause " + k + " " + std::to_string(v));
  for (const auto& [k, v] : m.gpu_allocation_wasted_pct_by_cause) out.push_back("wasted_by_cause " + k + " " + Num(v));
  for (const auto& [k, v] : m.wait_by_qos) out.push_back("wait_by_qos " + k + " " + Num(v.first) + " " + Num(v.second));
  for (const auto& [k, v] : m.wait_by_qos_admitted)
    out.push_back("wait_by_qos_admitted " + k + " " + Num(v.first) + " " + Num(v.second));
  for (const auto& [k, v] : m.jain_loss_by_smallest_waiting_job) out.push_back("jain_loss_by_job " + k + " " + Num(v));
  for (const TenantFairness& f : m.fairness_by_tenant)
    out.push_back("fairness " + f.tenant + " " + Num(f.hours_waiting) + " " + Num(f.relative_share_while_waiting) +
                  " " + Num(f.jain_loss_pct));
  for (const auto& [k, v] : m.mean_pending_by_reason) out.push_back("pending_by_reason " + k + " " + Num(v));
  for (size_t h = 0; h < m.allocation_by_hour.size(); ++h)
    out.push_back("allocation_hour " + std::to_string(h) + " " + Num(m.allocation_by_hour[h]));
  for (const auto& [k, v] : m.mean_wait_by_tenant) out.push_back("mean_wait " + k + " " + Num(v));
  return out;
}

class DefaultScenario : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string data = std::string(TESSERA_SOURCE_DIR) + "/data";
    const GpuModelCatalog& catalog = GpuModelCatalog::Builtin();
    auto quota = config::LoadQuotaFile(data + "/scenarios/quotas-default.yaml", catalog);
    ASSERT_TRUE(quota.ok()) << quota.status().ToString();
    tenants_.emplace(std::move(quota->tenants));
    auto nodes = ReadNodeList(data + "/alibaba-gpu-2023/csv/openb_node_list_gpu_node.csv", catalog);
    ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
    for (size_t i = 0; i < nodes->size(); i += 96) nodes_.push_back((*nodes)[i]);  // --node-stride 96
    auto pods = ReadTimedPods(data + "/alibaba-gpu-2023/csv/openb_pod_list_default.csv", catalog);
    ASSERT_TRUE(pods.ok()) << pods.status().ToString();
    auto skew = ReadAppSkew(data + "/tenants/dlrm-app-skew.csv");
    ASSERT_TRUE(skew.ok()) << skew.status().ToString();
    WorkloadOptions wo;  // the scenario's defaults, seed 42
    auto jobs = BuildTenantWorkload(*pods, *tenants_, *skew, wo);
    ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
    jobs_ = std::move(*jobs);
    std::vector<placement::TaskRequest> tasks;
    for (const WorkloadJob& w : jobs_) tasks.push_back(w.job.pod);
    target_ = placement::TargetWorkload::FromTasks(tasks);
    options_.horizon = wo.horizon;
    options_.scheduler.target_workload = &target_;
    options_.scheduler.seed = wo.seed;
    options_.scheduler.min_runtime = sched::Seconds{0};  // the scenario's default (--min-runtime)
  }

  std::optional<sched::TenantTree> tenants_;
  std::vector<placement::NodeSpec> nodes_;
  std::vector<WorkloadJob> jobs_;
  placement::TargetWorkload target_;
  ScenarioOptions options_;
};

TEST_F(DefaultScenario, ARestartAtHalfTheHorizonChangesNoDecision) {
  ScenarioOptions restarted = options_;
  restarted.restart_at = options_.horizon / 2;
  auto shared = RunShared(*tenants_, nodes_, jobs_, options_);
  auto shared_restarted = RunShared(*tenants_, nodes_, jobs_, restarted);
  ASSERT_TRUE(shared.ok()) << shared.status().ToString();
  ASSERT_TRUE(shared_restarted.ok()) << shared_restarted.status().ToString();
  // The second half is busy: preemptions and moves happen after the restart too.
  ASSERT_GT(shared->preemptions, 0);
  EXPECT_EQ(Dump(*shared_restarted), Dump(*shared));

  auto dedicated = RunDedicated(*tenants_, nodes_, jobs_, options_);
  auto dedicated_restarted = RunDedicated(*tenants_, nodes_, jobs_, restarted);
  ASSERT_TRUE(dedicated.ok()) << dedicated.status().ToString();
  ASSERT_TRUE(dedicated_restarted.ok()) << dedicated_restarted.status().ToString();
  EXPECT_EQ(Dump(*dedicated_restarted), Dump(*dedicated));
}

}  // namespace
}  // namespace tessera::sim
