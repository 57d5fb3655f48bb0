// WorkloadService without HTTP (src/daemon/workload_service.h): typed requests and a caller's
// check in, typed views out, against a real SQLite store (its group commit: submits go through
// TransactAsync) and a stand-in scheduler (WorkloadWorld): the header's worked example, a tenant
// token that sees only its subtree, refusals that name the field and write nothing, a key's
// first answer winning over a later refusal, and a cancel that overtakes its submit's queueing.
#include "src/daemon/workload_service.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "tests/daemon/service_test_store.h"

namespace tessera::daemon {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using json = nlohmann::json;

class WorkloadServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    OpenServiceTestStore("tessera-workload-service", dir_, db_);
    ASSERT_NE(db_, nullptr);
    // The stand-in tenants, stored too (a workload names its tenant).
    ASSERT_TRUE(db_->Transact([&](store::Transaction& tx) -> Status {
      for (const char* t : {"ml", "cv", "org"}) TESSERA_RETURN_IF_ERROR(tx.CreateTenant({t, "", tenant_specs_.at(t)}));
      return tx.CreateTenant({"org-a", "org", "{}"});
    }).ok());
    WorkloadWorld world;
    world.mu = &mu_;
    world.tenant_spec = [this](const std::string& t) -> const std::string* {
      auto it = tenant_specs_.find(t);
      return it == tenant_specs_.end() ? nullptr : &it->second;
    };
    world.is_leaf = [](const std::string& t) { return t != "org"; };
    world.default_model = [this] { return default_model_; };
    world.check_submit = [this](const sched::LiveJob&) { return admission_; };
    world.refused = [this](std::string_view tenant, int64_t) { refused_.push_back(std::string(tenant)); };
    world.enqueue = [this](int64_t id, const WorkloadShape& shape, int64_t) {
      EXPECT_FALSE(mu_.try_lock()) << "enqueue is called with the world lock held";
      EXPECT_EQ(shape.job.id, id);
      jobs_[id] = shape;
    };
    world.withdraw = [this](int64_t id, int64_t) {
      withdrawn_.push_back(id);
      return jobs_.erase(id) > 0;
    };
    world.known_shape = [this](int64_t id) -> const WorkloadShape* {
      auto it = jobs_.find(id);
      return it == jobs_.end() ? nullptr : &it->second;
    };
    world.check_share = [this](int64_t, int32_t more) -> Status {
      if (more > free_milli_) return FailedPreconditionError("GPU 0 of n1 has " + std::to_string(free_milli_) + " milli free");
      return Status::Ok();
    };
    world.restore = [this] {
      ++restores_;
      return Status::Ok();
    };
    world.wake = [this] { ++wakes_; };
    service_ = std::make_unique<WorkloadService>(
        [this](std::string_view, const std::function<Status(store::Transaction&)>& fn) { return db_->Transact(fn); },
        [this](std::string_view, std::function<Status(store::Transaction&)> fn, std::function<void(Status)> done) {
          db_->TransactAsync(std::move(fn), std::move(done));
        },
        clock_, std::move(world), GpuModelCatalog::Builtin());
  }
  void TearDown() override {
    service_.reset();
    db_.reset();
    std::filesystem::remove_all(dir_);
  }

  // The control plane's check (Impl::Check) for `who` over the stand-in tenants: ml, cv and org
  // roots, org-a below org.
  WorkloadCaller As(Principal who) {
    return {"tok_" + who.tenant, who, [who](Action action, std::string_view tenant, std::string_view what) -> Status {
              const ParentOf parents = [](std::string_view t) -> std::optional<std::string> {
                if (t == "org-a") return std::string("org");
                if (t == "ml" || t == "cv" || t == "org") return std::string();
                return std::nullopt;
              };
              const Decision d = Authorize(who, action, tenant, parents);
              if (d == Decision::kAllow) return Status::Ok();
              if (d == Decision::kNotFound) return NotFoundError(std::string(what) + " not found");
              return Status(StatusCode::kPermissionDenied, "this token's role may not " + std::string(ActionText(action)));
            }};
  }
  WorkloadCaller Admin() { return As({Role::kAdmin, ""}); }
  static SubmitWorkloadRequest Request(std::string_view body, std::string key = "") {
    std::string field;
    StatusOr<WorkloadRequest> r = DecodeWorkloadRequest(body, GpuModelCatalog::Builtin(), &field);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return {r.ok() ? *r : WorkloadRequest{}, std::move(key)};
  }
  // A whole submit: step 1, the write in the store's batch, and the finish (on this thread, as an
  // HTTP thread would run it).
  StatusOr<SubmittedWorkload> Submit(const WorkloadCaller& c, SubmitWorkloadRequest r, std::string* field = nullptr) {
    StatusOr<WorkloadService::CommitSubmit> commit = service_->Submit(c, std::move(r), field);
    if (!commit.ok()) return commit.status();
    return Durable(*commit)(field);
  }
  static WorkloadService::FinishSubmit Durable(const WorkloadService::CommitSubmit& commit) {
    std::promise<WorkloadService::FinishSubmit> made;
    std::future<WorkloadService::FinishSubmit> finish = made.get_future();
    commit([&made](WorkloadService::FinishSubmit f) { made.set_value(std::move(f)); });
    return finish.get();
  }
  int64_t Count(const std::string& what) {
    int64_t n = 0;
    EXPECT_TRUE(db_->Transact([&](store::Transaction& tx) -> Status {
      if (what == "audit") {
        TESSERA_ASSIGN_OR_RETURN(auto all, tx.ListAudit(0, 1000));
        n = static_cast<int64_t>(all.size());
      } else {
        TESSERA_ASSIGN_OR_RETURN(auto page, tx.ListWorkloadVersions({}, 1000, ""));
        n = static_cast<int64_t>(page.workloads.size());
      }
      return Status::Ok();
    }).ok());
    return n;
  }

  FakeClock clock_{FromUnixMillis(1'000'000)};  // declared first: the service reads it
  std::filesystem::path dir_;
  std::unique_ptr<store::Store> db_;
  std::mutex mu_;
  std::map<std::string, std::string> tenant_specs_ = {
      {"ml", "{}"}, {"cv", R"({"default_qos":"Guaranteed"})"}, {"org", "{}"}, {"org-a", "{}"}};
  Status admission_ = Status::Ok();
  std::optional<GpuModelId> default_model_ = *GpuModelCatalog::Builtin().Find("H100-80GB");
  std::vector<std::string> refused_;
  std::map<int64_t, WorkloadShape> jobs_;  // the stand-in scheduler's jobs
  std::vector<int64_t> withdrawn_;
  int32_t free_milli_ = 1000;
  int restores_ = 0;
  int wakes_ = 0;
  std::unique_ptr<WorkloadService> service_;
};

TEST_F(WorkloadServiceTest, HeaderExample) {
  const WorkloadCaller ml_user = As({Role::kTenantUser, "ml"});
  StatusOr<SubmittedWorkload> made = Submit(ml_user, Request(R"({"tenant":"ml","gpus":1})", "k1"));
  ASSERT_TRUE(made.ok()) << made.status().message();
  EXPECT_EQ(made->id, 1);
  EXPECT_FALSE(made->replay);
  ASSERT_EQ(jobs_.count(1), 1u);
  EXPECT_EQ(jobs_.at(1).request.tenant, "ml");
  EXPECT_EQ(wakes_, 1);

  StatusOr<SubmittedWorkload> again = Submit(ml_user, Request(R"({"tenant":"ml","gpus":1})", "k1"));
  ASSERT_TRUE(again.ok()) << again.status().message();
  ASSERT_TRUE(again->replay);
  EXPECT_EQ(again->replay->status_code, 201);
  EXPECT_EQ(json::parse(again->replay->body), json({{"id", 1}, {"state", "pending"}}));
  EXPECT_EQ(Count("workloads"), 1);

  StatusOr<api::WorkloadView> got = service_->Get(ml_user, "1");
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got->state, api::WorkloadState::kPending);
  EXPECT_EQ(got->wait_reason, "queued");
  EXPECT_EQ(got->created_ms, 1'000'000);
  ASSERT_TRUE(got->events);
  EXPECT_TRUE(got->events->empty());
  EXPECT_EQ(service_->Get(As({Role::kTenantUser, "cv"}), "1").status().message(), "workload 1 not found");

  StatusOr<WorkloadList> running = service_->List(ml_user, {.state = "running"});
  ASSERT_TRUE(running.ok()) << running.status().message();
  EXPECT_TRUE(running->views.empty());
  EXPECT_EQ(running->next_continue, "");

  StatusOr<WorkloadChange> change = DecodeWorkloadChange(R"({"priority": 5})", nullptr);
  ASSERT_TRUE(change.ok());
  StatusOr<api::WorkloadView> changed = service_->Change(ml_user, "1", *change);
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  EXPECT_EQ(changed->priority, 5);
  EXPECT_EQ(restores_, 1);

  clock_.Advance(std::chrono::seconds(5));
  StatusOr<api::WorkloadView> cancelled = service_->Cancel(ml_user, "1");
  ASSERT_TRUE(cancelled.ok()) << cancelled.status().message();
  EXPECT_EQ(cancelled->state, api::WorkloadState::kCancelled);
  EXPECT_EQ(cancelled->version, changed->version + 1);
  EXPECT_EQ(cancelled->updated_ms, 1'005'000);
  EXPECT_THAT(withdrawn_, ElementsAre(1));
  EXPECT_EQ(jobs_.count(1), 0u);
  const Status twice = service_->Cancel(ml_user, "1").status();
  EXPECT_EQ(twice.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(twice.message(), "workload 1 is already cancelled");

  StatusOr<api::WorkloadView> events = service_->Get(ml_user, "1");
  ASSERT_TRUE(events.ok() && events->events);
  ASSERT_EQ(events->events->size(), 2u);
  EXPECT_EQ((*events->events)[0].kind, "changed");
  EXPECT_EQ((*events->events)[1].kind, "cancelled");
  EXPECT_EQ(Count("audit"), 3);  // create, update, cancel
}

TEST_F(WorkloadServiceTest, ATenantTokenSeesAndChangesOnlyItsSubtree) {
  ASSERT_TRUE(Submit(Admin(), Request(R"({"tenant":"ml","gpus":1})")).ok());
  ASSERT_TRUE(Submit(Admin(), Request(R"({"tenant":"org-a","gpus":1})")).ok());
  const WorkloadCaller cv = As({Role::kTenantUser, "cv"});
  const WorkloadCaller org_a = As({Role::kTenantUser, "org-a"});
  const int64_t audits = Count("audit");
  // Another subtree's workload and tenant are not found, never forbidden.
  EXPECT_EQ(service_->Get(cv, "1").status().message(), "workload 1 not found");
  EXPECT_EQ(service_->Cancel(cv, "1").status().message(), "workload 1 not found");
  EXPECT_EQ(service_->Change(cv, "1", WorkloadChange{}).status().message(), "workload 1 not found");
  EXPECT_EQ(service_->Submit(cv, Request(R"({"tenant":"ml","gpus":1})")).status().message(), "tenant 'ml' not found");
  EXPECT_EQ(service_->List(cv, {.tenant = "ml"}).status().message(), "tenant 'ml' not found");
  EXPECT_TRUE(withdrawn_.empty());
  EXPECT_EQ(Count("audit"), audits);
  EXPECT_EQ(Count("workloads"), 2);
  // Each lists its own subtree; the admin every tenant's.
  StatusOr<WorkloadList> mine = service_->List(org_a, {});
  ASSERT_TRUE(mine.ok()) << mine.status().message();
  ASSERT_EQ(mine->views.size(), 1u);
  EXPECT_EQ(json::parse(mine->views[0])["tenant"], "org-a");
  EXPECT_EQ(service_->List(cv, {})->views.size(), 0u);
  EXPECT_EQ(service_->List(Admin(), {})->views.size(), 2u);
  // A viewer may read but not cancel.
  const WorkloadCaller viewer = As({Role::kViewer, ""});
  EXPECT_TRUE(service_->Get(viewer, "2").ok());
  EXPECT_EQ(service_->Cancel(viewer, "2").status().code(), StatusCode::kPermissionDenied);
}

TEST_F(WorkloadServiceTest, RefusalsNameTheFieldAndWriteNothing) {
  std::string field;
  const Status ghost = service_->Submit(Admin(), Request(R"({"tenant":"ghost","gpus":1})"), &field).status();
  EXPECT_EQ(ghost.code(), StatusCode::kNotFound);
  EXPECT_EQ(ghost.message(), "tenant 'ghost' not found");
  field.clear();
  const Status inner = service_->Submit(Admin(), Request(R"({"tenant":"org","gpus":1})"), &field).status();
  EXPECT_EQ(inner.message(), "tenant: 'org' has sub-tenants; submit to a leaf");
  EXPECT_EQ(field, "tenant");
  field.clear();
  const Status key = service_->Submit(Admin(), Request(R"({"tenant":"ml","gpus":1})", "has space"), &field).status();
  EXPECT_EQ(key.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(field, "Idempotency-Key");
  field.clear();
  default_model_ = std::nullopt;  // no nodes yet: a MIG profile without a model is ambiguous
  const Status model = service_->Submit(Admin(), Request(R"({"tenant":"ml","gpus":1,"mig_profile":"1g.10gb"})"), &field).status();
  EXPECT_EQ(model.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(field, "model") << model.message();
  default_model_ = *GpuModelCatalog::Builtin().Find("H100-80GB");
  // The scheduler's admission refusing is counted as a rejection; its message is the answer.
  admission_ = InvalidArgumentError("over the tenant's quota");
  field.clear();
  const Status quota = service_->Submit(Admin(), Request(R"({"tenant":"ml","gpus":1})"), &field).status();
  EXPECT_EQ(quota.message(), "over the tenant's quota");
  EXPECT_EQ(field, "");
  EXPECT_THAT(refused_, ElementsAre("ml"));
  EXPECT_EQ(Count("workloads"), 0);
  EXPECT_EQ(Count("audit"), 0);
  EXPECT_TRUE(jobs_.empty());

  field.clear();
  EXPECT_EQ(service_->List(Admin(), {.state = "done"}, &field).status().message(),
            "state: 'done' is not pending, running, completed, failed, cancelled or rejected");
  EXPECT_EQ(field, "state");
  EXPECT_EQ(service_->List(Admin(), {.limit = "0"}, &field).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(field, "limit");
  EXPECT_EQ(service_->List(Admin(), {.continue_from = "not-a-token"}, &field).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(field, "continue");
  EXPECT_EQ(service_->Get(Admin(), "x1").status().message(), "workload 'x1' not found");
  EXPECT_EQ(DecodeWorkloadChange(R"({"gpus": 2})", &field).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(field, "gpus");
}

// A retry whose key has a stored answer gets that answer, even when the world would refuse it
// now; the refusal is counted only when it is the answer.
TEST_F(WorkloadServiceTest, AKeysFirstAnswerWinsOverALaterRefusal) {
  ASSERT_TRUE(Submit(Admin(), Request(R"({"tenant":"ml","gpus":1})", "k")).ok());
  admission_ = InvalidArgumentError("over the tenant's quota");
  StatusOr<SubmittedWorkload> retry = Submit(Admin(), Request(R"({"tenant":"ml","gpus":1})", "k"));
  ASSERT_TRUE(retry.ok()) << retry.status().message();
  ASSERT_TRUE(retry->replay);
  EXPECT_EQ(json::parse(retry->replay->body)["id"], 1);
  EXPECT_TRUE(refused_.empty());
  std::string field = "stale";
  const Status fresh = Submit(Admin(), Request(R"({"tenant":"ml","gpus":1})", "k2"), &field).status();
  EXPECT_EQ(fresh.message(), "over the tenant's quota");
  EXPECT_EQ(field, "");
  EXPECT_THAT(refused_, ElementsAre("ml"));
  EXPECT_EQ(Count("workloads"), 1);
}

// The cancel of a workload whose submit is durable but not yet queued (its finish has not run):
// the scheduler never gets it.
TEST_F(WorkloadServiceTest, ACancelThatOvertakesTheQueueingKeepsTheJobOut) {
  StatusOr<WorkloadService::CommitSubmit> commit = service_->Submit(Admin(), Request(R"({"tenant":"ml","gpus":1})"));
  ASSERT_TRUE(commit.ok());
  WorkloadService::FinishSubmit finish = Durable(*commit);
  StatusOr<api::WorkloadView> cancelled = service_->Cancel(Admin(), "1");
  ASSERT_TRUE(cancelled.ok()) << cancelled.status().message();
  StatusOr<SubmittedWorkload> made = finish(nullptr);
  ASSERT_TRUE(made.ok());
  EXPECT_EQ(made->id, 1);
  EXPECT_TRUE(jobs_.empty());
}

TEST_F(WorkloadServiceTest, WorkNoNodeCanHoldWaitsAndTheTenantsDefaultQosApplies) {
  admission_ = FailedPreconditionError("no node of the cluster has 8 GPUs");
  StatusOr<SubmittedWorkload> made = Submit(Admin(), Request(R"({"tenant":"cv","gpus":8})"));
  ASSERT_TRUE(made.ok()) << made.status().message();
  EXPECT_EQ(service_->Get(Admin(), "1")->wait_reason, "no_fitting_node");
  ASSERT_EQ(jobs_.count(1), 1u);
  EXPECT_EQ(jobs_.at(1).request.qos, sched::QosClass::kGuaranteed);
  EXPECT_TRUE(refused_.empty());
}

TEST_F(WorkloadServiceTest, AChangeThatAltersTheModeOrNeedsMoreThanIsFreeIsRefused) {
  ASSERT_TRUE(Submit(Admin(), Request(R"({"tenant":"ml","gpus":1,"gpu_milli":300,"gpu_mem_mib":8192})")).ok());
  ASSERT_TRUE(Submit(Admin(), Request(R"({"tenant":"ml","gpus":1})")).ok());
  std::string field;
  const WorkloadChange fraction = *DecodeWorkloadChange(R"({"gpu_milli": 500, "gpu_mem_mib": 8192})", nullptr);
  const Status mode = service_->Change(Admin(), "2", fraction, &field).status();
  EXPECT_EQ(mode.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(mode.message()), HasSubstr("another mode"));
  free_milli_ = 100;
  const Status share = service_->Change(Admin(), "1", *DecodeWorkloadChange(R"({"gpu_milli": 500})", nullptr)).status();
  EXPECT_EQ(share.message(), "GPU 0 of n1 has 100 milli free");
  const Status range = service_->Change(Admin(), "1", *DecodeWorkloadChange(R"({"priority": 5000})", nullptr), &field).status();
  EXPECT_EQ(range.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(field, "priority");
  jobs_.erase(1);  // not queued yet
  EXPECT_EQ(service_->Change(Admin(), "1", WorkloadChange{}).status().message(), "workload 1 is being queued; retry");
  EXPECT_EQ(restores_, 0);
  free_milli_ = 1000;
  jobs_.clear();
  ASSERT_TRUE(Submit(Admin(), Request(R"({"tenant":"ml","gpus":1,"gpu_milli":300,"gpu_mem_mib":8192})")).ok());
  StatusOr<api::WorkloadView> more = service_->Change(Admin(), "3", *DecodeWorkloadChange(R"({"gpu_milli": 500})", nullptr));
  ASSERT_TRUE(more.ok()) << more.status().message();
  EXPECT_EQ(more->request.gpu_milli, 500);
  EXPECT_EQ(restores_, 1);
}

TEST_F(WorkloadServiceTest, AListIsPagedAndItsViewsAreCachedByVersion) {
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Submit(Admin(), Request(R"({"tenant":"ml","gpus":1})")).ok());
  StatusOr<WorkloadList> first = service_->List(Admin(), {.limit = "2"});
  ASSERT_TRUE(first.ok()) << first.status().message();
  ASSERT_EQ(first->views.size(), 2u);
  ASSERT_FALSE(first->next_continue.empty());
  StatusOr<WorkloadList> second = service_->List(Admin(), {.limit = "2", .continue_from = first->next_continue});
  ASSERT_TRUE(second.ok()) << second.status().message();
  ASSERT_EQ(second->views.size(), 1u);
  EXPECT_EQ(second->next_continue, "");
  // A cancel bumps the version: the next list shows the new state, not the cached view.
  ASSERT_TRUE(service_->Cancel(Admin(), std::to_string(json::parse(second->views[0])["id"].get<int64_t>())).ok());
  StatusOr<WorkloadList> again = service_->List(Admin(), {.limit = "2", .continue_from = first->next_continue});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(json::parse(again->views[0])["state"], "cancelled");
  StatusOr<WorkloadList> cancelled = service_->List(Admin(), {.state = "cancelled"});
  ASSERT_TRUE(cancelled.ok());
  EXPECT_EQ(cancelled->views.size(), 1u);
}

}  // namespace
}  // namespace tessera::daemon
