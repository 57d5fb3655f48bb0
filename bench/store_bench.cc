// Acknowledged workload submits on the SQLite store: one transaction per insert (the daemon's
// POST /v1/workloads without group commit), synchronous=FULL, so every iteration waits for the
// WAL's fsync. The control plane's target is >= 2,000 acknowledged submits/s.
//
// The /16 variant puts 16 inserts in one commit: what group commit would give (not built).
//
//   tessera_store_bench [--benchmark_repetitions=3]   (TESSERA_BENCH_DIR picks the folder; /tmp)
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "tessera/store/store.h"

namespace {

using tessera::Status;
using tessera::store::Transaction;

// state.range(0) workloads per transaction: 1 is the daemon today; more is what group commit
// (several requests' inserts in one commit, each acknowledged after it) would reach.
void BM_SqliteAcknowledgedSubmit(benchmark::State& state) {
  const int64_t per_commit = state.range(0);
  const char* base = std::getenv("TESSERA_BENCH_DIR");
  std::string tmpl = std::string(base ? base : "/tmp") + "/tessera-store-bench-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) {
    state.SkipWithError("mkdtemp failed");
    return;
  }
  {
    auto opened = tessera::store::Open("sqlite:" + tmpl + "/bench.db");
    if (!opened.ok()) {
      state.SkipWithError(opened.status().ToString().c_str());
      return;
    }
    std::unique_ptr<tessera::store::Store> store = std::move(opened).value();
    Status setup = store->Transact([](Transaction& tx) { return tx.CreateTenant({"bench", "", "{}", 0, 0}); });
    if (!setup.ok()) {
      state.SkipWithError(setup.ToString().c_str());
      return;
    }
    int64_t seq = 0;
    for (auto _ : state) {
      Status s = store->Transact([&](Transaction& tx) -> Status {
        for (int64_t i = 0; i < per_commit; ++i) {
          tessera::store::WorkloadRecord w;
          w.tenant = "bench";
          w.spec_json = R"({"gpus":1,"gpu_milli":500,"gpu_mem_mib":8192,"qos":"burstable"})";
          w.state = "pending";
          w.seq = ++seq;
          w.created_ms = w.updated_ms = seq;
          TESSERA_RETURN_IF_ERROR(tx.InsertWorkload(w).status());
        }
        return Status::Ok();
      });
      if (!s.ok()) {
        state.SkipWithError(s.ToString().c_str());
        break;
      }
    }
    state.SetItemsProcessed(state.iterations() * per_commit);
  }
  std::filesystem::remove_all(tmpl);
}
BENCHMARK(BM_SqliteAcknowledgedSubmit)->Arg(1)->Arg(16)->MinTime(2.0)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
