#include "tessera/metering/ledger.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <string_view>

#include "tessera/core/gpu_model.h"
#include "tessera/metering/ledger_file.h"

namespace tessera::metering {
namespace {

using ::testing::HasSubstr;

const int64_t kT0 = 1793491200;  // 2026-11-01T00:00:00Z

SourceKey Key(const std::string& tenant = "a", const std::string& workload = "w1") {
  return {tenant, "n1", "0", "A100-80GB", "share", workload};
}

SampleValues Sample(int64_t seq, int64_t start, int64_t end, int64_t milli = 500) {
  SampleValues v;
  v.seq = seq;
  v.start = start;
  v.end = end;
  v.gpu_milli_s_allocated = milli * (end - start);
  v.gpu_milli_s_used = milli * (end - start) / 2;
  v.memory_mib_s = 1024 * (end - start);
  v.peak_memory_mib = 1024 + seq;
  v.kernel_launches = 7 * (end - start);
  return v;
}

bool SameRecords(const std::vector<HourlyRecord>& a, const std::vector<HourlyRecord>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const HourlyRecord &x = a[i], &y = b[i];
    if (x.source != y.source || x.hour != y.hour || x.seconds != y.seconds ||
        x.gpu_milli_s_allocated != y.gpu_milli_s_allocated || x.gpu_milli_s_used != y.gpu_milli_s_used ||
        x.memory_mib_s != y.memory_mib_s || x.peak_memory_mib != y.peak_memory_mib ||
        x.kernel_launches != y.kernel_launches || x.bytes_transferred != y.bytes_transferred || x.samples != y.samples)
      return false;
  }
  return true;
}

TEST(Ledger, SplitsAtHourBoundariesByTheStatedRule) {
  Ledger l;
  SampleValues v;
  v.seq = 1;
  v.start = kT0 + 50 * 60;  // 00:50 -> 01:20
  v.end = kT0 + 80 * 60;
  v.gpu_milli_s_allocated = 1001;
  v.kernel_launches = 10;
  ASSERT_TRUE(l.Ingest(Key(), v).ok());
  const auto r = l.Records();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].hour, kT0);
  EXPECT_EQ(r[0].seconds, 600);
  EXPECT_EQ(r[0].gpu_milli_s_allocated, 333);  // floor(1001 * 600 / 1800), the header's example
  EXPECT_EQ(r[1].gpu_milli_s_allocated, 668);
  EXPECT_EQ(r[0].kernel_launches + r[1].kernel_launches, 10);
  EXPECT_EQ(r[1].seconds, 1200);
}

TEST(Ledger, RandomSplitsConserveEveryQuantity) {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 300; ++trial) {
    Ledger l;
    SampleValues v;
    v.seq = 1;
    v.start = kT0 + static_cast<int64_t>(rng() % 100000);
    v.end = v.start + 1 + static_cast<int64_t>(rng() % 40000);
    v.gpu_milli_s_allocated = static_cast<int64_t>(rng() % (1000 * (v.end - v.start) + 1));
    v.memory_mib_s = static_cast<int64_t>(rng() % static_cast<uint64_t>((int64_t{1} << 22) * (v.end - v.start)));
    v.bytes_transferred = static_cast<int64_t>(rng() % 1'000'000'000);
    ASSERT_TRUE(l.Ingest(Key(), v).ok());
    int64_t alloc = 0, mem = 0, bytes = 0, secs = 0;
    for (const HourlyRecord& r : l.Records()) {
      alloc += r.gpu_milli_s_allocated;
      mem += r.memory_mib_s;
      bytes += r.bytes_transferred;
      secs += r.seconds;
      EXPECT_LE(r.seconds, 3600);
    }
    EXPECT_EQ(alloc, v.gpu_milli_s_allocated);
    EXPECT_EQ(mem, v.memory_mib_s);
    EXPECT_EQ(bytes, v.bytes_transferred);
    EXPECT_EQ(secs, v.end - v.start);
  }
}

TEST(Ledger, ResendsAreIdempotentInAnyOrder) {
  std::mt19937_64 rng(11);
  std::vector<std::pair<SourceKey, SampleValues>> samples;
  for (int w = 0; w < 5; ++w) {
    int64_t t = kT0 + static_cast<int64_t>(rng() % 3000);
    for (int seq = 1; seq <= 60; ++seq) {
      const int64_t len = 1 + static_cast<int64_t>(rng() % 900);
      samples.push_back({Key("t" + std::to_string(w % 2), "w" + std::to_string(w)), Sample(seq, t, t + len)});
      t += len + static_cast<int64_t>(rng() % 100);
    }
  }
  Ledger once;
  for (const auto& [k, v] : samples) ASSERT_TRUE(once.Ingest(k, v).ok());
  // Late and resent: shuffled, every sample sent 1-3 times.
  std::vector<std::pair<SourceKey, SampleValues>> noisy;
  for (const auto& s : samples) {
    for (size_t n = 1 + rng() % 3; n > 0; --n) noisy.push_back(s);
  }
  std::shuffle(noisy.begin(), noisy.end(), rng);
  Ledger twice;
  // Same source ids as `once`.
  for (const auto& [k, v] : samples) twice.Intern(k);
  int64_t dups = 0;
  for (const auto& [k, v] : noisy) {
    auto r = twice.Ingest(k, v);
    ASSERT_TRUE(r.ok()) << r.status().message();
    dups += *r == IngestResult::kDuplicate;
  }
  EXPECT_EQ(dups, static_cast<int64_t>(noisy.size() - samples.size()));
  EXPECT_EQ(twice.counted(), static_cast<int64_t>(samples.size()));
  EXPECT_TRUE(SameRecords(once.Records(), twice.Records()));
}

TEST(Ledger, OverlapConflictAndOrderAreErrorsThatChangeNothing) {
  Ledger l;
  ASSERT_TRUE(l.Ingest(Key(), Sample(1, kT0, kT0 + 600)).ok());
  ASSERT_TRUE(l.Ingest(Key(), Sample(3, kT0 + 1200, kT0 + 1800)).ok());
  const auto before = l.Records();
  auto overlap = l.Ingest(Key(), Sample(2, kT0 + 500, kT0 + 700));
  EXPECT_EQ(overlap.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(overlap.status().message(), HasSubstr("overlaps seq 1"));
  auto overlap_next = l.Ingest(Key(), Sample(2, kT0 + 700, kT0 + 1300));
  EXPECT_THAT(overlap_next.status().message(), HasSubstr("overlaps seq 3"));
  auto conflict = l.Ingest(Key(), Sample(1, kT0, kT0 + 600, 900));
  EXPECT_EQ(conflict.status().code(), StatusCode::kAlreadyExists);
  auto order = l.Ingest(Key(), Sample(5, kT0 + 600, kT0 + 1200));
  EXPECT_THAT(order.status().message(), HasSubstr("out of order"));
  auto bad = l.Ingest(Key(), Sample(9, kT0 + 5000, kT0 + 5000));
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(SameRecords(before, l.Records()));
  // Another source may overlap freely; the late seq 2 between its neighbours is fine.
  EXPECT_TRUE(l.Ingest(Key("b"), Sample(2, kT0 + 500, kT0 + 700)).ok());
  EXPECT_TRUE(l.Ingest(Key(), Sample(2, kT0 + 600, kT0 + 1200)).ok());
}

// Check answers what Ingest would, and changes nothing (not even the sources).
TEST(Ledger, CheckAnswersAsIngestWouldWithoutChangingTheLedger) {
  Ledger l;
  ASSERT_TRUE(l.Ingest(Key(), Sample(1, kT0, kT0 + 600)).ok());
  ASSERT_TRUE(l.Ingest(Key(), Sample(3, kT0 + 1200, kT0 + 1800)).ok());
  const auto before = l.Records();
  EXPECT_EQ(*l.Check(Key(), Sample(1, kT0, kT0 + 600)), IngestResult::kDuplicate);
  EXPECT_EQ(*l.Check(Key(), Sample(2, kT0 + 600, kT0 + 1200)), IngestResult::kCounted);
  EXPECT_EQ(*l.Check(Key(), Sample(4, kT0 + 1800, kT0 + 2400)), IngestResult::kCounted);
  EXPECT_THAT(l.Check(Key(), Sample(2, kT0 + 500, kT0 + 700)).status().message(), HasSubstr("overlaps seq 1"));
  EXPECT_EQ(l.Check(Key(), Sample(1, kT0, kT0 + 600, 900)).status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(l.Check(Key(), Sample(9, kT0, kT0)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(*l.Check(Key("new"), Sample(1, kT0, kT0 + 600)), IngestResult::kCounted);
  EXPECT_EQ(l.sources().size(), 1u);  // "new" was not interned
  EXPECT_TRUE(SameRecords(before, l.Records()));
  EXPECT_EQ(l.counted(), 2);
  EXPECT_EQ(l.duplicates(), 0);
}

TEST(LedgerFile, RoundTripsAndListsEveryProblemWithItsLine) {
  const GpuModelCatalog& cat = GpuModelCatalog::Builtin();
  UsageSample s{Key(), Sample(1, kT0, kT0 + 600)};
  s.values.bytes_transferred = 42;
  UsageSample mig{{"a", "n1", "1", "A100-80GB", "3g.40gb", "w2"}, Sample(1, kT0, kT0 + 7200, 0)};
  const std::string text = RenderUsageLine(s) + "\n" + RenderUsageLine(mig) +
                           RenderSlaLine({"a", "2026-11", "guaranteed_wait_p99_s", 420'500'000}) + RenderUsageLine(s);
  auto f = ParseLedgerJsonl(text, "l.jsonl", cat);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->ledger.counted(), 2);
  EXPECT_EQ(f->ledger.duplicates(), 1);
  ASSERT_EQ(f->sla.size(), 1u);
  EXPECT_EQ(f->sla[0].value, 420'500'000);
  EXPECT_EQ(f->ledger.Records()[0].bytes_transferred, 42);

  UsageSample overlap = s;
  overlap.values.seq = 2;
  UsageSample bad_profile = mig;
  bad_profile.key.partition = "9g.90gb";
  bad_profile.key.workload = "w3";
  const std::string bad = RenderUsageLine(s) + "{not json\n" + RenderUsageLine(overlap) +
                          R"({"tenant":"a","node":"n","gpu":0,"model":"H999","partition":"share","workload":"x","seq":1,"start":"2026-11-01T00:00:00Z","end":"2026-11-01T00:00:10Z","gpu_milli_s_allocated":-5,"gpu_milli_s_used":0,"colour":"red"})"
                          "\n" + RenderUsageLine(bad_profile) + R"({"type":"sla","tenant":"a"})" "\n";
  auto e = ParseLedgerJsonl(bad, "bad.jsonl", cat);
  ASSERT_FALSE(e.ok());
  const std::string& m = e.status().message();
  EXPECT_THAT(m, HasSubstr("bad.jsonl:2: not a JSON object"));
  EXPECT_THAT(m, HasSubstr("bad.jsonl:3: overlaps seq 1"));
  EXPECT_THAT(m, HasSubstr("bad.jsonl:4: unknown field 'colour'"));
  EXPECT_THAT(m, HasSubstr("bad.jsonl:4: gpu_milli_s_allocated: negative value -5"));
  EXPECT_THAT(m, HasSubstr("bad.jsonl:4: model: unknown GPU model 'H999'"));
  EXPECT_THAT(m, HasSubstr("bad.jsonl:5: partition: '9g.90gb' is not whole, share or a MIG profile of A100-80GB"));
  EXPECT_THAT(m, HasSubstr("bad.jsonl:6: period: missing"));
}

// The control plane's and the simulator's SLA observations are hourly: "hour" instead of "period".
TEST(LedgerFile, HourlySlaLinesRoundTripAndABadHourIsNamed) {
  const GpuModelCatalog& cat = GpuModelCatalog::Builtin();
  const std::string line = RenderSlaLine({"a", "", "guaranteed_wait_p99_s", 900'000'000, kT0 + 3600});
  EXPECT_EQ(line, R"({"hour":"2026-11-01T01:00:00Z","metric":"guaranteed_wait_p99_s","tenant":"a","type":"sla","value":900.0})" "\n");
  auto f = ParseLedgerJsonl(line, "l.jsonl", cat);
  ASSERT_TRUE(f.ok()) << f.status().message();
  ASSERT_EQ(f->sla.size(), 1u);
  EXPECT_EQ(f->sla[0].hour, kT0 + 3600);
  EXPECT_EQ(f->sla[0].period, "");
  EXPECT_EQ(f->sla[0].value, 900'000'000);
  const std::string bad =
      R"({"type":"sla","tenant":"a","hour":"2026-11-01T01:30:00Z","metric":"m","value":1})" "\n"
      R"({"type":"sla","tenant":"a","hour":"2026-11-01T01:00:00Z","period":"2026-11","metric":"m","value":1})" "\n";
  auto e = ParseLedgerJsonl(bad, "bad.jsonl", cat);
  ASSERT_FALSE(e.ok());
  EXPECT_THAT(e.status().message(), HasSubstr("bad.jsonl:1: hour: expected the start of an hour"));
  EXPECT_THAT(e.status().message(), HasSubstr("bad.jsonl:2: hour: a line names a period or an hour, not both"));
}

TEST(LedgerFile, AFirstLineThatIsNotJsonSaysWhatTheFileLooksLike) {
  const GpuModelCatalog& cat = GpuModelCatalog::Builtin();
  auto message = [&](std::string_view text) { return ParseLedgerJsonl(text, "u.jsonl", cat).status().message(); };
  // One problem, not one per line of the wrong file.
  EXPECT_EQ(message("tenant,hour,gpus\nvision,0,2\nnlp,0,1\n"),
            "1 problem in the ledger:\n  u.jsonl:1: not a JSON object; it looks like CSV (commas, no '{'), so the "
            "rest was not read");
  EXPECT_EQ(message(std::string("\x1f\x8b\x08\x00\x00\n\x01\x02\n", 9)),
            "1 problem in the ledger:\n  u.jsonl:1: not a JSON object; it looks like gzip-compressed data, so the "
            "rest was not read");
  EXPECT_THAT(message(std::string("\n\x00\x01" "binary\n", 10)),
              HasSubstr("u.jsonl:2: not a JSON object; it looks like binary data"));  // the first non-blank line
  EXPECT_THAT(message("[{\"tenant\":\"a\"}]\n"), HasSubstr("u.jsonl:1: not a JSON object; it looks like a JSON array"));
  // A first line that looks like nothing in particular, and later lines, keep the plain problem.
  const std::string plain = message("{not json\nnor this\n");
  EXPECT_THAT(plain, HasSubstr("2 problems in the ledger:"));
  EXPECT_THAT(plain, HasSubstr("u.jsonl:1: not a JSON object\n"));
  EXPECT_THAT(plain, HasSubstr("u.jsonl:2: not a JSON object"));
  EXPECT_THAT(plain, ::testing::Not(HasSubstr("looks like")));
}

}  // namespace
}  // namespace tessera::metering
