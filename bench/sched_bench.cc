// Benchmarks of the multi-tenant scheduler (issue: multi-tenancy).
//
//   BM_SchedulingCycle     one Scheduler::Cycle with 10 000 pending jobs, 500 tenants (25
//                          organisations x 20 teams) and 2 000 GPUs (250 nodes x 8) that are
//                          almost full: before each cycle (untimed) 20 running jobs finish and
//                          the queue is topped up to 10 000, so every cycle scans the whole
//                          queue, places what fits and tries reclaim for entitled jobs.
//   BM_LiveSchedulingCycle the same cycle through sched::LiveScheduler (names instead of
//                          indices, changed wait reasons reported as values).
//   BM_LiveRebuild         what a world change costs LiveScheduler in that world (10 000
//                          pending, ~6 000 running): a fresh core adopting every running job and
//                          resubmitting every pending one (SetTenants with the same tree, then a
//                          read that applies it).
//   BM_OneWeekScenario     the default `tessera simulate --scenario dedicated-vs-shared`: a
//                          simulated week of the Alibaba trace, both modes, on one core.
//
// Targets: a cycle <= 20 ms (also through LiveScheduler); the one-week scenario <= 30 s.
#include <benchmark/benchmark.h>

#include <deque>

#include "tessera/core/gpu_model.h"
#include "tessera/core/rng.h"
#include "tessera/config/quota_file.h"
#include "tessera/sched/live_scheduler.h"
#include "tessera/sched/scheduler.h"
#include "tessera/sim/multitenant.h"
#include "tessera/sim/trace.h"

namespace tessera {
namespace {

using sched::Job;
using sched::QosClass;

// 250 nodes of 8 A100-80GB GPUs: the benchmarks' 2,000 GPUs.
std::vector<placement::NodeSpec> BenchNodes() {
  std::vector<placement::NodeSpec> nodes;
  const GpuModelId a100 = *GpuModelCatalog::Builtin().Find("A100-80GB");
  for (int n = 0; n < 250; ++n)
    nodes.push_back({"n" + std::to_string(n), CpuMilli{256000}, MiB{2 << 20}, 8, a100});
  return nodes;
}

struct CycleFixture {
  std::unique_ptr<sched::TenantTree> tree;
  std::unique_ptr<sched::Scheduler> sched;
  std::vector<sched::TenantIndex> leaves;
  std::deque<sched::JobId> running;
  Rng rng{7};
  sched::JobId next = 1;
  int64_t now = 0;

  Job RandomJob() {
    Job j;
    j.id = next++;
    j.tenant = leaves[rng.Uniform(leaves.size())];
    const uint64_t kind = rng.Uniform(10);
    j.qos = kind < 2 ? QosClass::kGuaranteed : kind < 8 ? QosClass::kBurstable : QosClass::kBestEffort;
    j.priority = static_cast<int32_t>(rng.Uniform(3));
    const uint64_t shape = rng.Uniform(10);
    j.pod.cpu = CpuMilli{4000};
    j.pod.memory = MiB{16384};
    if (shape < 5) {
      j.pod.num_gpu = 1;
      j.pod.gpu_milli = GpuMilli{static_cast<int64_t>(100 * (1 + rng.Uniform(9)))};
    } else if (shape < 8) {
      j.pod.num_gpu = 1;
      j.pod.gpu_milli = kWholeGpu;
    } else {
      j.pod.num_gpu = shape == 8 ? 2 : 4;
      j.pod.gpu_milli = kWholeGpu;
    }
    j.submit = sched::Seconds{now};
    return j;
  }

  // Without `with_scheduler` only the tree and the job stream (LiveFixture drives its own).
  explicit CycleFixture(bool with_scheduler = true) {
    std::vector<sched::TenantSpec> specs;
    for (int o = 0; o < 25; ++o) {
      sched::TenantSpec org;
      org.name = "org" + std::to_string(o);
      org.guaranteed[sched::kGpuMilliDim] = 80 * 1000;  // 25 x 80 = 2000 GPUs
      specs.push_back(org);
      for (int t = 0; t < 20; ++t) {
        sched::TenantSpec team;
        team.name = org.name + "-team" + std::to_string(t);
        team.parent = org.name;
        team.guaranteed[sched::kGpuMilliDim] = 4 * 1000;
        specs.push_back(team);
      }
    }
    tree = std::make_unique<sched::TenantTree>(*sched::TenantTree::Create(specs, sched::ResourceSpace()));
    for (int t = 0; t < tree->size(); ++t)
      if (tree->is_leaf(t)) leaves.push_back(t);
    if (!with_scheduler) return;
    const std::vector<placement::NodeSpec> nodes = BenchNodes();
    sched::SchedulerOptions opt;
    opt.min_runtime = sched::Seconds{0};
    sched = std::move(*sched::Scheduler::Create(tree.get(), nodes, opt));
    // Fill the cluster, then queue 10 000.
    for (int k = 0; k < 6000; ++k) (void)sched->Submit(RandomJob());
    for (const auto& s : sched->Cycle(sched::Seconds{now}).started) running.push_back(s.job);
    TopUp();
  }

  void TopUp() {
    while (sched->pending_count() < 10000) (void)sched->Submit(RandomJob());
  }
};

void BM_SchedulingCycle(benchmark::State& state) {
  CycleFixture f;
  for (auto _ : state) {
    state.PauseTiming();
    f.now += 60;
    for (int k = 0; k < 20 && !f.running.empty(); ++k) {
      const sched::JobId id = f.running.front();
      f.running.pop_front();
      if (f.sched->is_running(id)) (void)f.sched->Complete(id, sched::Seconds{f.now});
    }
    f.TopUp();
    state.ResumeTiming();
    sched::CycleResult r = f.sched->Cycle(sched::Seconds{f.now});
    state.PauseTiming();
    for (const auto& s : r.started) f.running.push_back(s.job);
    state.counters["started"] = static_cast<double>(r.started.size());
    state.counters["preempted"] = static_cast<double>(r.preempted.size());
    state.counters["attempts"] = static_cast<double>(r.attempts);
    state.ResumeTiming();
  }
  state.counters["pending"] = static_cast<double>(f.sched->pending_count());
  state.counters["running"] = static_cast<double>(f.sched->running_count());
}
BENCHMARK(BM_SchedulingCycle)->Unit(benchmark::kMillisecond)->Iterations(50)->Repetitions(3)->ReportAggregatesOnly(true);

// The cycle fixture's world and job stream, driven through LiveScheduler.
struct LiveFixture {
  CycleFixture base{false};  // the tree, leaves and job generator: the same stream as BM_SchedulingCycle
  std::unique_ptr<sched::LiveScheduler> live;
  std::deque<sched::JobId> running;

  sched::LiveJob RandomJob() {
    const Job j = base.RandomJob();
    sched::LiveJob l;
    l.id = j.id;
    l.tenant = base.tree->name(j.tenant);
    l.qos = j.qos;
    l.priority = j.priority;
    l.pod = j.pod;
    l.submit = j.submit;
    return l;
  }

  LiveFixture() {
    const std::vector<placement::NodeSpec> nodes = BenchNodes();
    sched::SchedulerOptions opt;
    opt.min_runtime = sched::Seconds{0};
    live = std::move(*sched::LiveScheduler::Create(*base.tree, nodes, opt));
    for (int k = 0; k < 6000; ++k) (void)live->Submit(RandomJob());
    for (const auto& s : live->Cycle(sched::Seconds{base.now}).started) running.push_back(s.job);
    TopUp();
  }

  void TopUp() {
    while (live->core().pending_count() < 10000) (void)live->Submit(RandomJob());
  }
};

void BM_LiveSchedulingCycle(benchmark::State& state) {
  LiveFixture f;
  for (auto _ : state) {
    state.PauseTiming();
    f.base.now += 60;
    for (int k = 0; k < 20 && !f.running.empty(); ++k) {
      const sched::JobId id = f.running.front();
      f.running.pop_front();
      if (f.live->is_running(id)) (void)f.live->Complete(id, sched::Seconds{f.base.now});
    }
    f.TopUp();
    state.ResumeTiming();
    sched::LiveCycleResult r = f.live->Cycle(sched::Seconds{f.base.now});
    state.PauseTiming();
    for (const auto& s : r.started) f.running.push_back(s.job);
    state.counters["started"] = static_cast<double>(r.started.size());
    state.counters["waits"] = static_cast<double>(r.waits.size());
    state.ResumeTiming();
  }
}
BENCHMARK(BM_LiveSchedulingCycle)->Unit(benchmark::kMillisecond)->Iterations(50)->Repetitions(3)->ReportAggregatesOnly(true);

void BM_LiveRebuild(benchmark::State& state) {
  LiveFixture f;
  for (auto _ : state) {
    (void)f.live->SetTenants(*f.base.tree);
    benchmark::DoNotOptimize(f.live->is_running(1));
  }
  state.counters["pending"] = static_cast<double>(f.live->core().pending_count());
  state.counters["running"] = static_cast<double>(f.live->core().running_count());
}
BENCHMARK(BM_LiveRebuild)->Unit(benchmark::kMillisecond)->Iterations(10)->Repetitions(3)->ReportAggregatesOnly(true);

void BM_OneWeekScenario(benchmark::State& state) {
  const GpuModelCatalog& catalog = GpuModelCatalog::Builtin();
  const std::string data = std::string(TESSERA_SOURCE_DIR) + "/data";
  auto quota = config::LoadQuotaFile(data + "/scenarios/quotas-default.yaml", catalog);
  auto all = sim::ReadNodeList(data + "/alibaba-gpu-2023/csv/openb_node_list_gpu_node.csv", catalog);
  auto pods = sim::ReadTimedPods(data + "/alibaba-gpu-2023/csv/openb_pod_list_default.csv", catalog);
  auto skew = sim::ReadAppSkew(data + "/tenants/dlrm-app-skew.csv");
  if (!quota.ok() || !all.ok() || !pods.ok() || !skew.ok()) {
    state.SkipWithError("cannot read the bundled data");
    return;
  }
  std::vector<placement::NodeSpec> nodes;
  for (size_t i = 0; i < all->size(); i += 96) nodes.push_back((*all)[i]);
  sim::WorkloadOptions wo;
  auto jobs = sim::BuildTenantWorkload(*pods, quota->tenants, *skew, wo);
  std::vector<placement::TaskRequest> tasks;
  for (const auto& w : *jobs) tasks.push_back(w.job.pod);
  const placement::TargetWorkload target = placement::TargetWorkload::FromTasks(tasks);
  sim::ScenarioOptions so;
  so.scheduler.target_workload = &target;
  so.scheduler.min_runtime = sched::Seconds{0};
  for (auto _ : state) {
    auto d = sim::RunDedicated(quota->tenants, nodes, *jobs, so);
    auto s = sim::RunShared(quota->tenants, nodes, *jobs, so);
    if (!d.ok() || !s.ok()) state.SkipWithError("scenario failed");
    benchmark::DoNotOptimize(s);
  }
  state.counters["jobs"] = static_cast<double>(jobs->size());
}
BENCHMARK(BM_OneWeekScenario)->Unit(benchmark::kSecond)->Iterations(1)->Repetitions(3)->ReportAggregatesOnly(true);

}  // namespace
}  // namespace tessera

BENCHMARK_MAIN();
