// Property tests of the invoice run: random ledgers and plans reconcile to the micro-unit against
// a reference computed straight from the samples; the reserved, burst and idle rules hold; resends
// change nothing.
#include "tessera/metering/invoice.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "tessera/metering/invoice_render.h"

namespace tessera::metering {
namespace {

using ::testing::HasSubstr;

const GpuModelCatalog& Cat() { return GpuModelCatalog::Builtin(); }
const int64_t kT0 = 1793491200;  // 2026-11-01T00:00:00Z
const char* const kMigProfiles[] = {"1g.10gb", "3g.40gb"};
const int kMigSlices[] = {1, 3};  // of 7

struct Case {
  std::vector<UsageSample> samples;
  std::vector<SlaObservation> sla;
  PricePlan plan;
};

Case RandomCase(uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto uni = [&](int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1)); };
  Case c;
  const int tenants = static_cast<int>(uni(1, 5));
  const int hours = static_cast<int>(uni(1, 30));
  for (int t = 0; t < tenants; ++t) {
    for (int w = 0; w < uni(1, 4); ++w) {
      const std::string model = uni(0, 3) == 0 ? "A10" : "A100-80GB";
      const int kind = static_cast<int>(uni(0, model == "A10" ? 1 : 3));
      const std::string partition = kind == 0 ? "whole" : kind == 1 ? "share" : kMigProfiles[kind - 2];
      SourceKey key{"t" + std::to_string(t), "n" + std::to_string(w % 2), std::to_string(w), model, partition,
                    "w" + std::to_string(w)};
      const int64_t milli = kind == 0 ? 1000 : kind == 1 ? uni(1, 1000) : 0;
      int64_t seq = 0;
      for (int h = 0; h < hours; ++h) {
        if (uni(0, 4) == 0) continue;
        int64_t at = kT0 + h * kSecondsPerHour + uni(0, 1800);
        while (at < kT0 + (h + 1) * kSecondsPerHour - 1 && uni(0, 2) != 0) {
          const int64_t end = std::min(at + uni(1, 1500), kT0 + (h + 1) * kSecondsPerHour);
          SampleValues v;
          v.seq = ++seq;
          v.start = at;
          v.end = end;
          v.gpu_milli_s_allocated = milli * (end - at);
          v.gpu_milli_s_used = uni(0, 1000 * (end - at));
          v.memory_mib_s = uni(0, 81920) * (end - at);
          v.peak_memory_mib = uni(0, 81920);
          c.samples.push_back({key, v});
          at = end + uni(0, 300);
        }
      }
    }
  }
  PricePlan& p = c.plan;
  ModelPrices& a = p.prices["A100-80GB"];
  a.gpu_hour = uni(0, 5'000'000);
  if (uni(0, 1)) a.milli_gpu_hour = uni(0, 5'000);
  if (uni(0, 1)) a.memory_gib_hour = uni(0, 20'000);
  for (const char* prof : kMigProfiles) a.mig[prof] = uni(0, 2'000'000);
  if (uni(0, 2) == 0) {
    const int64_t cut = uni(1, 10);
    a.tiers = {{0, cut, uni(0, 5'000'000)}, {cut, cut + uni(1, 10), uni(0, 5'000'000)}, {0, -1, uni(0, 5'000'000)}};
    a.tiers[2].from_gpu_hours = a.tiers[1].to_gpu_hours;
  }
  p.prices["A10"].gpu_hour = uni(1, 2'000'000);
  for (int t = 0; t < tenants; ++t) {
    if (uni(0, 2) == 0) {
      Reservation r{"t" + std::to_string(t), "A100-80GB", uni(1, 3000), uni(0, 3'000'000), std::nullopt};
      if (uni(0, 1)) r.burst_gpu_hour = uni(0, 9'000'000);
      p.reservations.push_back(r);
    }
    if (uni(0, 1)) c.sla.push_back({"t" + std::to_string(t), "2026-11", "wait_p99_s", uni(0, 600) * kMicroPerUnit});
  }
  if (uni(0, 1)) p.capacity_gpus["A100-80GB"] = uni(0, 12);
  if (uni(0, 1)) p.capacity_gpus["A10"] = uni(0, 4);
  p.idle = static_cast<IdlePolicy>(uni(0, 2));
  if (uni(0, 1)) p.sla_credits.push_back({"wait_p99_s", true, 300 * kMicroPerUnit, uni(0, 100) * kMicroPerUnit, {}});
  if (uni(0, 1)) p.sla_credits.push_back({"wait_p99_s", true, 100 * kMicroPerUnit, uni(0, 70) * kMicroPerUnit, {}});
  return c;
}

StatusOr<InvoiceRun> Bill(const Case& c, const std::vector<UsageSample>& samples) {
  Ledger l;
  for (const UsageSample& s : samples) {
    auto r = l.Ingest(s.key, s.values);
    if (!r.ok()) return r.status();
  }
  return ComputeInvoices(l.sources(), l.Records(), c.sla, c.plan, *ParsePeriod("2026-11"), Cat());
}

// The metered total straight from the samples (each inside one hour): every pool's exact total,
// rounded once. Credits are taken from the run's pre-credit totals (they are defined on them).
Micro ReferenceTotal(const Case& c, const InvoiceRun& run, int64_t hours) {
  const PricePlan& p = c.plan;
  const Int128 kG = 3'600'000;
  struct Use {
    std::map<int64_t, int64_t> basis_by_hour;
    Int128 whole = 0, share = 0, memory = 0;
    std::map<std::string, Int128> mig;
    std::map<std::pair<std::string, int64_t>, int64_t> mig_seconds;  // (source, hour) -> s
    std::map<std::pair<std::string, int64_t>, std::pair<int64_t, int64_t>> by_source_hour;  // allocated, used
  };
  std::map<std::pair<std::string, std::string>, Use> use;  // (tenant, model)
  for (const UsageSample& s : c.samples) {
    Use& u = use[{s.key.tenant, s.key.model}];
    const int64_t h = (s.values.start - kT0) / kSecondsPerHour;
    u.memory += s.values.memory_mib_s;
    if (s.key.partition == "whole" || s.key.partition == "share") {
      auto& [alloc, used] = u.by_source_hour[{s.key.partition + "|" + s.key.workload + "|" + s.key.node + "|" + s.key.gpu, h}];
      alloc += s.values.gpu_milli_s_allocated;
      used += s.values.gpu_milli_s_used;
    } else {
      u.mig[s.key.partition] += s.values.end - s.values.start;
      u.mig_seconds[{s.key.partition + "|" + s.key.workload + "|" + s.key.node + "|" + s.key.gpu, h}] +=
          s.values.end - s.values.start;
    }
  }
  // The cost basis: max(allocated, used) of each source's hour (the hourly record).
  for (auto& [tm, u] : use) {
    for (const auto& [sh, au] : u.by_source_hour) {
      const int64_t b = std::max(au.first, au.second);
      (sh.first.rfind("whole|", 0) == 0 ? u.whole : u.share) += b;
      u.basis_by_hour[sh.second] += b;
    }
  }
  std::map<std::string, std::pair<Int128, Int128>> pools;  // key -> (num, den)
  auto add = [&](const std::string& k, Int128 num, Int128 den) {
    pools[k].first += num;
    pools[k].second = den;
  };
  std::map<std::string, std::map<int64_t, int64_t>> held;  // model -> hour -> milli-s
  for (const auto& [tm, u] : use) {
    const auto& [tenant, model] = tm;
    const ModelPrices& mp = p.prices.at(model);
    const Reservation* r = nullptr;
    for (const Reservation& x : p.reservations) {
      if (x.tenant == tenant && x.model == model) r = &x;
    }
    const int64_t cap = r != nullptr ? r->gpu_milli * kSecondsPerHour : 0;
    for (int64_t h = 0; h < hours; ++h) {
      auto it = u.basis_by_hour.find(h);
      held[model][h] += std::max(it == u.basis_by_hour.end() ? 0 : it->second, cap);
    }
    for (const auto& [sh, secs] : u.mig_seconds) {
      const std::string prof = sh.first.substr(0, sh.first.find('|'));
      held[model][sh.second] += secs * 1000 * (prof == "1g.10gb" ? kMigSlices[0] : kMigSlices[1]) / 7;
    }
    if (r != nullptr) {
      Int128 over = 0;
      for (const auto& [h, b] : u.basis_by_hour) over += std::max<int64_t>(0, b - cap);
      add("res" + tenant, Int128{cap} * hours * r->gpu_hour, kG);
      add("burst" + model + std::to_string(r->burst_gpu_hour ? *r->burst_gpu_hour : *mp.gpu_hour), over *
          (r->burst_gpu_hour ? *r->burst_gpu_hour : *mp.gpu_hour), kG);
    } else if (!mp.tiers.empty()) {
      const Int128 q = u.whole + u.share;
      for (size_t k = 0; k < mp.tiers.size(); ++k) {
        const Int128 lo = mp.tiers[k].from_gpu_hours * kG;
        const Int128 hi = mp.tiers[k].to_gpu_hours < 0 ? q : std::min<Int128>(q, mp.tiers[k].to_gpu_hours * kG);
        if (hi > lo) add(model + "tier" + std::to_string(k), (hi - lo) * mp.tiers[k].gpu_hour, kG);
      }
    } else {
      add(model + "whole", u.whole * *mp.gpu_hour, kG);
      add(model + "share", mp.milli_gpu_hour ? u.share * *mp.milli_gpu_hour * 1000 : u.share * *mp.gpu_hour, kG);
    }
    for (const auto& [prof, secs] : u.mig) add(model + prof, secs * mp.mig.at(prof), 3600);
    if (mp.memory_gib_hour) add(model + "mem", u.memory * *mp.memory_gib_hour, 3600 * 1024);
  }
  for (const Reservation& r : p.reservations) {
    if (!use.count({r.tenant, r.model})) {
      add("res" + r.tenant, Int128{r.gpu_milli} * kSecondsPerHour * hours * r.gpu_hour, kG);
      for (int64_t h = 0; h < hours; ++h) held[r.model][h] += r.gpu_milli * kSecondsPerHour;
    }
  }
  for (const auto& [model, gpus] : p.capacity_gpus) {
    Int128 idle = 0;
    for (int64_t h = 0; h < hours; ++h) idle += std::max<int64_t>(0, gpus * 1000 * kSecondsPerHour - held[model][h]);
    add("idle" + model, idle * *p.prices.at(model).gpu_hour, kG);
  }
  Int128 total = 0;
  for (const auto& [k, nd] : pools) total += RoundHalfAway(nd.first, nd.second);
  // Credits: per rule, on each tenant's charges before credits.
  std::map<std::string, Micro> pre, given;
  for (const Invoice& inv : run.invoices) {
    for (const InvoiceLine& l : inv.lines) {
      if (l.charge_category != "Credit") pre[inv.tenant] += l.amount_micro;
    }
  }
  for (const SlaRule& rule : p.sla_credits) {
    Int128 num = 0;
    for (const SlaObservation& o : c.sla) {
      if (o.metric != rule.metric || !(o.value > rule.threshold) || pre[o.tenant] <= 0 || o.tenant == p.operator_account)
        continue;
      const Micro pct = std::min(rule.credit_percent, 100 * kMicroPerUnit - given[o.tenant]);
      if (pct <= 0) continue;
      given[o.tenant] += pct;
      num -= Int128{pre[o.tenant]} * pct;
    }
    total += RoundHalfAway(num, Int128{100} * kMicroPerUnit);
  }
  return static_cast<Micro>(total);
}

TEST(Invoice, RandomLedgersAndPlansReconcileToTheMicroUnit) {
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Case c = RandomCase(seed);
    auto run = Bill(c, c.samples);
    ASSERT_TRUE(run.ok()) << run.status().message();
    Micro sum = 0;
    for (const Invoice& inv : run->invoices) {
      Micro lines = 0;
      for (const InvoiceLine& l : inv.lines) lines += l.amount_micro;
      EXPECT_EQ(lines, inv.total_micro) << inv.tenant;
      sum += inv.total_micro;
    }
    EXPECT_EQ(sum, run->metered_total_micro);
    EXPECT_EQ(ReferenceTotal(c, *run, 720), run->metered_total_micro);
  }
}

TEST(Invoice, ReservedCapacityIsBilledUsedOrNotAndUseAboveItIsBurst) {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Case c = RandomCase(seed);
    auto run = Bill(c, c.samples);
    ASSERT_TRUE(run.ok()) << run.status().message();
    for (const Reservation& r : c.plan.reservations) {
      // Reference: per hour, min(use, R) covered and the rest burst.
      std::map<int64_t, int64_t> by_hour;
      std::map<std::pair<std::string, int64_t>, std::pair<int64_t, int64_t>> by_source_hour;
      for (const UsageSample& s : c.samples) {
        if (s.key.tenant != r.tenant || s.key.model != r.model || (s.key.partition != "whole" && s.key.partition != "share"))
          continue;
        auto& [alloc, used] = by_source_hour[{s.key.workload, (s.values.start - kT0) / 3600}];
        alloc += s.values.gpu_milli_s_allocated;
        used += s.values.gpu_milli_s_used;
      }
      for (const auto& [wh, au] : by_source_hour) by_hour[wh.second] += std::max(au.first, au.second);
      Int128 covered = 0, over = 0;
      const int64_t cap = r.gpu_milli * 3600;
      for (const auto& [h, b] : by_hour) covered += std::min(b, cap), over += std::max<int64_t>(0, b - cap);
      const Invoice* inv = nullptr;
      for (const Invoice& i : run->invoices) {
        if (i.tenant == r.tenant) inv = &i;
      }
      ASSERT_NE(inv, nullptr);
      Micro reserved = 0;
      bool burst_seen = false;
      for (const InvoiceLine& l : inv->lines) {
        if (l.model != r.model) continue;
        EXPECT_NE(l.resource, "gpu") << "on-demand compute of a reserved tenant: " << l.description;
        EXPECT_NE(l.resource, "gpu_share") << l.description;
        if (l.commitment_status == "Used") {
          EXPECT_EQ(l.quantity, FormatRational(covered, 3'600'000, 6));
        }
        if (l.commitment_status == "Unused") {
          EXPECT_EQ(l.quantity, FormatRational(Int128{cap} * 720 - covered, 3'600'000, 6));
        }
        if (l.resource == "reservation") reserved += l.amount_micro;
        if (l.resource == "burst") {
          burst_seen = true;
          EXPECT_EQ(l.quantity, FormatRational(over, 3'600'000, 6));
        }
      }
      EXPECT_EQ(reserved, static_cast<Micro>(RoundHalfAway(Int128{r.gpu_milli} * 720 * r.gpu_hour, 1000)));
      EXPECT_EQ(burst_seen, over > 0);
    }
  }
}

TEST(Invoice, ResendsAndLateSamplesChangeNothing) {
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    const Case c = RandomCase(seed);
    std::vector<UsageSample> noisy = c.samples;
    std::mt19937_64 rng(seed);
    for (const UsageSample& s : c.samples) {
      if (rng() % 2) noisy.push_back(s);
    }
    std::shuffle(noisy.begin(), noisy.end(), rng);
    auto a = Bill(c, c.samples), b = Bill(c, noisy);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(RenderInvoicesJson(*a), RenderInvoicesJson(*b)) << "seed " << seed;
  }
}

TEST(Invoice, OverlappingSamplesAreAnErrorNotADoubleCount) {
  Case c = RandomCase(5);
  ASSERT_FALSE(c.samples.empty());
  UsageSample twin = c.samples[0];
  twin.values.seq += 1000;
  std::vector<UsageSample> s = c.samples;
  s.push_back(twin);
  auto r = Bill(c, s);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("overlaps seq"));
}

TEST(Invoice, TheHeadersWorkedExample) {
  PricePlan p;
  p.prices["A100-80GB"].gpu_hour = 2'400'000;
  p.capacity_gpus["A100-80GB"] = 1;
  p.idle = IdlePolicy::kUniform;
  Ledger l;
  for (const char* t : {"a", "b"}) {
    SampleValues v;
    v.seq = 1;
    v.start = kT0;
    v.end = kT0 + 3600;
    v.gpu_milli_s_allocated = 250 * 3600;
    ASSERT_TRUE(l.Ingest({t, "n", "0", "A100-80GB", "share", "w"}, v).ok());
  }
  auto run = ComputeInvoices(l.sources(), l.Records(), {}, p, *ParsePeriod("2026-11"), Cat());
  ASSERT_TRUE(run.ok()) << run.status().message();
  // The idle capacity is every hour of the month but the first half hour-GPU.
  EXPECT_EQ(run->invoices.size(), 2u);
  EXPECT_EQ(run->invoices[0].lines[0].amount_micro, 600'000);
  const Micro idle = (720 * 2'400'000) - 1'200'000;
  EXPECT_EQ(run->invoices[0].lines[1].amount_micro, idle / 2);
  EXPECT_EQ(run->metered_total_micro, 720 * 2'400'000);

  // Rounding: three tenants, 1 milli-GPU for 1 s each at 2.40: 0.667 micro each -> 1, 1, 0.
  PricePlan q;
  q.prices["A100-80GB"].gpu_hour = 2'400'000;
  Ledger m;
  for (const char* t : {"a", "b", "c"}) {
    SampleValues v;
    v.seq = 1;
    v.start = kT0;
    v.end = kT0 + 1;
    v.gpu_milli_s_allocated = 1;
    ASSERT_TRUE(m.Ingest({t, "n", "0", "A100-80GB", "share", "w"}, v).ok());
  }
  auto r2 = ComputeInvoices(m.sources(), m.Records(), {}, q, *ParsePeriod("2026-11"), Cat());
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2->invoices[0].total_micro, 1);
  EXPECT_EQ(r2->invoices[1].total_micro, 1);
  EXPECT_EQ(r2->invoices[2].total_micro, 0);
  EXPECT_EQ(r2->metered_total_micro, 2);
}

// Hourly SLA observations (the control plane's, and the simulator's ledger): an invoice run tests
// the hours inside its period and its credit line names the worst that triggers the rule
// (invoice.h's example: hours of 120 s, 900 s and 400 s under "above 300").
TEST(Invoice, HourlySlaObservationsInsideThePeriodCreditOnceWithTheWorstHour) {
  PricePlan p;
  p.prices["A100-80GB"].gpu_hour = 2'400'000;
  p.sla_credits.push_back({"guaranteed_wait_p99_s", true, 300 * kMicroPerUnit, 10 * kMicroPerUnit, {}});
  Ledger l;
  SampleValues v;
  v.seq = 1;
  v.start = kT0;
  v.end = kT0 + 3600;
  v.gpu_milli_s_allocated = 1000 * 3600;
  ASSERT_TRUE(l.Ingest({"a", "n", "0", "A100-80GB", "whole", "w"}, v).ok());
  auto hour = [](int64_t h, Micro seconds) {
    return SlaObservation{"a", "", "guaranteed_wait_p99_s", seconds * kMicroPerUnit, kT0 + h * kSecondsPerHour};
  };
  const std::vector<SlaObservation> sla = {hour(0, 120), hour(1, 900), hour(2, 400), hour(240, 5000)};
  auto credit = [&](const char* period) -> std::vector<InvoiceLine> {
    auto run = ComputeInvoices(l.sources(), l.Records(), sla, p, *ParsePeriod(period), Cat());
    EXPECT_TRUE(run.ok()) << run.status().message();
    std::vector<InvoiceLine> out;
    for (const InvoiceLine& line : run->invoices.at(0).lines)
      if (line.charge_category == "Credit") out.push_back(line);
    return out;
  };
  const std::vector<InvoiceLine> week = credit("2026-11-01..2026-11-08");
  ASSERT_EQ(week.size(), 1u);
  EXPECT_EQ(week[0].description, "SLA credit: guaranteed_wait_p99_s 900.000000 > 300.000000");
  EXPECT_EQ(week[0].amount_micro, -240'000);  // 10 % of the hour's 2.40
  const std::vector<InvoiceLine> month = credit("2026-11");  // hour 240 (day 11) is in the month
  ASSERT_EQ(month.size(), 1u);
  EXPECT_EQ(month[0].description, "SLA credit: guaranteed_wait_p99_s 5000.000000 > 300.000000");
  // An hour outside the period does not count: hour 240 is after the first week.
  const std::vector<SlaObservation> quiet = {hour(0, 120), hour(240, 5000)};
  auto run = ComputeInvoices(l.sources(), l.Records(), quiet, p, *ParsePeriod("2026-11-01..2026-11-08"), Cat());
  ASSERT_TRUE(run.ok());
  for (const InvoiceLine& line : run->invoices.at(0).lines) EXPECT_NE(line.charge_category, "Credit") << line.description;
}

// What a tenant's token sees at the control plane: its invoices as the whole run priced them,
// a metered total and chargeback of those alone.
TEST(Invoice, ARunRestrictedToSomeAccountsShowsNothingOfTheOthers) {
  PricePlan p;
  p.prices["A100-80GB"].gpu_hour = 2'400'000;
  p.capacity_gpus["A100-80GB"] = 1;
  p.chargeback["a"] = {"acme", "ml"};
  p.chargeback["b"] = {"acme", "web"};
  Ledger l;
  for (const char* t : {"a", "b"}) {
    SampleValues v;
    v.seq = 1;
    v.start = kT0;
    v.end = kT0 + 3600;
    v.gpu_milli_s_allocated = 250 * 3600;
    ASSERT_TRUE(l.Ingest({t, "n", "0", "A100-80GB", "share", "w"}, v).ok());
  }
  auto run = ComputeInvoices(l.sources(), l.Records(), {}, p, *ParsePeriod("2026-11"), Cat());
  ASSERT_TRUE(run.ok()) << run.status().message();
  ASSERT_EQ(run->invoices.size(), 3u);  // a, b, operator (idle)
  const InvoiceRun only_a = RestrictToAccounts(*run, [](const std::string& t) { return t == "a"; });
  ASSERT_EQ(only_a.invoices.size(), 1u);
  EXPECT_EQ(only_a.invoices[0].tenant, "a");
  EXPECT_EQ(only_a.invoices[0].total_micro, 600'000);
  EXPECT_EQ(only_a.invoices[0].lines.size(), run->invoices[0].lines.size());
  EXPECT_EQ(only_a.metered_total_micro, 600'000);
  ASSERT_EQ(only_a.chargeback.size(), 1u);
  EXPECT_EQ(only_a.chargeback[0].organisation, "acme");
  EXPECT_EQ(only_a.chargeback[0].total_micro, 600'000);
  EXPECT_EQ(only_a.chargeback[0].teams, (std::vector<std::pair<std::string, Micro>>{{"ml", 600'000}}));
  EXPECT_EQ(only_a.period.name, "2026-11");
  // Everything shown: the run itself.
  const InvoiceRun all = RestrictToAccounts(*run, [](const std::string&) { return true; });
  EXPECT_EQ(all.metered_total_micro, run->metered_total_micro);
  EXPECT_EQ(RenderInvoicesJson(all), RenderInvoicesJson(*run));
}

TEST(Invoice, MissingPricesAreListed) {
  PricePlan p;
  p.prices["A10"].gpu_hour = 1;
  Ledger l;
  SampleValues v;
  v.seq = 1;
  v.start = kT0;
  v.end = kT0 + 60;
  v.gpu_milli_s_allocated = 60'000;
  ASSERT_TRUE(l.Ingest({"a", "n", "0", "A100-80GB", "3g.40gb", "w"}, v).ok());
  ASSERT_TRUE(l.Ingest({"a", "n", "1", "A100-80GB", "whole", "w"}, v).ok());
  auto run = ComputeInvoices(l.sources(), l.Records(), {}, p, *ParsePeriod("2026-11"), Cat());
  ASSERT_FALSE(run.ok());
  EXPECT_THAT(run.status().message(), HasSubstr("prices.A100-80GB.mig.3g.40gb"));
  EXPECT_THAT(run.status().message(), HasSubstr("prices.A100-80GB.gpu_hour"));
}

// Issue 31 item 7: `ctl invoices` on 4 December billed idle capacity for all of December (2,975
// GPU-hours against 1 of use). Idle capacity and reservations are billed for the observed hours
// only, and the run says the period is not complete.
constexpr int64_t kDec1 = 1796083200;  // 2026-12-01T00:00:00Z

Ledger OneWholeGpuHour(const std::string& tenant, int64_t at) {
  Ledger l;
  SampleValues v;
  v.seq = 1;
  v.start = at;
  v.end = at + 3600;
  v.gpu_milli_s_allocated = 1000 * 3600;
  EXPECT_TRUE(l.Ingest({tenant, "n", "0", "A100-80GB", "whole", "w"}, v).ok());
  return l;
}

TEST(Invoice, IdleCapacityIsBilledForTheObservedHoursOnly) {
  PricePlan p;
  p.prices["A100-80GB"].gpu_hour = 3'000'000;
  p.capacity_gpus["A100-80GB"] = 4;
  const Ledger l = OneWholeGpuHour("t", kDec1);
  const Period dec = *ParsePeriod("2026-12");
  // The whole month (the default): 4 x 744 - 1 = 2,975 GPU-hours idle, and complete.
  auto whole = ComputeInvoices(l.sources(), l.Records(), {}, p, dec, Cat());
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  EXPECT_TRUE(whole->complete);
  ASSERT_EQ(whole->invoices.size(), 2u);
  EXPECT_EQ(whole->invoices[0].tenant, "operator");
  EXPECT_EQ(whole->invoices[0].lines[0].quantity, "2975.000000");
  // Observed 2026-12-01 00:00 to 2026-12-04 10:00: 82 hours, 4 x 82 - 1 = 327 GPU-hours idle.
  InvoiceOptions o;
  o.observed_start = kDec1;
  o.observed_end = kDec1 + 82 * 3600;
  auto so_far = ComputeInvoices(l.sources(), l.Records(), {}, p, dec, Cat(), o);
  ASSERT_TRUE(so_far.ok()) << so_far.status().message();
  EXPECT_FALSE(so_far->complete);
  EXPECT_EQ(so_far->observed_start, kDec1);
  EXPECT_EQ(so_far->observed_end, kDec1 + 82 * 3600);
  ASSERT_EQ(so_far->invoices.size(), 2u);
  EXPECT_EQ(so_far->invoices[0].lines[0].quantity, "327.000000");
  EXPECT_EQ(so_far->invoices[0].total_micro, 327 * 3'000'000);
  EXPECT_EQ(so_far->invoices[1].total_micro, 3'000'000);  // the use is billed as before
  // A span that is not on whole hours is rounded out; one that covers the period is complete.
  o.observed_start = kDec1 - 5;
  o.observed_end = kDec1 + 81 * 3600 + 1;
  EXPECT_EQ(ComputeInvoices(l.sources(), l.Records(), {}, p, dec, Cat(), o)->invoices[0].lines[0].quantity,
            "327.000000");
  o.observed_end = kDec1 + 800 * 3600;
  EXPECT_TRUE(ComputeInvoices(l.sources(), l.Records(), {}, p, dec, Cat(), o)->complete);
  // The renderers say so.
  const std::string json = RenderInvoicesJson(*so_far);
  EXPECT_THAT(json, HasSubstr("\"complete\": false"));
  EXPECT_THAT(json, HasSubstr("\"observed_start\": \"2026-12-01T00:00:00Z\""));
  EXPECT_THAT(json, HasSubstr("\"observed_end\": \"2026-12-04T10:00:00Z\""));
  EXPECT_THAT(json, HasSubstr("\"observed_hours\": 82"));
  EXPECT_THAT(RenderInvoicesTable(*so_far),
              HasSubstr("Not complete: observed 2026-12-01T00:00:00Z to 2026-12-04T10:00:00Z (82 of 744 hours)"));
  EXPECT_THAT(RenderInvoicesJson(*whole), HasSubstr("\"complete\": true"));
}

TEST(Invoice, ReservationsAreCommittedForTheObservedHoursOnlyAndUseOutsideThemIsBurst) {
  PricePlan p;
  p.prices["A100-80GB"].gpu_hour = 3'000'000;
  p.reservations.push_back({"t", "A100-80GB", 1000, 2'000'000, 4'000'000});
  // Used in the first hour of December; observed hours 2 to 12 (10 hours) only.
  const Ledger l = OneWholeGpuHour("t", kDec1);
  InvoiceOptions o;
  o.observed_start = kDec1 + 2 * 3600;
  o.observed_end = kDec1 + 12 * 3600;
  auto run = ComputeInvoices(l.sources(), l.Records(), {}, p, *ParsePeriod("2026-12"), Cat(), o);
  ASSERT_TRUE(run.ok()) << run.status().message();
  ASSERT_EQ(run->invoices.size(), 1u);
  std::map<std::string, std::string> qty;
  for (const InvoiceLine& line : run->invoices[0].lines) qty[line.description] = line.quantity;
  EXPECT_EQ(qty["A100-80GB reserved (used)"], "0.000000");
  EXPECT_EQ(qty["A100-80GB reserved (unused)"], "10.000000");  // not 744
  EXPECT_EQ(qty["A100-80GB burst above reservation"], "1.000000");
  EXPECT_EQ(run->invoices[0].total_micro, 10 * 2'000'000 + 4'000'000);
}

// A month before the server existed billed the example plan's reservation (55,728 USD) to a
// tenant that does not exist there.
TEST(Invoice, NothingObservedBillsNoCapacityAndReservationsOfUnknownTenantsAreNotBilled) {
  PricePlan p;
  p.prices["A100-80GB"].gpu_hour = 3'000'000;
  p.capacity_gpus["A100-80GB"] = 4;
  p.reservations.push_back({"ghost", "A100-80GB", 8000, 1'500'000, std::nullopt});
  p.reservations.push_back({"t", "A100-80GB", 1000, 2'000'000, std::nullopt});
  const Ledger l = OneWholeGpuHour("t", kDec1);
  InvoiceOptions o;
  o.observed_start = o.observed_end = kDec1;  // nothing of November observed
  auto nov = ComputeInvoices(l.sources(), l.Records(), {}, p, *ParsePeriod("2026-11"), Cat(), o);
  ASSERT_TRUE(nov.ok()) << nov.status().message();
  EXPECT_FALSE(nov->complete);
  EXPECT_TRUE(nov->invoices.empty());
  EXPECT_EQ(nov->metered_total_micro, 0);
  EXPECT_THAT(RenderInvoicesJson(*nov), HasSubstr("\"observed_start\": null"));
  EXPECT_THAT(RenderInvoicesTable(*nov), HasSubstr("Not complete: nothing of 2026-11 was observed"));
  // December, observed whole, with only t existing: ghost's reservation is a note, not a line.
  o = {};
  o.tenant_exists = [](const std::string& t) { return t == "t"; };
  auto dec = ComputeInvoices(l.sources(), l.Records(), {}, p, *ParsePeriod("2026-12"), Cat(), o);
  ASSERT_TRUE(dec.ok()) << dec.status().message();
  std::vector<std::string> accounts;
  for (const Invoice& inv : dec->invoices) accounts.push_back(inv.tenant);
  EXPECT_EQ(accounts, (std::vector<std::string>{"operator", "t"}));
  EXPECT_EQ(dec->notes, std::vector<std::string>{"reservation ghost/A100-80GB not billed: tenant ghost does not exist"});
  // Idle: 4 GPUs minus t's reservation of 1 (it used 1 in the first hour, within it): 3 x 744.
  EXPECT_EQ(dec->invoices[0].lines[0].quantity, "2232.000000");
  EXPECT_THAT(RenderInvoicesTable(*dec), HasSubstr("Note: reservation ghost/A100-80GB not billed"));
  // A tenant's view carries no notes about the plan's other tenants.
  EXPECT_TRUE(RestrictToAccounts(*dec, [](const std::string& t) { return t == "t"; }).notes.empty());
}

TEST(Invoice, ObservedSpanIsTheLedgersFirstToLastHour) {
  Ledger l = OneWholeGpuHour("t", kDec1 + 1800);  // 00:30 to 01:30: hours 0 and 1
  EXPECT_EQ(ObservedSpan(l.Records()), (std::pair<int64_t, int64_t>{kDec1, kDec1 + 2 * 3600}));
  EXPECT_EQ(ObservedSpan({}), (std::pair<int64_t, int64_t>{0, 0}));
}

TEST(Invoice, UnpricedModelsAreThoseWithoutGpuHourOrTiers) {
  PricePlan p;
  p.prices["A100-80GB"].gpu_hour = 1;
  p.prices["T4"].tiers = {{0, -1, 1}};
  p.prices["A10"].milli_gpu_hour = 1;  // shares only: whole-GPU use and idle cannot be billed
  EXPECT_EQ(UnpricedModels(p, {"T4", "H100-80GB", "A100-80GB", "A10", "H100-80GB"}),
            (std::vector<std::string>{"A10", "H100-80GB"}));
  EXPECT_TRUE(UnpricedModels(p, {"A100-80GB", "T4"}).empty());
}

}  // namespace
}  // namespace tessera::metering
