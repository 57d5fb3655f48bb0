// The kube-scheduler extender's cost per pod (docs/kubernetes.md, "Scheduler extender"): one
// POST /filter plus one POST /prioritize body, decoded, decided and encoded, over 5,000 GPU
// nodes (the HTTP transport is not included: it adds one local round trip per call).
//
//   BM_FilterPrioritize/names_warm   nodeCacheCapable: true (NodeNames), steady state between
//                                    two refreshes of the cluster view (the policy's memo warm)
//   BM_FilterPrioritize/names_cold   the first pod after each refresh: a new cluster version every
//                                    pod, alternating between two that differ in the use of 50 of
//                                    the 5,000 nodes (1 %: what a refresh between two pods sees;
//                                    the extender carries the rest over, extender.cc)
//   BM_FilterPrioritize/names_relaid the same with one node's CPU changed too: a refresh the
//                                    extender cannot carry over (every node decided and scored
//                                    anew; before issue 34 every refresh cost this)
//   BM_FilterPrioritize/nodes_warm   nodeCacheCapable: false: the whole v1.NodeList (5,000 Node
//                                    objects, ~9 MB) in both calls
// Counters: p50_ms, p99_ms (per pod, both calls), pods_per_s (one thread) and, for the refresh
// cases, refresh_ms (SetCluster's median: the carry-over, on the refreshing thread). Targets (issue 34):
// p99 <= 5 ms and >= 1,000 pods/s. Cluster: 5,000 nodes (A100-40GB x8, H100-80GB x8, T4 x4),
// every GPU 0/25/50/75/100 % used at random (seed 7); 64 pods cycling: fractions of 100-500
// milli with 5-10 GiB, whole 1- and 2-GPU pods, some restricted to a model, 10 namespaces.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/core/gpu_model.h"
#include "tessera/integrations/k8s/extender.h"
#include "tessera/integrations/k8s/extender_cluster.h"

namespace {

using namespace tessera;
using nlohmann::json;

constexpr int kNodes = 5000;

// `changed`: every 100th node's GPU 0 one step (250 milli) busier or, full, empty; `relaid`:
// node 1's CPU differs as well.
k8s::ClusterState State(uint32_t seed, bool changed = false, bool relaid = false) {
  std::mt19937 rng(seed);
  k8s::ClusterState s;
  const struct {
    const char* model;
    int gpus;
    int64_t mib;
  } kinds[] = {{"A100-40GB", 8, 40000}, {"H100-80GB", 8, 80000}, {"T4", 4, 15000}};
  for (int i = 0; i < kNodes; ++i) {
    const auto& k = kinds[i % 3];
    k8s::ClusterNode n{.name = "gpu-node-" + std::to_string(i), .cpu_milli = 128000, .memory_mib = 1 << 20,
                       .model = k.model, .gpu_count = k.gpus};
    for (int g = 0; g < k.gpus; ++g) {
      const int32_t used = static_cast<int32_t>(rng() % 5) * 250;
      n.gpu_used_milli.push_back(used);
      n.gpu_used_mib.push_back(k.mib * used / 1000);
    }
    if (changed && i % 100 == 0) {
      n.gpu_used_milli[0] = (n.gpu_used_milli[0] + 250) % 1250;
      n.gpu_used_mib[0] = k.mib * n.gpu_used_milli[0] / 1000;
    }
    if (relaid && i == 1) n.cpu_milli = 96000;
    s.nodes.push_back(std::move(n));
  }
  for (int t = 0; t < 10; ++t) s.tenants.push_back({.name = "team-" + std::to_string(t), .limit_gpu_milli = 1'000'000});
  return s;
}

std::shared_ptr<const k8s::ExtenderCluster> Cluster(uint32_t seed, bool changed = false, bool relaid = false) {
  auto c = k8s::ExtenderCluster::Build(State(seed, changed, relaid), GpuModelCatalog::Builtin());
  if (!c.ok()) {
    std::fprintf(stderr, "%s\n", std::string(c.status().message()).c_str());
    std::exit(1);
  }
  return *c;
}

json Pod(int i) {
  json annotations;
  switch (i % 8) {
    case 0: case 1: annotations = {{"gpu.tessera.io/compute", "250"}, {"gpu.tessera.io/memory", "5Gi"}}; break;
    case 2: case 3: annotations = {{"gpu.tessera.io/compute", "500"}, {"gpu.tessera.io/memory", "10Gi"}}; break;
    case 4: annotations = {{"gpu.tessera.io/compute", "100"}, {"gpu.tessera.io/memory", "2Gi"}}; break;
    case 5: annotations = {{"gpu.tessera.io/count", "1"}}; break;
    case 6: annotations = {{"gpu.tessera.io/count", "2"}}; break;
    default: annotations = {{"gpu.tessera.io/compute", "300"}, {"gpu.tessera.io/memory", "8Gi"}, {"gpu.tessera.io/model", "A100-40GB"}};
  }
  return {{"kind", "Pod"}, {"apiVersion", "v1"},
          {"metadata", {{"name", "infer-" + std::to_string(i)}, {"namespace", "team-" + std::to_string(i % 10)},
                        {"uid", "5b7c2a1e-8f3d-4c6b-9e2a-" + std::to_string(100000000000 + i)},
                        {"labels", {{"app", "infer"}}}, {"annotations", annotations}}},
          {"spec", {{"containers", json::array({{{"name", "server"}, {"image", "registry.example.com/infer:1.0"},
                                                 {"resources", {{"requests", {{"cpu", "2"}, {"memory", "8Gi"}}}}}}})},
                    {"schedulerName", "default-scheduler"}, {"priority", 0}}},
          {"status", {{"phase", "Pending"}}}};
}

json NodeObject(const std::string& name) {
  return {{"metadata", {{"name", name}, {"labels", {{"kubernetes.io/hostname", name}, {"kubernetes.io/os", "linux"}}},
                        {"resourceVersion", "18321"}}},
          {"spec", {{"podCIDR", "10.244.1.0/24"}}},
          {"status", {{"capacity", {{"cpu", "128"}, {"memory", "1056964608Ki"}, {"pods", "110"}}},
                      {"allocatable", {{"cpu", "128"}, {"memory", "1056862208Ki"}, {"pods", "110"}}},
                      {"conditions", json::array({{{"type", "Ready"}, {"status", "True"}, {"reason", "KubeletReady"}}})},
                      {"nodeInfo", {{"kubeletVersion", "v1.34.2"}, {"containerRuntimeVersion", "containerd://1.7.24"},
                                    {"osImage", "Debian GNU/Linux 12 (bookworm)"}}}}}};
}

std::vector<std::string> Bodies(bool nodes_mode) {
  json names = json::array();
  json items = json::array();
  for (int i = 0; i < kNodes; ++i) {
    const std::string name = "gpu-node-" + std::to_string(i);
    names.push_back(name);
    if (nodes_mode) items.push_back(NodeObject(name));
  }
  std::vector<std::string> out;
  for (int i = 0; i < 64; ++i) {
    json args = {{"Pod", Pod(i)}};
    if (nodes_mode) {
      args["Nodes"] = {{"metadata", json::object()}, {"items", items}};
      args["NodeNames"] = nullptr;
    } else {
      args["Nodes"] = nullptr;
      args["NodeNames"] = names;
    }
    out.push_back(args.dump());
  }
  return out;
}

void BM_FilterPrioritize(benchmark::State& state, bool nodes_mode, bool cold, bool relaid = false) {
  auto extender = *k8s::Extender::Create({});
  const std::shared_ptr<const k8s::ExtenderCluster> clusters[2] = {Cluster(7), Cluster(7, cold, relaid)};
  extender->SetCluster(clusters[0]);
  const std::vector<std::string> bodies = Bodies(nodes_mode);
  if (cold) {
    // Every ask seen once before the timed pods (the first pod of an ask the extender has never
    // met costs what names_relaid measures, wherever it comes).
    for (const std::string& body : bodies) {
      (void)extender->Filter(body);
      (void)extender->Prioritize(body);
    }
  }
  std::vector<double> ms, refresh_ms;
  size_t i = 0;
  int64_t passed = 0;
  for (auto _ : state) {
    if (cold) {  // a refresh: a background thread's work, timed apart
      const auto refresh_start = std::chrono::steady_clock::now();
      extender->SetCluster(clusters[i % 2]);
      refresh_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - refresh_start).count());
    }
    const std::string& body = bodies[i++ % bodies.size()];
    const auto start = std::chrono::steady_clock::now();
    const k8s::ExtenderAnswer f = extender->Filter(body);
    const k8s::ExtenderAnswer p = extender->Prioritize(body);
    const auto end = std::chrono::steady_clock::now();
    const double seconds = std::chrono::duration<double>(end - start).count();
    state.SetIterationTime(seconds);
    ms.push_back(seconds * 1e3);
    passed += static_cast<int64_t>(f.body.size() + p.body.size() > 0);
  }
  std::sort(ms.begin(), ms.end());
  double sum = 0;
  for (double m : ms) sum += m;
  state.counters["p50_ms"] = ms[ms.size() / 2];
  state.counters["p99_ms"] = ms[std::min(ms.size() - 1, ms.size() * 99 / 100)];
  state.counters["pods_per_s"] = 1e3 * static_cast<double>(ms.size()) / sum;
  if (!refresh_ms.empty()) {
    std::sort(refresh_ms.begin(), refresh_ms.end());
    state.counters["refresh_ms"] = refresh_ms[refresh_ms.size() / 2];  // SetCluster, median
  }
  benchmark::DoNotOptimize(passed);
}

BENCHMARK_CAPTURE(BM_FilterPrioritize, names_warm, false, false)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(2000);
BENCHMARK_CAPTURE(BM_FilterPrioritize, names_cold, false, true)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(200);
BENCHMARK_CAPTURE(BM_FilterPrioritize, names_relaid, false, true, true)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(200);
BENCHMARK_CAPTURE(BM_FilterPrioritize, nodes_warm, true, false)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(100);

}  // namespace

BENCHMARK_MAIN();
