#include "tools/tessera/commands/scenario.h"

#include <climits>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <sstream>

#include "tessera/core/gpu_model.h"
#include "tessera/sim/metering_report.h"
#include "tools/tessera/commands/commands.h"
#include "tools/tessera/commands/common.h"

namespace tessera::cli {

void AddScenarioFlags(CLI::App* cmd, ScenarioFlags* f) {
  cmd->add_option("--scenario", f->name,
                  "Run a multi-tenant scenario instead of the placement replay: dedicated-vs-shared "
                  "(the same trace workload on per-tenant dedicated slices, then on one shared pool "
                  "with quotas, borrowing and reclaim)");
  cmd->add_option("--quotas", f->quotas, "Scenario: quota YAML (default: data/scenarios/quotas-default.yaml)");
  cmd->add_option("--node-stride", f->spec.node_stride, "Scenario: keep every k-th node of the bundled node list (default 96: 13 nodes, 58 GPUs; the default quota file is sized for it)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--compression", f->spec.compression, "Scenario: divide the trace's arrival times by this (default 0: fit the trace's busy window into --days)")
      ->check(CLI::Range(0.0, 1e6));
  cmd->add_option("--days", f->spec.days, "Scenario: simulated horizon in days (default 7)")->check(CLI::Range(0.001, 366.0));
  cmd->add_option("--submission-window", f->spec.submission_window, "Scenario: pods of one request shape created within this many trace seconds form one submission of one tenant (default 3600)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  cmd->add_option("--tenant-arrivals", f->spec.tenant_arrivals,
                  "Scenario: how a submission's tenant is drawn: skew (by the DLRM applications' "
                  "shares, the same at every hour) or app-profile (those shares modulated day by "
                  "day by each application's real arrivals, data/tenants/dlrm-app-arrivals.csv: "
                  "tenants burst and go quiet as the real applications did)")
      ->check(CLI::IsMember({"skew", "app-profile"}));
  cmd->add_option("--guaranteed-fraction", f->spec.guaranteed_fraction, "Scenario: share of the trace's LS pods that are Guaranteed (default 0.25)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--best-effort-fraction", f->spec.best_effort_fraction, "Scenario: share of the trace's BE pods that are BestEffort (default 0.25)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--min-runtime", f->spec.min_runtime, "Scenario: seconds a job runs before it may be preempted (default 0)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  cmd->add_option("--half-life", f->spec.half_life, "Scenario: fair share on usage decayed with this half-life in seconds (default 0: current usage)")
      ->check(CLI::Range(0.0, 1e9));
  cmd->add_option("--checkpoint-interval", f->spec.checkpoint_interval,
                  "Scenario: a preempted batch job resumes from its last checkpoint, taken every this "
                  "many seconds of its run (default 0: it starts over, as the trace says nothing of "
                  "checkpoints)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  cmd->add_option("--service-qos", f->spec.service_qos,
                  "Scenario: comma-separated trace qos labels whose pods are services (a preempted "
                  "replica is re-created and loses its start-up, not what it served); the others "
                  "are batch (default LS; \"\": every pod is batch)");
  cmd->add_option("--service-startup", f->spec.service_startup,
                  "Scenario: seconds a re-created service replica holds its GPUs before it serves "
                  "(default 60)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  cmd->add_option("--fair-share-max-victim-run", f->spec.fair_share_max_victim_run,
                  "Scenario: fair-share preemption takes only Burstable batch work that has run at "
                  "most this many seconds (service replicas lose only their start-up and are always "
                  "taken; default 7200; 0: any; reclaim for guarantees is not limited)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  cmd->add_option("--fair-share-rule", f->spec.fair_share_rule,
                  "Scenario: when fair-share preemption may take another tenant's borrowed work: "
                  "lexicographic (default: the victim's tenant stays more served than the "
                  "preemptor's is now; lets large jobs of under-served tenants start) or equalize "
                  "(the victim's tenant stays at least as served as the preemptor's once its job "
                  "runs; fewer preemptions, less fair to tenants with large jobs)")
      ->check(CLI::IsMember({"equalize", "lexicographic"}));
  cmd->add_flag("--fair-share-defrag,!--no-fair-share-defrag", f->spec.fair_share_defrag,
                "Scenario: also clear a node for a borrowing job that fits nowhere, by the fair-share "
                "rules (SchedulerOptions::fair_share_defragmentation; on by default, "
                "--no-fair-share-defrag turns it off)");
  cmd->add_flag("--no-clearable-nodes", f->spec.no_clearable_nodes,
                "Scenario: place immovable work (gangs, whole-GPU Guaranteed pods) like any other "
                "instead of keeping the largest nodes clearable (for comparison)");
  cmd->add_option("--seed", f->spec.seed, "Scenario: seed of the tenant and QoS draw (default 42)")
      ->check(CLI::Range(uint64_t{0}, uint64_t{INT64_MAX}));
  cmd->add_option("--placement", f->spec.placement, "Scenario: placement policy (default tessera)");
  cmd->add_option("--price-plan", f->price_plan,
                  "Scenario: price plan (YAML) the HTML report's invoice section bills the ledger with "
                  "(default: data/examples/price-plan.yaml)");
  cmd->add_option("--ledger", f->ledger, "Scenario: write the workload's usage ledger (JSON lines, docs/metering.md) to this file ('-': stdout)");
}

int RunScenario(const ScenarioFlags& f, const ScenarioShared& shared) {
  if (f.name != "dedicated-vs-shared") {
    return Fail("simulate", "unknown --scenario '" + f.name + "' (known: dedicated-vs-shared)", kExitBadInput);
  }
  if (shared.pods.size() > 1) return Fail("simulate", "--pods: --scenario takes one pod list", kExitBadInput);
  const std::string data = DataDir();
  const std::string plan_path = f.price_plan.empty() ? data + "/examples/price-plan.yaml" : f.price_plan;
  sim::DedicatedVsSharedSpec spec = f.spec;
  spec.quotas_path = f.quotas.empty() ? data + "/scenarios/quotas-default.yaml" : f.quotas;
  spec.nodes_path = shared.nodes.empty() ? data + "/alibaba-gpu-2023/csv/openb_node_list_gpu_node.csv" : shared.nodes;
  spec.pods_path = shared.pods.empty() ? data + "/alibaba-gpu-2023/csv/openb_pod_list_default.csv" : shared.pods[0];
  spec.app_skew_path = data + "/tenants/dlrm-app-skew.csv";
  spec.app_arrivals_path = data + "/tenants/dlrm-app-arrivals.csv";
  spec.ledger = !f.ledger.empty() || !shared.html_out.empty();  // the report bills the ledger
  std::string plan_text;
  if (!shared.html_out.empty()) {
    std::ifstream in(plan_path, std::ios::binary);
    if (!in) return Fail("simulate", "--price-plan: cannot read '" + plan_path + "'", kExitBadInput);
    std::ostringstream text;
    text << in.rdbuf();
    plan_text = text.str();
  }
  auto r = sim::RunDedicatedVsShared(spec, GpuModelCatalog::Builtin(), shared.quiet ? nullptr : &std::cerr);
  if (!r.ok()) return Fail("simulate", r.status(), kExitBadInput);
  if (shared.json_out != "-") std::cout << sim::RenderDedicatedVsSharedTable(*r) << std::flush;
  if (!shared.json_out.empty()) {
    if (Status s = WriteOutput(shared.json_out, sim::RenderDedicatedVsSharedJson(*r)); !s.ok()) {
      return Fail("simulate", s, kExitFailure);
    }
  }
  if (!shared.html_out.empty()) {
    auto sections = sim::RenderMeteringSections(r->ledger, plan_text, plan_path, GpuModelCatalog::Builtin());
    if (!sections.ok()) return Fail("simulate", sections.status(), kExitBadInput);
    if (Status s = WriteOutput(shared.html_out, sim::RenderDedicatedVsSharedHtml(*r, sections->html, sections->charts));
        !s.ok()) {
      return Fail("simulate", s, kExitFailure);
    }
  }
  if (!f.ledger.empty()) {
    if (Status s = WriteOutput(f.ledger, r->ledger); !s.ok()) return Fail("simulate", s, kExitFailure);
  }
  if (shared.check && !r->checks.Passed()) return kExitFailure;
  return kExitOk;
}

}  // namespace tessera::cli
