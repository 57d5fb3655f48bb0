// Builders for simulator tests: pod records in one line, the bundled Alibaba trace loaded once
// per process, and a comparison of replay results that treats NaN buckets as equal.
//
//   std::vector<sim::PodRecord> pods = {Pod("a", Share(500)), Pod("b", Whole(2))};
//   const BundledTrace& t = BundledTrace::Get();   // 1213 nodes, default pod list
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "tessera/core/gpu_model.h"
#include "tessera/sim/replay.h"
#include "tessera/sim/trace.h"
#include "tests/testing/builders.h"
#include "tests/testing/sim_test_util.h"

namespace tessera::testing {

inline sim::PodRecord Pod(std::string name, placement::TaskRequest request) {
  return sim::PodRecord{std::move(name), request};
}

// prefix + i, e.g. "n7" (built with += to keep GCC 12's -Wrestrict false positive quiet).
inline std::string Numbered(const std::string& prefix, int i) {
  std::string s = prefix;
  s += std::to_string(i);
  return s;
}

// `count` pods named prefix-0000.. with the same request.
inline std::vector<sim::PodRecord> Pods(const std::string& prefix, int count, placement::TaskRequest request) {
  std::vector<sim::PodRecord> out;
  for (int i = 0; i < count; ++i) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "-%04d", i);
    out.push_back(Pod(prefix + buf, request));
  }
  return out;
}

inline int64_t TotalGpuMilli(const std::vector<sim::PodRecord>& pods, const std::vector<uint32_t>& order) {
  int64_t t = 0;
  for (uint32_t i : order) t += pods[i].request.TotalGpu().value();
  return t;
}

struct BundledTrace {
  std::vector<placement::NodeSpec> nodes;
  std::vector<sim::PodRecord> default_pods;

  static const BundledTrace& Get() {
    static const BundledTrace* t = [] {
      auto* b = new BundledTrace();
      const auto& cat = GpuModelCatalog::Builtin();
      auto read_nodes = sim::ReadNodeList(DataPath("alibaba-gpu-2023/csv/openb_node_list_gpu_node.csv"), cat);
      auto read_pods = sim::ReadPodList(DataPath("alibaba-gpu-2023/csv/openb_pod_list_default.csv"), cat);
      if (read_nodes.ok()) b->nodes = *read_nodes;
      if (read_pods.ok()) b->default_pods = *read_pods;
      return b;
    }();
    return *t;
  }
  sim::ReplayInput DefaultInput() const { return {&nodes, &default_pods, "openb_pod_list_default"}; }
};

// Field-by-field equality of two replay results, wall_seconds excluded.
inline void ExpectSameReplay(const sim::ReplayResult& a, const sim::ReplayResult& b) {
  EXPECT_EQ(a.policy, b.policy);
  EXPECT_EQ(a.seed, b.seed);
  EXPECT_EQ(a.pods_name, b.pods_name);
  EXPECT_EQ(a.tasks_arrived, b.tasks_arrived);
  EXPECT_EQ(a.tasks_placed, b.tasks_placed);
  EXPECT_EQ(a.tasks_failed, b.tasks_failed);
  EXPECT_EQ(a.tasks_failed_gpu, b.tasks_failed_gpu);
  EXPECT_EQ(a.gpu_capacity_milli, b.gpu_capacity_milli);
  EXPECT_EQ(a.arrived_gpu_milli, b.arrived_gpu_milli);
  EXPECT_EQ(a.allocated_gpu_milli, b.allocated_gpu_milli);
  EXPECT_EQ(a.target_workload_types, b.target_workload_types);
  EXPECT_TRUE(SameDoubles(a.buckets.alloc_pct, b.buckets.alloc_pct));
  EXPECT_TRUE(SameDoubles(a.buckets.frag_amount_pct, b.buckets.frag_amount_pct));
  EXPECT_TRUE(SameDoubles(a.buckets.frag_rate_pct, b.buckets.frag_rate_pct));
}

}  // namespace tessera::testing
