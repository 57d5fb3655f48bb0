// UsageService without HTTP (src/daemon/usage_service.h): decoded batches in, what was stored out;
// a caller and a query in, the records it may see out; against a real SQLite store. The header's
// worked example, rejections in the batch's order naming their field, a failed transaction that
// leaves the ledger as the table, the ledger rebuilt from the store, and the hour window.
#include "src/daemon/usage_service.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "tests/daemon/service_test_store.h"

namespace tessera::daemon {
namespace {

using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;

constexpr int64_t kT0 = 1793491200;  // 2026-11-01T00:00:00Z

class UsageServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    OpenServiceTestStore("tessera-usage-service", dir_, db_);
    ASSERT_NE(db_, nullptr);
    ASSERT_TRUE(db_->Transact([](store::Transaction& tx) -> Status {
                     TESSERA_RETURN_IF_ERROR(tx.CreateTenant({.name = "acme"}));
                     TESSERA_RETURN_IF_ERROR(tx.CreateTenant({.name = "vision", .parent = "acme"}));
                     TESSERA_RETURN_IF_ERROR(tx.CreateTenant({.name = "other"}));
                     return tx.PutNode({.name = "n1", .state = NodeState::kReady});
                   }).ok());
    service_ = Make();
  }
  void TearDown() override {
    service_.reset();
    db_.reset();
    std::filesystem::remove_all(dir_);
  }
  std::unique_ptr<UsageService> Make() {
    return std::make_unique<UsageService>(
        [this](std::string_view op, const std::function<Status(store::Transaction&)>& fn) -> Status {
          if (op == "read" && fail_reads_) return Status(StatusCode::kUnavailable, "store down");
          return db_->Transact([&](store::Transaction& tx) -> Status {
            TESSERA_RETURN_IF_ERROR(fn(tx));
            // After the writes: the transaction rolls back.
            if (op == "usage" && fail_usage_) return Status(StatusCode::kUnavailable, "disk full");
            return Status::Ok();
          });
        },
        [this](std::string_view t) { return ParentOf(t); },
        [this](const store::UsageSampleRecord& s) { observed_.push_back(s.seq); });
  }
  std::optional<std::string> ParentOf(std::string_view t) const {
    auto it = parents_.find(std::string(t));
    return it == parents_.end() ? std::nullopt : std::optional<std::string>(it->second);
  }
  // The control plane's check (Impl::Check) for `who`.
  ReadCaller As(Principal who) {
    return {who, [this, who](Action action, std::string_view tenant, std::string_view what) -> Status {
              const Decision d =
                  Authorize(who, action, tenant, [this](std::string_view t) { return ParentOf(t); });
              if (d == Decision::kAllow) return Status::Ok();
              if (d == Decision::kNotFound) return NotFoundError(std::string(what) + " not found");
              return Status(StatusCode::kPermissionDenied, "this token's role may not " + std::string(ActionText(action)));
            }};
  }
  // Ten minutes of `tenant`'s workload on n1 gpu 0 from kT0 + start_min minutes: 1000 milli
  // allocated, 500 used, 4096 MiB.
  static UsageItem Item(size_t index, std::string tenant, std::string workload, int64_t seq, int64_t start_min) {
    UsageItem item;
    item.index = index;
    store::UsageSampleRecord& s = item.sample;
    s.node = "n1";
    s.tenant = std::move(tenant);
    s.workload = std::move(workload);
    s.gpu = "0";
    s.model = "A100-80GB";
    s.partition = "whole";
    s.seq = seq;
    s.start_s = kT0 + start_min * 60;
    s.end_s = s.start_s + 600;
    s.gpu_milli_s_allocated = 1000 * 600;
    s.gpu_milli_s_used = 500 * 600;
    s.memory_mib_s = 4096 * 600;
    s.peak_memory_mib = 4096;
    s.kernel_launches = 10;
    return item;
  }
  int64_t StoredSamples() {
    int64_t n = 0;
    EXPECT_TRUE(db_->Transact([&](store::Transaction& tx) -> Status {
                     TESSERA_ASSIGN_OR_RETURN(auto all, tx.ListUsageSamples({}, 1000));
                     n = static_cast<int64_t>(all.size());
                     return Status::Ok();
                   }).ok());
    return n;
  }

  std::filesystem::path dir_;
  std::unique_ptr<store::Store> db_;
  std::map<std::string, std::string> parents_ = {{"acme", ""}, {"vision", "acme"}, {"other", ""}};
  bool fail_reads_ = false;
  bool fail_usage_ = false;
  std::vector<int64_t> observed_;  // on_stored's samples, by seq
  std::unique_ptr<UsageService> service_;
};

TEST_F(UsageServiceTest, TheHeadersWorkedExample) {
  StatusOr<UsagePostResult> first = service_->Post("n1", {Item(0, "vision", "7", 1, 0)});
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_THAT(first->stored, ElementsAre(Field(&store::UsageSampleRecord::seq, 1)));
  EXPECT_EQ(first->duplicates, 0);
  EXPECT_TRUE(first->rejected.empty());
  StatusOr<UsagePostResult> again = service_->Post("n1", {Item(0, "vision", "7", 1, 0)});
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->stored.empty());
  EXPECT_EQ(again->duplicates, 1);
  StatusOr<UsagePostResult> unknown = service_->Post("n9", {Item(0, "vision", "7", 2, 10)});
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(unknown.status().message(), "node 'n9' not found");
  EXPECT_EQ(StoredSamples(), 1);
  EXPECT_THAT(observed_, ElementsAre(1));  // the stored one only, once

  StatusOr<UsageReport> acme = service_->Report(As({Role::kTenantUser, "acme"}), {});
  ASSERT_TRUE(acme.ok()) << acme.status().message();
  ASSERT_EQ(acme->tenants.size(), 1u);
  EXPECT_EQ(acme->tenants[0].tenant, "vision");
  EXPECT_EQ(acme->tenants[0].gpu_milli_s_allocated, 600'000);
  EXPECT_EQ(acme->tenants[0].gpu_milli_s_used, 300'000);
  ASSERT_EQ(acme->hours.size(), 1u);
  EXPECT_EQ(acme->hours[0].hour.hour, kT0);
  EXPECT_EQ(acme->hours[0].key.node, "n1");
  EXPECT_EQ(acme->hours[0].key.workload, "7");
  StatusOr<UsageReport> hidden = service_->Report(As({Role::kTenantUser, "other"}), {.tenant = "vision"});
  EXPECT_EQ(hidden.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(hidden.status().message(), "tenant 'vision' not found");
  StatusOr<UsageReport> own = service_->Report(As({Role::kTenantUser, "other"}), {});
  ASSERT_TRUE(own.ok());
  EXPECT_TRUE(own->hours.empty());  // other's own subtree: nothing
  EXPECT_EQ(service_->Report(As({Role::kNodeAgent, ""}), {}).status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(service_->Report(As({Role::kAdmin, ""}), {.tenant = "ghost"}).status().message(),
            "tenant 'ghost' not found");

  std::optional<ShareUse> use = service_->LastUse("n1", "0", "7");
  ASSERT_TRUE(use.has_value());
  EXPECT_EQ(use->end_s, kT0 + 600);
  EXPECT_EQ(use->memory_mib, 4096);
  EXPECT_EQ(use->used_milli, 500);
  EXPECT_FALSE(service_->LastUse("n1", "1", "7").has_value());
}

// NVML's figures (issue 32) are stored with the sample and shown in the newest use; a sample whose
// NVML utilisation is far above what the shim counted (issue 29) is a workload event with both
// figures, once per episode, and charges nothing.
TEST_F(UsageServiceTest, NvmlFiguresReachTheNewestUseAndAFarHigherNvmlUtilisationIsOneEventPerEpisode) {
  int64_t id = 0;
  ASSERT_TRUE(db_->Transact([&](store::Transaction& tx) -> Status {
                   TESSERA_ASSIGN_OR_RETURN(id, tx.InsertWorkload({.tenant = "vision", .seq = 1}));
                   return Status::Ok();
                 }).ok());
  const std::string w = std::to_string(id);
  auto item = [&](size_t index, int64_t seq, int64_t start_min, std::optional<int64_t> nvml) {
    UsageItem i = Item(index, "vision", w, seq, start_min);
    i.sample.gpu_milli_s_used = 120 * 600;  // the shim counted 120 milli
    i.sample.nvml_used_milli = nvml;
    i.sample.nvml_memory_mib = 4596;
    return i;
  };
  // 550 then 560 seen, 120 counted: under-reported twice in a row (one event); 300 ends the
  // episode (180 above); 900 starts a new one.
  StatusOr<UsagePostResult> out =
      service_->Post("n1", {item(0, 1, 0, 550), item(1, 2, 10, 560), item(2, 3, 20, 300), item(3, 4, 30, 900)});
  ASSERT_TRUE(out.ok()) << out.status().message();
  ASSERT_EQ(out->stored.size(), 4u);
  EXPECT_EQ(out->stored[0].nvml_used_milli, 550);
  std::vector<store::WorkloadEvent> events;
  ASSERT_TRUE(db_->Transact([&](store::Transaction& tx) -> Status {
                   TESSERA_ASSIGN_OR_RETURN(events, tx.ListWorkloadEvents(id));
                   return Status::Ok();
                 }).ok());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, "usage_under_reported");
  EXPECT_EQ(events[0].time_ms, (kT0 + 600) * 1000);
  EXPECT_EQ(events[0].detail,
            "NVML 550 milli, counted 120 milli (gpu_milli_s_used 72000 over 600 s) on n1 gpu 0, seq 1");
  EXPECT_THAT(events[1].detail, HasSubstr("NVML 900 milli"));
  std::optional<ShareUse> use = service_->LastUse("n1", "0", w);
  ASSERT_TRUE(use.has_value());
  EXPECT_EQ(use->used_milli, 120);
  EXPECT_EQ(use->nvml_used_milli, 900);
  EXPECT_EQ(use->nvml_memory_mib, 4596);
  // Without NVML's figure: absent in the newest use, and never under-reported.
  ASSERT_TRUE(service_->Post("n1", {item(0, 5, 40, std::nullopt)}).ok());
  use = service_->LastUse("n1", "0", w);
  ASSERT_TRUE(use.has_value());
  EXPECT_FALSE(use->nvml_used_milli.has_value());
  store::UsageSampleRecord fair = item(0, 6, 50, 500).sample;
  fair.gpu_milli_s_used = 300 * 600;
  EXPECT_FALSE(UnderReported(fair));  // 500 vs 300: 200 above, not 250
  fair.nvml_used_milli = 590;
  EXPECT_FALSE(UnderReported(fair));  // 290 above but not more than twice 300
  fair.nvml_used_milli = 601;
  fair.gpu_milli_s_used = 0;
  EXPECT_TRUE(UnderReported(fair));
}

TEST_F(UsageServiceTest, RejectionsNameTheirFieldInTheBatchsOrderAndTheRestIsStored) {
  UsageItem bad = Item(1, "vision", "7", 2, 10);
  bad.error = InvalidArgumentError("samples[1].end: must be after start");
  bad.field = "samples[1].end";
  UsageItem overlap = Item(3, "vision", "7", 3, 5);  // overlaps seq 1 of the same source
  StatusOr<UsagePostResult> out = service_->Post(
      "n1", {Item(0, "vision", "7", 1, 0), bad, Item(2, "nobody", "8", 1, 0), overlap, Item(4, "acme", "9", 1, 0)});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_THAT(out->stored, ElementsAre(Field(&store::UsageSampleRecord::tenant, "vision"),
                                       Field(&store::UsageSampleRecord::tenant, "acme")));
  ASSERT_EQ(out->rejected.size(), 3u);
  EXPECT_EQ(out->rejected[0].index, 1u);
  EXPECT_EQ(out->rejected[0].field, "samples[1].end");
  EXPECT_EQ(out->rejected[0].error, "samples[1].end: must be after start");
  EXPECT_EQ(out->rejected[1].field, "samples[2].tenant");
  EXPECT_EQ(out->rejected[1].error, "samples[2].tenant: unknown tenant 'nobody'");
  EXPECT_EQ(out->rejected[2].index, 3u);
  EXPECT_THAT(out->rejected[2].field, ::testing::StartsWith("samples[3]."));
  EXPECT_THAT(out->rejected[2].error, ::testing::StartsWith(out->rejected[2].field + ": "));
  EXPECT_EQ(StoredSamples(), 2);
}

TEST_F(UsageServiceTest, AFailedTransactionStoresNothingAndLeavesTheLedgerAsTheTable) {
  fail_usage_ = true;
  StatusOr<UsagePostResult> failed = service_->Post("n1", {Item(0, "vision", "7", 1, 0)});
  EXPECT_EQ(failed.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(StoredSamples(), 0);
  EXPECT_TRUE(observed_.empty());
  StatusOr<UsageReport> none = service_->Report(As({Role::kAdmin, ""}), {});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->hours.empty());  // the ledger forgot what it took
  fail_usage_ = false;
  StatusOr<UsagePostResult> resent = service_->Post("n1", {Item(0, "vision", "7", 1, 0)});
  ASSERT_TRUE(resent.ok());
  EXPECT_EQ(resent->stored.size(), 1u);  // stored now, not a duplicate
  EXPECT_EQ(StoredSamples(), 1);
}

TEST_F(UsageServiceTest, AStaleLedgerIsRebuiltBeforeItIsRead) {
  ASSERT_TRUE(service_->Post("n1", {Item(0, "vision", "7", 1, 0)}).ok());
  fail_usage_ = fail_reads_ = true;  // the write fails, and so does the rebuild after it
  EXPECT_FALSE(service_->Post("n1", {Item(0, "vision", "7", 2, 10)}).ok());
  EXPECT_EQ(service_->Read([](const metering::Ledger&) {}).code(), StatusCode::kUnavailable);
  EXPECT_EQ(service_->Report(As({Role::kAdmin, ""}), {}).status().code(), StatusCode::kUnavailable);
  fail_usage_ = fail_reads_ = false;
  size_t records = 0;
  ASSERT_TRUE(service_->Read([&](const metering::Ledger& l) { records = l.Records().size(); }).ok());
  EXPECT_EQ(records, 1u);  // seq 1 only, as the table
}

TEST_F(UsageServiceTest, RebuildReadsEveryStoredSampleIntoTheLedger) {
  ASSERT_TRUE(service_->Post("n1", {Item(0, "vision", "7", 1, 0), Item(1, "vision", "7", 2, 60),
                                    Item(2, "other", "8", 1, 0)})
                  .ok());
  std::unique_ptr<UsageService> fresh = Make();
  std::vector<std::string> seen;
  ASSERT_TRUE(fresh->Rebuild([&](const store::UsageSampleRecord& s) { seen.push_back(s.tenant); }).ok());
  EXPECT_EQ(seen.size(), 3u);
  StatusOr<UsageReport> before = service_->Report(As({Role::kAdmin, ""}), {});
  StatusOr<UsageReport> after = fresh->Report(As({Role::kAdmin, ""}), {});
  ASSERT_TRUE(before.ok() && after.ok());
  ASSERT_EQ(after->hours.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(after->hours[i].key, before->hours[i].key);
    EXPECT_EQ(after->hours[i].hour.gpu_milli_s_allocated, before->hours[i].hour.gpu_milli_s_allocated);
  }
  // By hour, then tenant.
  EXPECT_EQ(after->hours[0].key.tenant, "other");
  EXPECT_EQ(after->hours[1].key.tenant, "vision");
  EXPECT_EQ(after->hours[2].hour.hour, kT0 + 3600);
  EXPECT_FALSE(fresh->LastUse("n1", "0", "7").has_value());  // newest use is in memory only
}

TEST_F(UsageServiceTest, FromAndToSelectTheHoursThatOverlapTheWindow) {
  ASSERT_TRUE(service_->Post("n1", {Item(0, "vision", "7", 1, 0), Item(1, "vision", "7", 2, 60),
                                    Item(2, "vision", "7", 3, 120)})
                  .ok());
  StatusOr<UsageReport> r =
      service_->Report(As({Role::kViewer, ""}), {.tenant = "acme", .from_s = kT0 + 3599, .to_s = kT0 + 7200});
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->hours.size(), 2u);  // 00:00 overlaps [00:59:59, 02:00), 02:00 does not
  EXPECT_EQ(r->hours[0].hour.hour, kT0);
  EXPECT_EQ(r->hours[1].hour.hour, kT0 + 3600);
  ASSERT_EQ(r->tenants.size(), 1u);
  EXPECT_EQ(r->tenants[0].samples, 2);
  EXPECT_EQ(r->tenants[0].kernel_launches, 20);
}

}  // namespace
}  // namespace tessera::daemon
