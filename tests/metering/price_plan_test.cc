#include "tessera/metering/price_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessera::metering {
namespace {

using ::testing::HasSubstr;

const GpuModelCatalog& Cat() { return GpuModelCatalog::Builtin(); }

TEST(PricePlan, ParsesEveryRule) {
  const char* yaml = R"(currency: EUR
idle: proportional
operator_account: ops
capacity: {A100-80GB: 8}
prices:
  A100-80GB:
    gpu_hour: 2.40
    milli_gpu_hour: 0.0026
    memory_gib_hour: 0.002
    mig: {1g.10gb: 0.40, 3g.40gb: 1.15}
    tiers:
      - {from: 0, to: 500, gpu_hour: 2.40}
      - {from: 500, gpu_hour: 2.00}
reservations:
  - {tenant: vision, model: A100-80GB, gpus: 2, gpu_hour: 1.70, burst_gpu_hour: 3.00}
chargeback:
  - {tenant: vision, organisation: acme, team: ml}
sla_credits:
  - {metric: guaranteed_wait_p99_s, above: 300, credit_percent: 12.5, tenants: [vision]}
)";
  auto p = ParsePricePlanYaml(yaml, "plan.yaml", Cat());
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->currency, "EUR");
  EXPECT_EQ(p->idle, IdlePolicy::kProportional);
  EXPECT_EQ(p->operator_account, "ops");
  EXPECT_EQ(p->capacity_gpus.at("A100-80GB"), 8);
  const ModelPrices& a = p->prices.at("A100-80GB");
  EXPECT_EQ(*a.gpu_hour, 2'400'000);
  EXPECT_EQ(*a.milli_gpu_hour, 2'600);
  EXPECT_EQ(a.mig.at("3g.40gb"), 1'150'000);
  ASSERT_EQ(a.tiers.size(), 2u);
  EXPECT_EQ(a.tiers[1].from_gpu_hours, 500);
  EXPECT_EQ(a.tiers[1].to_gpu_hours, -1);
  ASSERT_EQ(p->reservations.size(), 1u);
  EXPECT_EQ(p->reservations[0].gpu_milli, 2000);
  EXPECT_EQ(*p->reservations[0].burst_gpu_hour, 3'000'000);
  EXPECT_EQ(p->chargeback.at("vision").organisation, "acme");
  ASSERT_EQ(p->sla_credits.size(), 1u);
  EXPECT_EQ(p->sla_credits[0].credit_percent, 12'500'000);
  EXPECT_EQ(p->sla_credits[0].threshold, 300'000'000);
}

TEST(PricePlan, ListsEveryProblemWithItsLine) {
  const char* yaml = R"(idle: sometimes
colour: blue
prices:
  H999: {gpu_hour: 1}
  A100-80GB:
    gpu_hour: -2.40
    mig: {9g.90gb: 1}
    tiers:
      - {from: 0, to: 500, gpu_hour: 2.40}
      - {from: 400, to: 300, gpu_hour: 2.00}
      - {from: 400, to: 900, gpu_hour: 2.00}
      - {from: 1000, gpu_hour: 1.5}
  A10: {mig: {1g.10gb: 1}, price: 3}
reservations:
  - {tenant: vision, model: A100-80GB, gpus: -1}
sla_credits:
  - {metric: wait, above: 1, below: 2, credit_percent: 150}
)";
  auto p = ParsePricePlanYaml(yaml, "bad.yaml", Cat());
  ASSERT_FALSE(p.ok());
  const std::string& m = p.status().message();
  EXPECT_THAT(m, HasSubstr("bad.yaml:1: idle: expected operator, uniform or proportional"));
  EXPECT_THAT(m, HasSubstr("bad.yaml:2: plan: unknown key 'colour'"));
  EXPECT_THAT(m, HasSubstr("bad.yaml:4: prices: unknown GPU model 'H999'"));
  EXPECT_THAT(m, HasSubstr("bad.yaml:6: prices.A100-80GB.gpu_hour: negative price -2.40"));
  EXPECT_THAT(m, HasSubstr("bad.yaml:7: prices.A100-80GB.mig: unknown MIG profile '9g.90gb'"));
  EXPECT_THAT(m, HasSubstr("bad.yaml:10: prices.A100-80GB.tiers: inverted tier: to 300 <= from 400"));
  EXPECT_THAT(m, HasSubstr("bad.yaml:11: prices.A100-80GB.tiers: tier from 400 overlaps the previous tier"));
  EXPECT_THAT(m, HasSubstr("bad.yaml:12: prices.A100-80GB.tiers: gap between tiers: from 1000, expected 900"));
  EXPECT_THAT(m, HasSubstr("bad.yaml:13: prices.A10.mig: A10 has no MIG profiles"));
  EXPECT_THAT(m, HasSubstr("bad.yaml:13: prices.A10: unknown key 'price'"));
  EXPECT_THAT(m, HasSubstr("bad.yaml:15: reservations.gpus: negative value -1"));
  EXPECT_THAT(m, HasSubstr("bad.yaml:15: reservations: missing gpu_hour"));
  EXPECT_THAT(m, HasSubstr("bad.yaml:17: sla_credits.credit_percent: above 100"));
  EXPECT_THAT(m, HasSubstr("bad.yaml:17: sla_credits: give exactly one of above, below"));
}

TEST(PricePlan, BadYamlAndOpenTiersAreReported) {
  auto p = ParsePricePlanYaml("prices: [\n", "x.yaml", Cat());
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("x.yaml:"));
  auto closed = ParsePricePlanYaml("prices:\n  A10:\n    tiers:\n      - {from: 0, to: 5, gpu_hour: 1}\n", "t.yaml", Cat());
  ASSERT_FALSE(closed.ok());
  EXPECT_THAT(closed.status().message(), HasSubstr("t.yaml:4: prices.A10.tiers: the last tier must be unbounded"));
  EXPECT_FALSE(ParsePricePlanYaml("", "e.yaml", Cat()).ok());
  // A key given twice in one model's prices (found by price_plan_fuzzer: two tier lists were
  // appended into one, an open tier in the middle).
  auto twice = ParsePricePlanYaml(
      "prices:\n  A10:\n    tiers:\n      - {from: 0, gpu_hour: 1}\n    tiers:\n      - {from: 0, gpu_hour: 2}\n",
      "d.yaml", Cat());
  ASSERT_FALSE(twice.ok());
  EXPECT_THAT(twice.status().message(), HasSubstr("d.yaml:5: prices.A10.tiers: given twice"));
  // Bounds that keep the exact arithmetic inside 128 bits.
  auto big = ParsePricePlanYaml("capacity: {A10: 9999999}\nprices:\n  A10: {gpu_hour: 20000}\n", "b.yaml", Cat());
  ASSERT_FALSE(big.ok());
  EXPECT_THAT(big.status().message(), HasSubstr("b.yaml:1: capacity: 9999999 is above the largest value accepted"));
  EXPECT_THAT(big.status().message(), HasSubstr("b.yaml:3: prices.A10.gpu_hour: 20000 is above the largest value"));
  // A count of 19 digits (found by price_plan_fuzzer: the digits were summed past int64).
  auto huge = ParsePricePlanYaml("capacity: {A10: 6666666666666666666}\n", "h.yaml", Cat());
  ASSERT_FALSE(huge.ok());
  EXPECT_THAT(huge.status().message(),
              HasSubstr("h.yaml:1: capacity: 6666666666666666666 is above the largest value accepted"));
}

}  // namespace
}  // namespace tessera::metering
