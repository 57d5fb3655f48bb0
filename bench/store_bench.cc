// Acknowledged workload submits on the SQLite store (synchronous=FULL: a commit returns after the
// WAL's fsync), as `tessera serve`'s POST /v1/workloads does them: N threads (the HTTP handler
// threads), each calling Transact once per submit with the workload insert, its idempotency
// answer and an audit record. Concurrent calls are group-committed (include/tessera/store/store.h),
// so with more threads more submits share one fsync. The control plane's target is >= 2,000
// acknowledged submits/s.
//
// Counters (set by thread 0 from Store::Stats over the wall time of the timed loops, which all
// threads start and end together): acked_per_s = acknowledged submits per second, all threads
// together; per_commit = submits per database commit (the batch size group commit reached).
//
//   tessera_store_bench [--benchmark_repetitions=3]   (TESSERA_BENCH_DIR picks the folder; /tmp)
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "tessera/store/store.h"

namespace {

using tessera::Status;
using tessera::store::Store;
using tessera::store::StoreStats;
using tessera::store::Transaction;

// What the benchmark's threads share. Thread 0 opens the store before the timed loop and removes
// it after; Google Benchmark starts and ends every thread's loop together (a barrier), so the
// other threads only touch it inside the loop.
struct Bench {
  std::string dir;
  std::unique_ptr<Store> store;
  std::atomic<int64_t> seq{0};
  StoreStats before;
  std::chrono::steady_clock::time_point start;
};
Bench* bench = nullptr;

std::string OpenBench() {
  bench = new Bench;
  const char* base = std::getenv("TESSERA_BENCH_DIR");
  std::string tmpl = std::string(base ? base : "/tmp") + "/tessera-store-bench-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) return "mkdtemp failed";
  bench->dir = tmpl;
  auto opened = tessera::store::Open("sqlite:" + tmpl + "/bench.db");
  if (!opened.ok()) return opened.status().ToString();
  std::unique_ptr<Store> store = std::move(opened).value();
  Status setup = store->Transact([](Transaction& tx) { return tx.CreateTenant({"bench", "", "{}", 0, 0}); });
  if (!setup.ok()) return setup.ToString();
  bench->before = store->Stats();
  bench->store = std::move(store);
  return "";
}

void CloseBench() {
  bench->store.reset();
  if (!bench->dir.empty()) std::filesystem::remove_all(bench->dir);
  delete bench;
  bench = nullptr;
}

Status Submit(Transaction& tx, int64_t seq) {
  tessera::store::WorkloadRecord w;
  w.tenant = "bench";
  w.spec_json = R"({"gpus":1,"gpu_milli":500,"gpu_mem_mib":8192,"qos":"burstable"})";
  w.state = tessera::WorkloadState::kPending;
  w.seq = seq;
  w.created_ms = w.updated_ms = seq;
  TESSERA_ASSIGN_OR_RETURN(int64_t id, tx.InsertWorkload(w));
  const std::string body = R"({"id":)" + std::to_string(id) + R"(,"state":"pending"})";
  TESSERA_RETURN_IF_ERROR(tx.PutIdempotency({"tok-bench", "key-" + std::to_string(seq), 201, body, seq}));
  return tx.AppendAudit({seq, "tok-bench", "workload.create", "workloads/" + std::to_string(id), "201"}).status();
}

// One submit per Transact on each of state.threads() threads.
void BM_SqliteAcknowledgedSubmit(benchmark::State& state) {
  std::string error;
  if (state.thread_index() == 0) {
    error = OpenBench();
    bench->start = std::chrono::steady_clock::now();  // the loops start together right after
  }
  if (!error.empty()) state.SkipWithError(error.c_str());
  for (auto _ : state) {
    if (bench == nullptr || bench->store == nullptr) {
      state.SkipWithError("the store did not open");
      break;
    }
    const int64_t seq = ++bench->seq;
    Status s = bench->store->Transact([&](Transaction& tx) { return Submit(tx, seq); });
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) {
    if (bench->store != nullptr) {
      const StoreStats after = bench->store->Stats();
      const int64_t commits = after.commits - bench->before.commits;
      const int64_t submits = after.transactions - bench->before.transactions;
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - bench->start).count();
      state.counters["per_commit"] = commits > 0 ? static_cast<double>(submits) / commits : 0.0;
      state.counters["acked_per_s"] = seconds > 0 ? submits / seconds : 0.0;
    }
    CloseBench();
  }
}
BENCHMARK(BM_SqliteAcknowledgedSubmit)->Threads(1)->Threads(4)->Threads(16)->Threads(64)->MinTime(2.0)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
