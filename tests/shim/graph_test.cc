// Graph launches are charged by their kernel nodes (src/enforce/shim/graph_exec_table.h):
//   - the pieces in-process: CountGraphKernels over a scripted driver (child graphs recurse,
//     conditional nodes count 1, any failing query means "unknown"), and the bounded exec table
//     (lookups, tombstones, a full probe window, readers concurrent with writers);
//   - end to end: probe processes under LD_PRELOAD with the fake driver build graphs, instantiate
//     them through every instantiate entry point and launch them (legacy and _ptsz) while their
//     tenant holds the lease of a hand-written board; the tenant's lease line shows the charge
//     (submitted_est_ns = kernels x kernel_est_ns, graph_launches). A graph of 5 kernels + a child
//     graph of 3 (nested one level further) + an empty node is charged 8 kernels per launch;
//     destroy + re-instantiate, unknown and stale execs (charged 1), a driver that cannot describe
//     the graph (charged 1), a full table (the overflow is charged 1), an ungated process.
#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "src/enforce/shim/graph_exec_table.h"
#include "tessera/enforce/lease.h"
#include "tessera/enforce/lease_file.h"
#include "tests/shim/shim_test_util.h"

namespace tessera::enforce {
namespace {

using namespace tessera::cuabi;  // NOLINT
using shim::CountGraphKernels;
using shim::GraphDriverFns;
using shim::GraphExecTable;
using testing::FieldInt;
using testing::Probe;
using testing::ProbeOptions;
using testing::ProbeRun;
using testing::RunProbe;

// --- CountGraphKernels over a scripted driver -------------------------------------------------------

// Graphs and nodes are indexes into these tables (handle = index + 1).
struct ScriptNode {
  CUgraphNodeType type;
  int child;  // graph index for GRAPH nodes
};
std::vector<std::vector<int>> g_script_graphs;  // graph -> node indexes
std::vector<ScriptNode> g_script_nodes;
int g_fail_type_of = -1;  // node index whose type query fails

CUgraph GraphHandle(int i) { return reinterpret_cast<CUgraph>(static_cast<uintptr_t>(i + 1)); }
int GraphIndex(CUgraph g) { return static_cast<int>(reinterpret_cast<uintptr_t>(g)) - 1; }

CUresult ScriptGetNodes(CUgraph g, CUgraphNode* nodes, size_t* n) {
  const std::vector<int>& list = g_script_graphs.at(GraphIndex(g));
  if (nodes == nullptr) {
    *n = list.size();
    return CUDA_SUCCESS;
  }
  for (size_t i = 0; i < *n && i < list.size(); ++i) {
    nodes[i] = reinterpret_cast<CUgraphNode>(static_cast<uintptr_t>(list[i] + 1));
  }
  return CUDA_SUCCESS;
}
CUresult ScriptNodeType(CUgraphNode node, CUgraphNodeType* type) {
  const int i = static_cast<int>(reinterpret_cast<uintptr_t>(node)) - 1;
  if (i == g_fail_type_of) return CUDA_ERROR_INVALID_VALUE;
  *type = g_script_nodes.at(i).type;
  return CUDA_SUCCESS;
}
CUresult ScriptChildGraph(CUgraphNode node, CUgraph* child) {
  const int i = static_cast<int>(reinterpret_cast<uintptr_t>(node)) - 1;
  if (g_script_nodes.at(i).type != CU_GRAPH_NODE_TYPE_GRAPH) return CUDA_ERROR_INVALID_VALUE;
  *child = GraphHandle(g_script_nodes[i].child);
  return CUDA_SUCCESS;
}

int AddScriptGraph() {
  g_script_graphs.emplace_back();
  return static_cast<int>(g_script_graphs.size()) - 1;
}
void AddScriptNode(int graph, CUgraphNodeType type, int child = -1) {
  g_script_nodes.push_back({type, child});
  g_script_graphs[graph].push_back(static_cast<int>(g_script_nodes.size()) - 1);
}

class CountGraphKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g_script_graphs.clear();
    g_script_nodes.clear();
    g_fail_type_of = -1;
  }
  GraphDriverFns fns_{&ScriptGetNodes, &ScriptNodeType, &ScriptChildGraph};
};

TEST_F(CountGraphKernelsTest, KernelsOfChildGraphsCountEmptyAndCopyNodesDoNot) {
  const int grandchild = AddScriptGraph();
  AddScriptNode(grandchild, CU_GRAPH_NODE_TYPE_KERNEL);
  const int child = AddScriptGraph();
  AddScriptNode(child, CU_GRAPH_NODE_TYPE_KERNEL);
  AddScriptNode(child, CU_GRAPH_NODE_TYPE_KERNEL);
  AddScriptNode(child, CU_GRAPH_NODE_TYPE_GRAPH, grandchild);
  const int top = AddScriptGraph();
  for (int i = 0; i < 5; ++i) AddScriptNode(top, CU_GRAPH_NODE_TYPE_KERNEL);
  AddScriptNode(top, CU_GRAPH_NODE_TYPE_GRAPH, child);
  AddScriptNode(top, CU_GRAPH_NODE_TYPE_EMPTY);
  AddScriptNode(top, 1);  // a memcpy node
  EXPECT_EQ(CountGraphKernels(fns_, GraphHandle(top)), std::optional<uint64_t>(8));
  EXPECT_EQ(CountGraphKernels(fns_, GraphHandle(child)), std::optional<uint64_t>(3));
  const int empty = AddScriptGraph();
  EXPECT_EQ(CountGraphKernels(fns_, GraphHandle(empty)), std::optional<uint64_t>(0));
}

TEST_F(CountGraphKernelsTest, ConditionalNodeCountsOneKernel) {
  const int g = AddScriptGraph();
  AddScriptNode(g, CU_GRAPH_NODE_TYPE_KERNEL);
  AddScriptNode(g, CU_GRAPH_NODE_TYPE_CONDITIONAL);
  EXPECT_EQ(CountGraphKernels(fns_, GraphHandle(g)), std::optional<uint64_t>(2));
}

TEST_F(CountGraphKernelsTest, UnknownWhenTheDriverCannotTell) {
  const int child = AddScriptGraph();
  AddScriptNode(child, CU_GRAPH_NODE_TYPE_KERNEL);
  const int top = AddScriptGraph();
  AddScriptNode(top, CU_GRAPH_NODE_TYPE_KERNEL);
  AddScriptNode(top, CU_GRAPH_NODE_TYPE_GRAPH, child);
  g_fail_type_of = 0;  // the child's kernel node
  EXPECT_EQ(CountGraphKernels(fns_, GraphHandle(top)), std::nullopt);
  g_fail_type_of = -1;
  GraphDriverFns no_child = fns_;
  no_child.child_graph = nullptr;  // a driver without cuGraphChildGraphNodeGetGraph
  EXPECT_EQ(CountGraphKernels(no_child, GraphHandle(top)), std::nullopt);
  EXPECT_EQ(CountGraphKernels(GraphDriverFns{}, GraphHandle(top)), std::nullopt);
  EXPECT_EQ(CountGraphKernels(fns_, nullptr), std::nullopt);
}

TEST_F(CountGraphKernelsTest, NestingDeeperThanTheLimitIsUnknown) {
  // A chain of child graphs, each with one kernel: depth kMaxGraphDepth is counted, one more is not.
  int inner = AddScriptGraph();
  AddScriptNode(inner, CU_GRAPH_NODE_TYPE_KERNEL);
  std::vector<int> chain{inner};
  for (int d = 0; d <= shim::kMaxGraphDepth; ++d) {
    const int g = AddScriptGraph();
    AddScriptNode(g, CU_GRAPH_NODE_TYPE_KERNEL);
    AddScriptNode(g, CU_GRAPH_NODE_TYPE_GRAPH, chain.back());
    chain.push_back(g);
  }
  // chain[i] nests i levels below it.
  EXPECT_EQ(CountGraphKernels(fns_, GraphHandle(chain[shim::kMaxGraphDepth])),
            std::optional<uint64_t>(shim::kMaxGraphDepth + 1));
  EXPECT_EQ(CountGraphKernels(fns_, GraphHandle(chain[shim::kMaxGraphDepth + 1])), std::nullopt);
}

// --- the exec table -------------------------------------------------------------------------------

const void* Exec(uintptr_t i) { return reinterpret_cast<const void*>(0x7f0000000000ull + i * 0x40); }

TEST(GraphExecTable, PutGetEraseAndReuse) {
  auto table = std::make_unique<GraphExecTable>();
  EXPECT_EQ(table->Get(Exec(1)), std::nullopt);
  ASSERT_TRUE(table->Put(Exec(1), 8));
  ASSERT_TRUE(table->Put(Exec(2), 3));
  EXPECT_EQ(table->Get(Exec(1)), std::optional<uint32_t>(8));
  EXPECT_EQ(table->Get(Exec(2)), std::optional<uint32_t>(3));
  ASSERT_TRUE(table->Put(Exec(1), 5));  // an update, not a second entry
  EXPECT_EQ(table->Get(Exec(1)), std::optional<uint32_t>(5));
  table->Erase(Exec(1));
  EXPECT_EQ(table->Get(Exec(1)), std::nullopt);
  EXPECT_EQ(table->Get(Exec(2)), std::optional<uint32_t>(3));
  table->Erase(Exec(1));  // twice: nothing happens
  EXPECT_FALSE(table->Put(nullptr, 1));
  EXPECT_EQ(table->Get(nullptr), std::nullopt);
}

TEST(GraphExecTable, BoundedAndTombstonesAreReused) {
  auto table = std::make_unique<GraphExecTable>();
  int stored = 0;
  std::vector<int> failed;
  for (int i = 0; i < GraphExecTable::kSlots + 500; ++i) {
    if (table->Put(Exec(i), static_cast<uint32_t>(i % 97 + 1))) {
      ++stored;
    } else {
      failed.push_back(i);
    }
  }
  EXPECT_LE(stored, GraphExecTable::kSlots);
  EXPECT_GE(stored, GraphExecTable::kSlots * 3 / 4) << "linear probing over a 64-slot window";
  EXPECT_GE(failed.size(), 500u);
  for (int i = 0; i < GraphExecTable::kSlots + 500; ++i) {
    const bool did_fail = std::find(failed.begin(), failed.end(), i) != failed.end();
    EXPECT_EQ(table->Get(Exec(i)), did_fail ? std::nullopt : std::optional<uint32_t>(i % 97 + 1)) << i;
  }
  // Erase everything: the tombstones take new entries again, and lookups stay right.
  for (int i = 0; i < GraphExecTable::kSlots + 500; ++i) table->Erase(Exec(i));
  for (int i = 0; i < GraphExecTable::kSlots + 500; ++i) ASSERT_EQ(table->Get(Exec(i)), std::nullopt) << i;
  for (int i = 0; i < 2000; ++i) ASSERT_TRUE(table->Put(Exec(100000 + i), 7)) << i;
  for (int i = 0; i < 2000; ++i) ASSERT_EQ(table->Get(Exec(100000 + i)), std::optional<uint32_t>(7));
}

TEST(GraphExecTable, ReadersSeeStableEntriesWhileWritersChurn) {
  auto table = std::make_unique<GraphExecTable>();
  for (int i = 0; i < 64; ++i) ASSERT_TRUE(table->Put(Exec(i), 10 + i));
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0};
  std::thread reader([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      for (int i = 0; i < 64; ++i) {
        if (table->Get(Exec(i)) != std::optional<uint32_t>(10 + i)) wrong.fetch_add(1);
      }
    }
  });
  for (int round = 0; round < 200; ++round) {
    for (int i = 0; i < 200; ++i) table->Put(Exec(1000 + i), 1);
    for (int i = 0; i < 200; ++i) table->Erase(Exec(1000 + i));
  }
  stop = true;
  reader.join();
  EXPECT_EQ(wrong.load(), 0);
}

// --- end to end through libtessera-shim.so ------------------------------------------------------------

constexpr uint64_t kKernelEstNs = 100'000;

// A node segment + lease file; slot 0 holds the lease for an hour (arbiter alive), so every launch
// of tenant 0 is admitted on the fast path and charged on its lease line.
struct GraphSetup : testing::TestLeaseNode {
  GraphSetup() {
    EXPECT_TRUE(segment.seg().SetLimit(0, 0, 1ULL << 30).ok());
    LeaseBoard& b = board();
    const uint64_t expiry = MonotonicNowNs() + 3600ULL * 1'000'000'000ULL;
    b.node[0].state.store(static_cast<uint32_t>(LeaseSlotState::kActive));
    b.node[0].kernel_est_ns.store(kKernelEstNs);
    b.lease.expiry_ns.store(expiry);
    b.lease.holder.store(1);
    b.lease.word.store(PackLeaseWord(0, expiry));
    b.arbiter.heartbeat_ns.store(expiry);
  }
  // Kernel estimates charged to tenant 0 so far, in kernels.
  uint64_t ChargedKernels() { return board().slots[0].tenant.submitted_est_ns.load() / kKernelEstNs; }
  uint64_t GraphLaunches() { return board().slots[0].tenant.graph_launches.load(); }
  ProbeOptions Options(std::vector<std::string> extra = {}) {
    ProbeOptions o;
    o.segment = &segment;
    o.tenant = 0;
    o.env.push_back("TESSERA_SHIM_LEASES=" + leases_path);
    for (std::string& e : extra) o.env.push_back(std::move(e));
    return o;
  }
};

// 5 kernels + a child graph of 3 kernels (2 + a grandchild of 1) + an empty node.
constexpr const char* kGraph8 = "graph:kkkkk(kk(k))e";

TEST(ShimGraph, EveryInstantiateVariantChargesTheKernelNodes) {
  GraphSetup s;
  std::vector<std::string> args{"init", kGraph8};
  const char* variants[] = {"v1", "v2", "flags", "params", "params_ptsz"};
  for (const char* v : variants) args.push_back(std::string("ginst:0:") + v);
  for (int e = 0; e < 5; ++e) {
    args.push_back("glaunch:" + std::to_string(e) + ":3");
    args.push_back("glaunch:" + std::to_string(e) + ":2:ptsz");
  }
  ProbeRun r = RunProbe(s.Options(), args);
  ASSERT_EQ(r.exit_code, 0);
  ASSERT_EQ(r.lines.size(), args.size()) << "probe output was cut short";
  EXPECT_EQ(FieldInt(r.lines[1], "rc"), 0) << r.lines[1];
  for (int v = 0; v < 5; ++v) EXPECT_EQ(FieldInt(r.lines[2 + v], "rc"), 0) << r.lines[2 + v];
  for (std::size_t i = 7; i < r.lines.size(); ++i) {
    EXPECT_EQ(FieldInt(r.lines[i], "failures"), 0) << r.lines[i];
    // The fake driver ran 8 kernel nodes per launch: the shim's count is the driver's.
    EXPECT_EQ(FieldInt(r.lines[i], "ran"), 8 * FieldInt(r.lines[i], "n")) << r.lines[i];
  }
  EXPECT_EQ(s.GraphLaunches(), 25u);
  EXPECT_EQ(s.board().slots[0].tenant.launches.load(), 25u);
  EXPECT_EQ(s.ChargedKernels(), 25u * 8);
}

TEST(ShimGraph, DestroyAndReinstantiateUnknownAndStaleExecs) {
  GraphSetup s;
  struct Step {
    const char* command;
    uint64_t charged;  // kernels charged after this command
    long rc;           // the command's rc
  };
  const Step steps[] = {
      {kGraph8, 0, 0},
      {"ginst:0:flags", 0, 0},
      {"glaunch:0:2", 16, 0},
      {"gexecdestroy:0", 16, 0},
      {"glaunch:0:1", 17, 400},  // the destroyed handle: unknown to the shim (and the driver)
      {"graph:kk", 17, 0},
      {"ginst:1:flags", 17, 0},  // may well get the destroyed exec's address back
      {"glaunch:1:1", 19, 0},
      {"ginst:0:flags", 19, 0},  // graph 0 again: a new exec
      {"glaunch:2:1", 27, 0},
      {"glaunch:bogus:5", 32, 400},  // never instantiated
      {"glaunch:null:1", 33, 0},
      {"gexecdestroy:1", 33, 0},
      {"gdestroy:0", 33, 0},
  };
  // The probe does not stop between commands, so each prefix of the script runs in its own
  // process (the fake driver's handles are deterministic enough; the charge only depends on the
  // script), and the tenant's charge is read after each.
  std::vector<std::string> args{"init"};
  for (const Step& step : steps) {
    args.push_back(step.command);
    s.board().slots[0].tenant.submitted_est_ns.store(0);
    ProbeRun r = RunProbe(s.Options(), args);
    ASSERT_EQ(r.exit_code, 0);
    ASSERT_EQ(r.lines.size(), args.size());
    EXPECT_EQ(FieldInt(r.lines.back(), "rc"), step.rc) << r.lines.back();
    EXPECT_EQ(s.ChargedKernels(), step.charged) << "after: " << r.lines.back();
  }
}

TEST(ShimGraph, AGraphTheDriverCannotDescribeIsChargedOneKernel) {
  GraphSetup s;
  ProbeRun r = RunProbe(s.Options(), {"init", kGraph8, "inject:cuGraphGetNodes:999:-1", "ginst:0:v2",
                                      "glaunch:0:4"});
  ASSERT_EQ(r.exit_code, 0);
  ASSERT_EQ(r.lines.size(), 5u);
  EXPECT_EQ(FieldInt(r.lines[3], "rc"), 0) << r.lines[3];  // the instantiate itself succeeded
  EXPECT_EQ(FieldInt(r.lines[4], "ran"), 32) << r.lines[4];
  EXPECT_EQ(s.ChargedKernels(), 4u);
}

TEST(ShimGraph, ExecsBeyondTheTableAreChargedOneKernel) {
  GraphSetup s;
  const int n = GraphExecTable::kSlots + 300;
  std::vector<std::string> args{"init", kGraph8, "ginst:0:flags:" + std::to_string(n)};
  for (int e = 0; e < n; ++e) args.push_back("glaunch:" + std::to_string(e) + ":1");
  ProbeRun r = RunProbe(s.Options(), args);
  ASSERT_EQ(r.exit_code, 0);
  ASSERT_EQ(r.lines.size(), args.size());
  EXPECT_EQ(FieldInt(r.lines[2], "rc"), 0) << r.lines[2];
  EXPECT_EQ(s.GraphLaunches(), static_cast<uint64_t>(n));
  // charged = 8 x recorded + 1 x the rest
  const uint64_t charged = s.ChargedKernels();
  ASSERT_GE(charged, static_cast<uint64_t>(n));
  const uint64_t recorded = (charged - n) / 7;
  EXPECT_EQ((charged - n) % 7, 0u);
  EXPECT_LE(recorded, static_cast<uint64_t>(GraphExecTable::kSlots));
  EXPECT_GE(recorded, static_cast<uint64_t>(GraphExecTable::kSlots * 3 / 4));
}

TEST(ShimGraph, UngatedProcessRunsGraphsUnchanged) {
  GraphSetup s;
  ProbeOptions o = s.Options();
  o.env.clear();  // no lease file: compute is not gated
  ProbeRun r = RunProbe(o, {"init", kGraph8, "ginst:0:params", "glaunch:0:3:ptsz", "gexecdestroy:0"});
  ASSERT_EQ(r.exit_code, 0);
  ASSERT_EQ(r.lines.size(), 5u);
  EXPECT_EQ(FieldInt(r.lines[3], "failures"), 0) << r.lines[3];
  EXPECT_EQ(FieldInt(r.lines[3], "ran"), 24) << r.lines[3];
  EXPECT_EQ(FieldInt(r.lines[4], "rc"), 0) << r.lines[4];
  EXPECT_EQ(s.GraphLaunches(), 0u);
}

}  // namespace
}  // namespace tessera::enforce
