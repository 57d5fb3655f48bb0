// libFuzzer target for the trace readers: the same bytes go through sim::ParseCsv,
// sim::ParsePodList, sim::ParseNodeList and sim::ParseAppArrivals (as given, and behind a
// valid header so that the row checks get exercised too). None may crash, trip a sanitizer,
// assert or hang, and the results must be consistent:
//   - an error is INVALID_ARGUMENT and starts with "fuzz.csv:<line>:<col>: ";
//   - a parsed table is rectangular, with 1-based, non-decreasing line numbers;
//   - parsed pods pass placement::ValidateTask and have unique, non-empty names;
//   - parsed nodes make a valid ClusterSnapshot;
//   - parsed arrival profiles are a full rank x day grid of finite numbers >= 0.
// When one input is both a node list and a pod list (a header with both sets of columns),
// a small replay without tuning runs on it as well.
//
// Build and run: tests/fuzz/run.sh [seconds].
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <unordered_set>

#include "tessera/core/clock.h"
#include "tessera/core/gpu_model.h"
#include "tessera/placement/cluster_snapshot.h"
#include "tessera/placement/task.h"
#include "tessera/sim/csv.h"
#include "tessera/sim/multitenant.h"
#include "tessera/sim/replay.h"
#include "tessera/sim/trace.h"

namespace {

using namespace tessera;

constexpr std::string_view kPath = "fuzz.csv";

[[noreturn]] void Fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "csv_fuzzer: invariant violated: %s: %s\n", what, detail.c_str());
  std::abort();
}

#define FUZZ_CHECK(cond, detail)                   \
  do {                                             \
    if (!(cond)) Fail(#cond, std::string(detail)); \
  } while (0)

// "fuzz.csv:<digits>:<digits>: " at the start of the message.
bool HasLocation(const std::string& m) {
  if (m.compare(0, kPath.size() + 1, std::string(kPath) + ":") != 0) return false;
  size_t p = kPath.size() + 1;
  for (int part = 0; part < 2; ++part) {
    const size_t start = p;
    while (p < m.size() && m[p] >= '0' && m[p] <= '9') ++p;
    if (p == start || p >= m.size() || m[p] != ':') return false;
    ++p;
  }
  return p < m.size() && m[p] == ' ';
}

void CheckError(const Status& s) {
  FUZZ_CHECK(s.code() == StatusCode::kInvalidArgument, s.ToString());
  FUZZ_CHECK(HasLocation(s.message()), s.message());
}

void CheckTable(std::string_view text) {
  StatusOr<sim::CsvTable> t = sim::ParseCsv(text, kPath);
  if (!t.ok()) {
    CheckError(t.status());
    return;
  }
  FUZZ_CHECK(!t->header.empty(), "empty header");
  std::unordered_set<std::string> names;
  for (const std::string& h : t->header) {
    FUZZ_CHECK(!h.empty(), "empty header name accepted");
    FUZZ_CHECK(names.insert(h).second, "duplicate header name accepted: " + h);
  }
  int last_line = 1;
  for (const sim::CsvRow& row : t->rows) {
    FUZZ_CHECK(row.fields.size() == t->header.size(), "ragged row at line " + std::to_string(row.line));
    FUZZ_CHECK(row.columns.size() == row.fields.size(), "columns/fields mismatch");
    FUZZ_CHECK(row.line > last_line, "line numbers not increasing");
    last_line = row.line;
    for (size_t c = 0; c < row.columns.size(); ++c) {
      FUZZ_CHECK(row.columns[c] >= 1, "column < 1");
      FUZZ_CHECK(row.fields[c].find('\0') == std::string::npos, "NUL byte accepted");
      const std::string where = t->Where(row, c);
      FUZZ_CHECK(where.rfind(std::string(kPath) + ":", 0) == 0, where);
    }
  }
}

void CheckPods(std::string_view text, const GpuModelCatalog& catalog, std::vector<sim::PodRecord>* out) {
  StatusOr<std::vector<sim::PodRecord>> pods = sim::ParsePodList(text, kPath, catalog);
  if (!pods.ok()) {
    CheckError(pods.status());
    return;
  }
  FUZZ_CHECK(!pods->empty(), "empty pod list accepted");
  std::unordered_set<std::string> names;
  for (const sim::PodRecord& p : *pods) {
    FUZZ_CHECK(!p.name.empty(), "empty pod name accepted");
    FUZZ_CHECK(names.insert(p.name).second, "duplicate pod name accepted: " + p.name);
    const Status v = placement::ValidateTask(p.request);
    FUZZ_CHECK(v.ok(), p.name + ": " + v.ToString());
    FUZZ_CHECK(p.request.cpu.value() <= sim::kMaxCpuMilli, "cpu over the bound");
    FUZZ_CHECK(p.request.memory.value() <= sim::kMaxMemoryMib, "memory over the bound");
  }
  if (out != nullptr) *out = std::move(pods).value();
}

void CheckNodes(std::string_view text, const GpuModelCatalog& catalog, std::vector<placement::NodeSpec>* out) {
  StatusOr<std::vector<placement::NodeSpec>> nodes = sim::ParseNodeList(text, kPath, catalog);
  if (!nodes.ok()) {
    CheckError(nodes.status());
    return;
  }
  FUZZ_CHECK(!nodes->empty(), "empty node list accepted");
  std::unordered_set<std::string> names;
  for (const placement::NodeSpec& n : *nodes) {
    FUZZ_CHECK(!n.name.empty(), "empty node name accepted");
    FUZZ_CHECK(names.insert(n.name).second, "duplicate node name accepted: " + n.name);
    FUZZ_CHECK(n.gpu_count >= 0 && n.gpu_count <= placement::kMaxGpusPerNode, "GPU count out of range");
    FUZZ_CHECK((n.gpu_count > 0) == n.model.valid(), "model set iff GPUs");
  }
  auto snapshot = placement::ClusterSnapshot::Create(*nodes);
  FUZZ_CHECK(snapshot.ok(), snapshot.status().ToString());
  if (out != nullptr) *out = std::move(nodes).value();
}

void CheckArrivals(std::string_view text) {
  StatusOr<std::vector<std::vector<double>>> a = sim::ParseAppArrivals(text, kPath);
  if (!a.ok()) {
    CheckError(a.status());
    return;
  }
  FUZZ_CHECK(!a->empty(), "empty profile accepted");
  for (const std::vector<double>& days : *a) {
    FUZZ_CHECK(days.size() == a->front().size() && !days.empty(), "ragged profile");
    for (double g : days) FUZZ_CHECK(g >= 0 && g <= 1e12, "gpus_created out of range");
  }
}

// A replay without tuning on small inputs (bounded work per input).
void MaybeReplay(const std::vector<placement::NodeSpec>& nodes, const std::vector<sim::PodRecord>& pods) {
  if (nodes.empty() || pods.empty() || nodes.size() > 16 || pods.size() > 64) return;
  int64_t gpus = 0;
  for (const auto& n : nodes) gpus += n.gpu_count;
  if (gpus == 0) return;
  FakeClock clock;
  sim::ReplayInput in{&nodes, &pods, "fuzz"};
  for (const char* policy : {"fgd", "bestfit", "random"}) {
    StatusOr<sim::ReplayResult> r = sim::RunReplay(in, policy, {.seed = 1, .tune_ratio = 0}, clock);
    FUZZ_CHECK(r.ok(), r.status().ToString());
    FUZZ_CHECK(r->tasks_placed + r->tasks_failed == r->tasks_arrived, policy);
    FUZZ_CHECK(r->tasks_arrived == static_cast<int64_t>(pods.size()), policy);
    FUZZ_CHECK(r->allocated_gpu_milli <= r->gpu_capacity_milli, policy);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const GpuModelCatalog& catalog = GpuModelCatalog::Builtin();

  CheckTable(text);
  std::vector<sim::PodRecord> pods;
  std::vector<placement::NodeSpec> nodes;
  CheckPods(text, catalog, &pods);
  CheckNodes(text, catalog, &nodes);
  MaybeReplay(nodes, pods);
  CheckArrivals(text);

  // The same bytes as rows under a valid header.
  const std::string pod_text = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n" + std::string(text);
  const std::string node_text = "sn,cpu_milli,memory_mib,gpu,model\n" + std::string(text);
  CheckTable(pod_text);
  CheckPods(pod_text, catalog, nullptr);
  CheckNodes(node_text, catalog, nullptr);
  CheckArrivals("rank,day,gpus_created\n" + std::string(text));
  return 0;
}
