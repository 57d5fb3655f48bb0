// The restart property: a control plane that rebuilds its scheduler from what it persisted
// (running jobs adopted with their placements, start times and seq; the pending queue with its
// last wait reasons) makes exactly the decisions the uninterrupted scheduler makes. Checked on
// the default dedicated-vs-shared scenario (the bundled trace, quotas and app skew, seed 42),
// restarting at half the horizon: the scenario's JSON is identical, wall times aside.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "tessera/sim/dedicated_vs_shared.h"

namespace tessera::sim {
namespace {

DedicatedVsSharedSpec DefaultSpec() {
  const std::string data = std::string(TESSERA_SOURCE_DIR) + "/data";
  DedicatedVsSharedSpec spec;  // the defaults of `tessera simulate --scenario dedicated-vs-shared`
  spec.quotas_path = data + "/scenarios/quotas-default.yaml";
  spec.nodes_path = data + "/alibaba-gpu-2023/csv/openb_node_list_gpu_node.csv";
  spec.pods_path = data + "/alibaba-gpu-2023/csv/openb_pod_list_default.csv";
  spec.app_skew_path = data + "/tenants/dlrm-app-skew.csv";
  spec.app_arrivals_path = data + "/tenants/dlrm-app-arrivals.csv";
  return spec;
}

// The scenario's JSON with the wall times zeroed.
std::string Json(const DedicatedVsSharedSpec& spec, int64_t* preemptions) {
  auto r = RunDedicatedVsShared(spec, GpuModelCatalog::Builtin(), nullptr);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return "";
  r->dedicated.wall_seconds = 0;
  r->shared.wall_seconds = 0;
  *preemptions = r->shared.preemptions;
  return RenderDedicatedVsSharedJson(*r);
}

// Runs `spec` without and with a restart at half the horizon; the JSON must be identical, and the
// run busy (preemptions and moves on both sides of the restart).
void ExpectRestartChangesNothing(DedicatedVsSharedSpec spec) {
  int64_t preemptions = 0, preemptions_restarted = 0;
  const std::string plain = Json(spec, &preemptions);
  spec.restart_at = static_cast<int64_t>(spec.days * 86400 / 2);
  const std::string restarted = Json(spec, &preemptions_restarted);
  ASSERT_GT(preemptions, 0);
  ASSERT_FALSE(plain.empty());
  EXPECT_EQ(restarted, plain);
}

TEST(DefaultScenario, ARestartAtHalfTheHorizonChangesNoDecision) { ExpectRestartChangesNothing(DefaultSpec()); }

// With fair share on decayed usage the scheduler remembers past usage: the restart hands it
// over (Scheduler::RestoreFairShareMemory), so the decisions stay the same there too.
TEST(DefaultScenario, ARestartKeepsDecayedFairShareUsage) {
  DedicatedVsSharedSpec spec = DefaultSpec();
  spec.half_life = 6 * 3600;
  ExpectRestartChangesNothing(spec);
}

}  // namespace
}  // namespace tessera::sim
