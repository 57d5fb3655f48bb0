// MIG planner speed (README "Performance"): a plan for N H100-80GB GPUs, half of them already
// partitioned with a third of their instances in use, against a random demand over all of the
// model's profiles (7 profile kinds including +me). The target: 1000 GPUs in <= 100 ms.
#include <benchmark/benchmark.h>

#include "tessera/core/rng.h"
#include "tessera/partition/mig_planner.h"

namespace {

using namespace tessera;
using namespace tessera::partition;

void BM_PlanMig(benchmark::State& state) {
  const GpuModelCatalog& cat = GpuModelCatalog::Builtin();
  const MigGeometry& g = *cat.info(*cat.Find("H100-80GB")).mig;
  const auto maximal = EnumerateMaximalLayouts(g);
  Rng rng(42);
  std::vector<MigGpuState> gpus(static_cast<size_t>(state.range(0)));
  for (MigGpuState& s : gpus) {
    if (rng.Uniform(2) == 0) continue;
    s.current = maximal[rng.Uniform(maximal.size())];
    for (size_t i = 0; i < s.current.size(); ++i) s.in_use.push_back(rng.Uniform(3) == 0);
  }
  std::map<std::string, int> demand;
  for (const MigProfile& p : g.profiles) {
    demand[p.name] = static_cast<int>(rng.Uniform(static_cast<uint64_t>(state.range(0)) + 1));
  }
  int satisfied = 0;
  for (auto _ : state) {
    auto plan = PlanMig(g, gpus, demand);
    if (!plan.ok()) {
      state.SkipWithError(plan.status().ToString().c_str());
      return;
    }
    satisfied = plan->satisfied_memory_slices;
  }
  state.counters["satisfied_slices"] = satisfied;
}

}  // namespace

BENCHMARK(BM_PlanMig)->Arg(8)->Arg(100)->Arg(1000)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
