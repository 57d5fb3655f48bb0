// Placement speed on the bundled Alibaba trace (README "Performance").
//
//   BM_Replay/<policy>    one full replay of the default pod list (~10.8k tasks on 1213 nodes,
//                         the artifact protocol, seed 42) on one thread; the targets: fgd
//                         <= 1 s, tessera <= 2x fgd.
//   BM_PlaceOne/<policy>  one placement decision on a cluster filled to ~80 % by a replay prefix
//                         (memo warm, as in steady state).
// Peak memory is reported as the counter max_rss_mib (getrusage, whole process).
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>

#include "tessera/core/clock.h"
#include "tessera/core/gpu_model.h"
#include "tessera/placement/policy.h"
#include "tessera/sim/replay.h"
#include "tessera/sim/trace.h"

namespace {

using namespace tessera;

struct Trace {
  std::vector<placement::NodeSpec> nodes;
  std::vector<sim::PodRecord> pods;
};

const Trace& DefaultTrace() {
  static const Trace* t = [] {
    const std::string dir = std::string(TESSERA_SOURCE_DIR) + "/data/alibaba-gpu-2023/csv/";
    auto nodes = sim::ReadNodeList(dir + "openb_node_list_gpu_node.csv", GpuModelCatalog::Builtin());
    auto pods = sim::ReadPodList(dir + "openb_pod_list_default.csv", GpuModelCatalog::Builtin());
    if (!nodes.ok() || !pods.ok()) {
      std::fprintf(stderr, "cannot read the bundled trace\n");
      std::exit(1);
    }
    return new Trace{*nodes, *pods};
  }();
  return *t;
}

double MaxRssMib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

void BM_Replay(benchmark::State& state, const char* policy) {
  const Trace& t = DefaultTrace();
  FakeClock clock;
  int64_t tasks = 0;
  for (auto _ : state) {
    auto r = sim::RunReplay({&t.nodes, &t.pods, "default"}, policy, {.seed = 42}, clock);
    if (!r.ok()) {
      state.SkipWithError(r.status().ToString().c_str());
      return;
    }
    tasks = r->tasks_arrived;
    benchmark::DoNotOptimize(r->allocated_gpu_milli);
  }
  state.counters["tasks"] = static_cast<double>(tasks);
  state.counters["max_rss_mib"] = MaxRssMib();
}

void BM_PlaceOne(benchmark::State& state, const char* policy) {
  const Trace& t = DefaultTrace();
  std::vector<placement::TaskRequest> requests;
  for (const auto& p : t.pods) requests.push_back(p.request);
  const auto workload = placement::TargetWorkload::FromTasks(requests);
  auto cluster = *placement::ClusterSnapshot::Create(t.nodes);
  auto pol = std::move(*placement::MakePolicy(policy, {.target_workload = &workload}));
  Rng rng(42);
  placement::PlacementContext ctx{.rng = &rng};
  // Fill to ~80 % of GPU capacity with the trace's own tasks.
  const int64_t target = cluster.total_gpu_capacity().value() * 8 / 10;
  size_t i = 0;
  while (cluster.allocated_gpu().value() < target && i < requests.size()) {
    auto d = pol->Place(cluster, requests[i++], ctx);
    if (d.placement) (void)cluster.Apply(requests[i - 1], *d.placement);
  }
  size_t k = 0;
  for (auto _ : state) {
    const auto& task = requests[k++ % requests.size()];
    auto d = pol->Place(cluster, task, ctx);
    // Apply and undo so the cluster stays at ~80 % and the node's memo entries are refreshed,
    // as in a real arrival stream.
    if (d.placement && cluster.Apply(task, *d.placement).ok()) (void)cluster.Undo(task, *d.placement);
    benchmark::DoNotOptimize(d);
  }
}

}  // namespace

#define TESSERA_POLICY_BENCH(p)                                                   \
  BENCHMARK_CAPTURE(BM_Replay, p, #p)->Unit(benchmark::kMillisecond)->MinTime(2); \
  BENCHMARK_CAPTURE(BM_PlaceOne, p, #p)->Unit(benchmark::kMicrosecond);

TESSERA_POLICY_BENCH(tessera)
TESSERA_POLICY_BENCH(fgd)
TESSERA_POLICY_BENCH(bestfit)
TESSERA_POLICY_BENCH(dotproduct)
TESSERA_POLICY_BENCH(gpupacking)
TESSERA_POLICY_BENCH(gpuclustering)
TESSERA_POLICY_BENCH(random)
TESSERA_POLICY_BENCH(firstfit)
TESSERA_POLICY_BENCH(nextfit)
TESSERA_POLICY_BENCH(worstfit)

BENCHMARK_MAIN();
