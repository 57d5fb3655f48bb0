// InvoiceService without HTTP (src/daemon/invoice_service.h): a caller's check and a decoded query
// in, the invoice run the caller may see out, over a ledger built here; the header's worked
// example (an admin's whole run, a tenant's subtree only) and every refusal.
#include "src/daemon/invoice_service.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <optional>

namespace tessera::daemon {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr int64_t kT0 = 1793491200;  // 2026-11-01T00:00:00Z
constexpr const char* kPlan = R"(currency: USD
idle: operator
capacity: {A100-80GB: 1}
prices:
  A100-80GB: {gpu_hour: 2.40}
)";

class InvoiceServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StatusOr<metering::PricePlan> plan = metering::ParsePricePlanYaml(kPlan, "plan.yaml", GpuModelCatalog::Builtin());
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    plan_ = *plan;
    // vision held the GPU for the first hour of November.
    const metering::SourceKey vision{"vision", "n1", "0", "A100-80GB", "whole", "1"};
    ASSERT_TRUE(ledger_.Ingest(vision, {.seq = 1, .start = kT0, .end = kT0 + 3600, .gpu_milli_s_allocated = 3'600'000}).ok());
  }
  std::unique_ptr<InvoiceService> Service(const metering::PricePlan* plan) {
    return std::make_unique<InvoiceService>(
        plan, "plan.yaml", GpuModelCatalog::Builtin(), clock_,
        [this](std::string_view t) -> std::optional<std::string> {
          auto it = parents_.find(std::string(t));
          if (it == parents_.end()) return std::nullopt;
          return it->second;
        },
        [this](const metering::Period& period) -> StatusOr<LedgerSlice> {
          LedgerSlice out;
          out.sources = ledger_.sources();
          const std::vector<metering::HourlyRecord> all = ledger_.Records();
          out.observed_start = metering::ObservedSpan(all).first;
          out.observed_any = !all.empty();
          for (const auto& h : all)
            if (h.hour >= period.start && h.hour < period.end) out.records.push_back(h);
          return out;
        });
  }
  // The control plane's check (Impl::Check) for `who` over the tenants here.
  ReadCaller As(Principal who) {
    return {who, [this, who](Action action, std::string_view tenant, std::string_view what) -> Status {
              const ParentOf parents = [this](std::string_view t) -> std::optional<std::string> {
                auto it = parents_.find(std::string(t));
                if (it == parents_.end()) return std::nullopt;
                return it->second;
              };
              const Decision d = Authorize(who, action, tenant, parents);
              if (d == Decision::kAllow) return Status::Ok();
              if (d == Decision::kNotFound) return NotFoundError(std::string(what) + " not found");
              return Status(StatusCode::kPermissionDenied, "this token's role may not " + std::string(ActionText(action)));
            }};
  }
  static std::vector<std::string> Accounts(const metering::InvoiceRun& run) {
    std::vector<std::string> out;
    for (const auto& i : run.invoices) out.push_back(i.tenant);
    return out;
  }

  const FakeClock clock_{Clock::TimePoint(std::chrono::seconds(kT0 + 5 * 3600 + 600))};  // 2026-11-01T05:10Z
  metering::PricePlan plan_;
  metering::Ledger ledger_;
  std::map<std::string, std::string> parents_{{"acme", ""}, {"vision", "acme"}, {"other", ""}};
};

TEST_F(InvoiceServiceTest, HeaderExample) {
  auto service = Service(&plan_);
  StatusOr<metering::InvoiceRun> all = service->Run(As({Role::kAdmin, ""}), {});
  ASSERT_TRUE(all.ok()) << all.status().message();
  EXPECT_EQ(all->period.name, "2026-11");
  EXPECT_FALSE(all->complete);
  EXPECT_EQ(all->observed_start, kT0);
  EXPECT_EQ(all->observed_end, kT0 + 5 * 3600);
  EXPECT_THAT(Accounts(*all), ElementsAre("operator", "vision"));
  StatusOr<metering::InvoiceRun> mine = service->Run(As({Role::kTenantUser, "vision"}), {});
  ASSERT_TRUE(mine.ok()) << mine.status().message();
  ASSERT_THAT(Accounts(*mine), ElementsAre("vision"));
  EXPECT_EQ(mine->metered_total_micro, mine->invoices[0].total_micro);
  EXPECT_EQ(mine->invoices[0].total_micro, all->invoices[1].total_micro);  // the same in every view
  // An admin naming acme sees its subtree.
  StatusOr<metering::InvoiceRun> acme = service->Run(As({Role::kAdmin, ""}), {.tenant = "acme"});
  ASSERT_TRUE(acme.ok());
  EXPECT_THAT(Accounts(*acme), ElementsAre("vision"));
}

TEST_F(InvoiceServiceTest, Refusals) {
  auto service = Service(&plan_);
  const ReadCaller vision = As({Role::kTenantUser, "vision"});
  EXPECT_EQ(service->Run(vision, {.tenant = "other"}).status().message(), "tenant 'other' not found");
  EXPECT_EQ(service->CheckTenant(vision, "other").code(), StatusCode::kNotFound);
  EXPECT_EQ(service->Run(As({Role::kAdmin, ""}), {.tenant = "nobody"}).status().message(), "tenant 'nobody' not found");
  EXPECT_EQ(service->Run(As({Role::kNodeAgent, ""}), {}).status().code(), StatusCode::kPermissionDenied);
  StatusOr<metering::InvoiceRun> week = service->Run(vision, {.period = "2026-11-01..2026-11-08"});
  EXPECT_EQ(week.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(week.status().message()), StartsWith("period: expected a calendar month"));
  EXPECT_EQ(Service(nullptr)->Run(vision, {}).status().code(), StatusCode::kUnimplemented);
  // A plan without the ledger's model: the admin is told what is missing, a tenant only the fact.
  StatusOr<metering::PricePlan> h100 = metering::ParsePricePlanYaml(
      "currency: USD\nidle: operator\nprices:\n  H100-80GB: {gpu_hour: 4}\n", "h100.yaml", GpuModelCatalog::Builtin());
  ASSERT_TRUE(h100.ok()) << h100.status().message();
  auto lacking = Service(&*h100);
  const Status told = lacking->Run(As({Role::kAdmin, ""}), {}).status();
  EXPECT_EQ(told.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(told.message()), AllOf(StartsWith("plan.yaml: "), HasSubstr("A100-80GB")));
  EXPECT_EQ(lacking->Run(vision, {}).status().message(), "the price plan cannot bill this period's usage; ask an admin");
}

}  // namespace
}  // namespace tessera::daemon
