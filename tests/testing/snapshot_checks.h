// Helpers for placement tests that look at a whole ClusterSnapshot: its observable state, its
// internal consistency, and random clusters / tasks to drive property tests.
//
//   std::vector<int64_t> before = FreeState(snap);
//   ... Apply / Undo ...
//   EXPECT_EQ(FreeState(snap), before);
//   EXPECT_TRUE(CheckInvariants(snap));
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tessera/core/rng.h"
#include "tessera/placement/cluster_snapshot.h"
#include "tests/testing/builders.h"

namespace tessera::testing {

// Everything a snapshot reports except versions and uid: per node free CPU, memory, every GPU's
// free milli, the derived sums and the tag counts; then the allocated GPU total.
inline std::vector<int64_t> FreeState(const placement::ClusterSnapshot& c) {
  std::vector<int64_t> out;
  for (uint32_t i = 0; i < c.node_count(); ++i) {
    const NodeIndex n{i};
    out.push_back(c.free_cpu(n).value());
    out.push_back(c.free_memory(n).value());
    out.push_back(c.gpu_count(n));
    for (int g = 0; g < placement::kMaxGpusPerNode; ++g) out.push_back(c.gpu_free(n, g));
    out.push_back(c.node_gpu_free(n));
    out.push_back(c.fully_free_gpus(n));
    out.push_back(c.max_gpu_free(n));
    for (int t = 0; t < placement::kTagCount; ++t) out.push_back(c.tag_count(n, t));
  }
  out.push_back(c.allocated_gpu().value());
  return out;
}

inline std::vector<uint32_t> Versions(const placement::ClusterSnapshot& c) {
  std::vector<uint32_t> out;
  for (uint32_t i = 0; i < c.node_count(); ++i) out.push_back(c.version(NodeIndex{i}));
  return out;
}

// Free values within capacity, derived values consistent with the per-GPU ones, allocated GPU
// equal to capacity minus free.
inline ::testing::AssertionResult CheckInvariants(const placement::ClusterSnapshot& c) {
  int64_t free_total = 0;
  for (uint32_t i = 0; i < c.node_count(); ++i) {
    const NodeIndex n{i};
    const placement::NodeSpec& spec = c.spec(n);
    const std::string where = "node " + std::to_string(i) + ": ";
    if (c.free_cpu(n).value() < 0 || c.free_cpu(n) > spec.cpu) {
      return ::testing::AssertionFailure() << where << "free cpu " << c.free_cpu(n).value();
    }
    if (c.free_memory(n).value() < 0 || c.free_memory(n) > spec.memory) {
      return ::testing::AssertionFailure() << where << "free memory " << c.free_memory(n).value();
    }
    if (c.gpu_count(n) != spec.gpu_count) return ::testing::AssertionFailure() << where << "gpu count";
    int64_t sum = 0;
    int full = 0;
    int32_t mx = 0;
    for (int g = 0; g < c.gpu_count(n); ++g) {
      const int32_t u = c.gpu_free(n, g);
      if (u < 0 || u > 1000) {
        return ::testing::AssertionFailure() << where << "GPU " << g << " has " << u << " free";
      }
      sum += u;
      full += u == 1000;
      mx = std::max(mx, u);
    }
    if (sum != c.node_gpu_free(n)) return ::testing::AssertionFailure() << where << "node_gpu_free";
    if (full != c.fully_free_gpus(n)) return ::testing::AssertionFailure() << where << "fully_free_gpus";
    if (mx != c.max_gpu_free(n)) return ::testing::AssertionFailure() << where << "max_gpu_free";
    free_total += sum;
  }
  if (c.allocated_gpu().value() != c.total_gpu_capacity().value() - free_total) {
    return ::testing::AssertionFailure() << "allocated_gpu " << c.allocated_gpu().value()
                                         << " != capacity - free " << c.total_gpu_capacity().value() - free_total;
  }
  return ::testing::AssertionSuccess();
}

// A small heterogeneous cluster: `nodes` nodes with 0, 1, 2, 4 or 8 GPUs of a few models.
inline std::vector<NodeArgs> RandomNodeArgs(Rng& rng, int nodes) {
  static const char* const kModels[] = {"T4", "V100M16", "V100M32", "G2"};
  static const int kGpuCounts[] = {0, 1, 2, 4, 8};
  std::vector<NodeArgs> out;
  for (int i = 0; i < nodes; ++i) {
    const int gpus = kGpuCounts[rng.Uniform(5)];
    const int64_t cpu = 8000 * static_cast<int64_t>(1 + rng.Uniform(12));
    const int64_t mem = 16384 * static_cast<int64_t>(1 + rng.Uniform(16));
    out.push_back({cpu, mem, gpus, gpus > 0 ? kModels[rng.Uniform(4)] : ""});
  }
  return out;
}

// A valid task: CPU-only, sharing or 1/2/4/8 whole GPUs, sometimes restricted to models.
inline placement::TaskRequest RandomTask(Rng& rng) {
  static const int64_t kShares[] = {100, 250, 300, 500, 700, 900};
  static const int kWholeCounts[] = {1, 1, 2, 4, 8};
  const int64_t cpu = 1000 * static_cast<int64_t>(rng.Uniform(17));
  const int64_t mem = 1024 * static_cast<int64_t>(rng.Uniform(33));
  placement::TaskRequest t;
  switch (rng.Uniform(4)) {
    case 0: t = CpuOnly(cpu, mem); break;
    case 1:
    case 2: t = Share(kShares[rng.Uniform(6)], cpu, mem); break;
    default: t = Whole(kWholeCounts[rng.Uniform(5)], cpu, mem); break;
  }
  if (t.num_gpu > 0 && rng.Uniform(4) == 0) t.allowed_models = Models(rng.Uniform(2) ? "T4" : "V100M16|V100M32");
  return t;
}

}  // namespace tessera::testing
