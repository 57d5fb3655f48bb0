// Metering benchmarks (README's performance table):
//   BM_LedgerIngest          samples/s into the hourly ledger, one core: 10,000 sources (workloads
//                            on GPUs) each reporting 10-second samples in order, the node side's
//                            common case; the sources are interned once (an agent's stream).
//   BM_LedgerIngestResent    the same with every sample sent twice (the second is a duplicate).
//   BM_LedgerIngestByKey     samples that carry their source's strings (interned per sample).
//   BM_Invoice1000Tenants31Days  the invoice run for 1,000 tenants x 31 days of hourly records
//                            (744,000 records: shares and whole GPUs on two models, reservations,
//                            tiers, idle shared in proportion, an SLA credit rule).
#include <benchmark/benchmark.h>

#include <random>

#include "tessera/core/gpu_model.h"
#include "tessera/metering/invoice.h"
#include "tessera/metering/ledger.h"

namespace tessera::metering {
namespace {

constexpr int64_t kT0 = 1796083200;  // 2026-12-01T00:00:00Z (31 days)

std::vector<SourceKey> Sources(int n) {
  std::vector<SourceKey> keys;
  for (int i = 0; i < n; ++i) {
    keys.push_back({"tenant-" + std::to_string(i % 1000), "node-" + std::to_string(i / 8), std::to_string(i % 8),
                    i % 3 == 0 ? "H100-80GB" : "A100-80GB", i % 2 ? "share" : "whole", "job-" + std::to_string(i)});
  }
  return keys;
}

SampleValues Sample(int64_t seq, int64_t start) {
  SampleValues v;
  v.seq = seq;
  v.start = start;
  v.end = start + 10;
  v.gpu_milli_s_allocated = 5000;
  v.gpu_milli_s_used = 3100 + seq % 1000;
  v.memory_mib_s = 204800;
  v.peak_memory_mib = 20480;
  v.kernel_launches = 1200;
  v.bytes_transferred = 1 << 20;
  return v;
}

void IngestLoop(benchmark::State& state, int copies, bool by_key) {
  constexpr int kSources = 10000;
  constexpr int kPerSource = 100;  // 1,000,000 samples per iteration
  const std::vector<SourceKey> keys = Sources(kSources);
  for (auto _ : state) {
    state.PauseTiming();
    Ledger ledger;
    std::vector<uint32_t> ids;
    for (const SourceKey& k : keys) ids.push_back(ledger.Intern(k));
    state.ResumeTiming();
    for (int s = 0; s < kPerSource; ++s) {
      for (int i = 0; i < kSources; ++i) {
        const SampleValues v = Sample(s + 1, kT0 + s * 10);
        for (int c = 0; c < copies; ++c) {
          auto r = by_key ? ledger.Ingest(keys[i], v) : ledger.Ingest(ids[i], v);
          if (!r.ok()) state.SkipWithError(r.status().message().c_str());
        }
      }
    }
    benchmark::DoNotOptimize(ledger.counted());
    state.PauseTiming();
    { Ledger drop = std::move(ledger); }  // freeing is not ingest
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * kSources * kPerSource * copies);
}

void BM_LedgerIngest(benchmark::State& state) { IngestLoop(state, 1, false); }
void BM_LedgerIngestResent(benchmark::State& state) { IngestLoop(state, 2, false); }
void BM_LedgerIngestByKey(benchmark::State& state) { IngestLoop(state, 1, true); }
BENCHMARK(BM_LedgerIngest)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_LedgerIngestResent)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_LedgerIngestByKey)->Unit(benchmark::kMillisecond);

void BM_Invoice1000Tenants31Days(benchmark::State& state) {
  std::vector<SourceKey> sources;
  std::vector<HourlyRecord> records;
  std::mt19937_64 rng(1);
  for (int t = 0; t < 1000; ++t) {
    const bool whole = t % 2 == 0;
    sources.push_back({"tenant-" + std::to_string(t), "node-" + std::to_string(t / 8), std::to_string(t % 8),
                       t % 3 == 0 ? "H100-80GB" : "A100-80GB", whole ? "whole" : "share", "job"});
    for (int h = 0; h < 31 * 24; ++h) {
      HourlyRecord r;
      r.source = static_cast<uint32_t>(t);
      r.hour = kT0 + h * 3600;
      r.seconds = 3600;
      r.gpu_milli_s_allocated = (whole ? 1000 : 100 + static_cast<int64_t>(rng() % 800)) * 3600;
      r.gpu_milli_s_used = static_cast<int64_t>(rng() % 1000) * 3600;
      r.memory_mib_s = 40960 * 3600;
      r.samples = 360;
      records.push_back(r);
    }
  }
  PricePlan plan;
  plan.idle = IdlePolicy::kProportional;
  plan.capacity_gpus = {{"A100-80GB", 600}, {"H100-80GB", 400}};
  ModelPrices& a = plan.prices["A100-80GB"];
  a.gpu_hour = 2'400'000;
  a.milli_gpu_hour = 2'600;
  a.memory_gib_hour = 2'000;
  ModelPrices& h = plan.prices["H100-80GB"];
  h.gpu_hour = 4'100'000;
  h.tiers = {{0, 300, 4'100'000}, {300, -1, 3'600'000}};
  for (int t = 0; t < 1000; t += 10) plan.reservations.push_back({"tenant-" + std::to_string(t), t % 3 == 0 ? "H100-80GB" : "A100-80GB", 500, 1'700'000, 3'000'000});
  plan.sla_credits.push_back({"guaranteed_wait_p99_s", true, 300'000'000, 10'000'000, {}});
  std::vector<SlaObservation> sla;
  for (int t = 0; t < 1000; t += 7) sla.push_back({"tenant-" + std::to_string(t), "2026-12", "guaranteed_wait_p99_s", 400'000'000});
  const Period period = *ParsePeriod("2026-12");
  for (auto _ : state) {
    auto run = ComputeInvoices(sources, records, sla, plan, period, GpuModelCatalog::Builtin());
    if (!run.ok()) state.SkipWithError(run.status().message().c_str());
    benchmark::DoNotOptimize(run->metered_total_micro);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(records.size()));
}
BENCHMARK(BM_Invoice1000Tenants31Days)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tessera::metering

BENCHMARK_MAIN();
