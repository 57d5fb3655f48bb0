// NodeDir::Join and LeaveTenant on a node with 63 tenants, each with a live member (this process): what a Slurm
// task's join costs under the SPANK plugin (docs/slurm.md, "where the time goes"; issue 33).
//   BM_JoinNewTenant:      a 64th tenant joins (a free index, a fresh counters file); untimed, it
//                          leaves again (LeaveTenant).
//   BM_JoinExistingTenant: a second member joins tenant 0 (a job's next task).
//   BM_LeaveTenant:        a 64th tenant's last member leaves (a `tessera run` ending, the agent
//                          releasing a workload, a DRA claim unprepared); untimed, it joins again.
// The p50 counter is the median join in ms.
//
//   ninja -C build tessera_node_dir_bench && build/bench/tessera_node_dir_bench
#include <benchmark/benchmark.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "tessera/node/node_dir.h"

namespace {

using tessera::node::NodeDir;
using tessera::node::TenantRequest;

TenantRequest Request(const std::string& name) {
  return TenantRequest{.name = name, .gpus = {0}, .mem_bytes = 1ULL << 30, .share = 10};
}

// A node directory with tenants t0..t62; empty on failure.
std::string NodeWith63Tenants(benchmark::State& state) {
  std::string dir = (std::filesystem::temp_directory_path() / "tndb-XXXXXX").string();
  if (::mkdtemp(dir.data()) == nullptr) {
    state.SkipWithError("mkdtemp");
    return "";
  }
  NodeDir node(dir + "/node");
  for (int i = 0; i < 63; ++i) {
    if (!node.Join(Request("t" + std::to_string(i)), ::getpid()).ok()) {
      state.SkipWithError("background join failed");
      return "";
    }
  }
  return dir;
}

void Report(benchmark::State& state, std::vector<double>& ms) {
  if (ms.empty()) return;
  std::sort(ms.begin(), ms.end());
  state.counters["p50_ms"] = ms[ms.size() / 2];
}

// Times `tenant`'s join on a node with 63 tenants (it must get `index`); `reset` (untimed) undoes
// it before the next iteration and says whether it could.
template <typename Reset>
void TimeJoins(benchmark::State& state, const std::string& tenant, int index, Reset reset) {
  const std::string dir = NodeWith63Tenants(state);
  if (dir.empty()) return;
  NodeDir node(dir + "/node");
  std::vector<double> ms;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    auto joined = node.Join(Request(tenant), ::getpid());
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (!joined.ok() || *joined != index) return state.SkipWithError("join failed");
    state.PauseTiming();
    if (!reset(node)) return state.SkipWithError("leave failed");
    state.ResumeTiming();
  }
  Report(state, ms);
  std::filesystem::remove_all(dir);
}

void BM_JoinNewTenant(benchmark::State& state) {
  TimeJoins(state, "measured", 63, [](const NodeDir& node) { return node.LeaveTenant("measured", ::getpid()).ok(); });
}
BENCHMARK(BM_JoinNewTenant)->Unit(benchmark::kMillisecond)->Iterations(200);

void BM_JoinExistingTenant(benchmark::State& state) {
  // t0 goes (this pid leaves it) and comes back with one member.
  TimeJoins(state, "t0", 0, [](const NodeDir& node) {
    return node.LeaveTenant("t0", ::getpid()).ok() && node.Join(Request("t0"), ::getpid()).ok();
  });
}
BENCHMARK(BM_JoinExistingTenant)->Unit(benchmark::kMillisecond)->Iterations(200);

// A 64th tenant's last member leaves (LeaveTenant: its entry goes, its limit returns to 0), on a
// node with 63 other live tenants (the end of every `tessera run`); untimed, it joins again.
void BM_LeaveTenant(benchmark::State& state) {
  const std::string dir = NodeWith63Tenants(state);
  if (dir.empty()) return;
  NodeDir node(dir + "/node");
  std::vector<double> ms;
  for (auto _ : state) {
    state.PauseTiming();
    if (!node.Join(Request("measured"), ::getpid()).ok()) return state.SkipWithError("join failed");
    state.ResumeTiming();
    const auto t0 = std::chrono::steady_clock::now();
    const bool left = node.LeaveTenant("measured", ::getpid()).ok();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (!left) return state.SkipWithError("leave failed");
  }
  Report(state, ms);
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_LeaveTenant)->Unit(benchmark::kMillisecond)->Iterations(200);

}  // namespace

BENCHMARK_MAIN();
