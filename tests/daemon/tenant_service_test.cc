// TenantService without HTTP (src/daemon/tenant_service.h): typed requests and a caller's check
// in, typed records out, against a real SQLite store and a stand-in scheduler (TenantWorld): the
// header's worked example, a tenant token that sees only its subtree, errors that name the field,
// Idempotency-Key replays, and refusals that write nothing and keep the scheduler's tree.
#include "src/daemon/tenant_service.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "tests/daemon/service_test_store.h"

namespace tessera::daemon {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using json = nlohmann::json;

class TenantServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    OpenServiceTestStore("tessera-tenant-service", dir_, db_);
    ASSERT_NE(db_, nullptr);
    TenantWorld world;
    world.mu = &mu_;
    world.set_tree = [this](sched::TenantTree tree) -> Status {
      if (!refuse_tree_.ok()) return refuse_tree_;
      tree_size_ = static_cast<size_t>(tree.size());
      return Status::Ok();
    };
    world.changed = [this] { ++changes_; };
    world.usage = [](std::string_view) -> std::optional<std::map<std::string, int64_t>> {
      return std::map<std::string, int64_t>{{"gpu_milli", 500}};
    };
    world.dominant_share = [this](std::string_view t) -> std::optional<double> {
      auto it = shares_.find(std::string(t));
      return it == shares_.end() ? std::nullopt : std::optional<double>(it->second);
    };
    service_ = std::make_unique<TenantService>(
        [this](std::string_view, const std::function<Status(store::Transaction&)>& fn) { return db_->Transact(fn); },
        clock_, std::move(world), GpuModelCatalog::Builtin());
    std::lock_guard<std::mutex> lock(mu_);
    ASSERT_TRUE(service_->Load({}).ok());
  }
  void TearDown() override {
    service_.reset();
    db_.reset();
    std::filesystem::remove_all(dir_);
  }
  // The control plane's check (Impl::Check) for `who`, over the service's own parent map.
  TenantCaller As(Principal who) {
    return {"tok_" + who.tenant, [this, who](Action action, std::string_view tenant, std::string_view what) -> Status {
              const Decision d = Authorize(who, action, tenant, service_->Parents());
              if (d == Decision::kAllow) return Status::Ok();
              if (d == Decision::kNotFound) return NotFoundError(std::string(what) + " not found");
              return Status(StatusCode::kPermissionDenied, "this token's role may not " + std::string(ActionText(action)));
            }};
  }
  TenantCaller Admin() { return As({Role::kAdmin, ""}); }
  static NewTenantRequest New(std::string name, std::optional<std::string> parent = std::nullopt, std::string key = "") {
    NewTenantRequest r;
    r.body.name = std::move(name);
    r.body.parent = std::move(parent);
    r.idempotency_key = std::move(key);
    return r;
  }
  int64_t Audits() {
    int64_t n = 0;
    EXPECT_TRUE(db_->Transact([&](store::Transaction& tx) -> Status {
      TESSERA_ASSIGN_OR_RETURN(auto all, tx.ListAudit(0, 1000));
      n = static_cast<int64_t>(all.size());
      return Status::Ok();
    }).ok());
    return n;
  }
  std::vector<std::string> Stored() {
    std::vector<std::string> names;
    EXPECT_TRUE(db_->Transact([&](store::Transaction& tx) -> Status {
      TESSERA_ASSIGN_OR_RETURN(auto all, tx.ListTenants());
      for (const auto& t : all) names.push_back(t.name);
      return Status::Ok();
    }).ok());
    return names;
  }
  static std::vector<std::string> Names(const std::vector<store::TenantRecord>& list) {
    std::vector<std::string> out;
    for (const auto& t : list) out.push_back(t.name);
    return out;
  }

  FakeClock clock_{FromUnixMillis(1'000'000)};  // declared first: the service reads it
  std::filesystem::path dir_;
  std::unique_ptr<store::Store> db_;
  std::mutex mu_;
  Status refuse_tree_ = Status::Ok();
  size_t tree_size_ = 0;
  int changes_ = 0;
  std::unique_ptr<TenantService> service_;
  std::map<std::string, double> shares_;  // the stand-in scheduler's dominant shares
};

// The header's example (tenant_service.h, FairShare): siblings ranked by dominant share, lowest
// first, ties by name; the roots are siblings of each other; a tenant the scheduler does not
// know has no position.
TEST_F(TenantServiceTest, FairSharePositionsRankSiblingsLowestFirst) {
  for (const char* root : {"acme", "other"}) ASSERT_TRUE(service_->Create(Admin(), New(root)).ok());
  for (const char* child : {"vision", "speech", "ads"}) ASSERT_TRUE(service_->Create(Admin(), New(child, "acme")).ok());
  shares_ = {{"acme", 0.5}, {"other", 0.2}, {"vision", 0.10}, {"speech", 0.40}, {"ads", 0.10}};
  const std::map<std::string, FairShare> f = service_->FairShares({"vision", "speech", "ads", "acme", "other", "ghost"});
  ASSERT_EQ(f.size(), 5u);
  EXPECT_EQ(f.at("ads").rank, 1);
  EXPECT_EQ(f.at("vision").rank, 2);
  EXPECT_EQ(f.at("speech").rank, 3);
  EXPECT_EQ(f.at("speech").of, 3);
  EXPECT_DOUBLE_EQ(f.at("speech").dominant_share, 0.40);
  EXPECT_EQ(f.at("other").rank, 1);
  EXPECT_EQ(f.at("acme").rank, 2);
  EXPECT_EQ(f.at("acme").of, 2);
  shares_.erase("ads");  // unknown to the scheduler: no position, and the others close ranks
  const std::map<std::string, FairShare> g = service_->FairShares({"ads", "vision"});
  EXPECT_EQ(g.count("ads"), 0u);
  EXPECT_EQ(g.at("vision").rank, 1);
  EXPECT_EQ(g.at("vision").of, 2);
}

TEST_F(TenantServiceTest, HeaderExample) {
  ASSERT_TRUE(service_->Create(Admin(), New("ml")).ok());
  StatusOr<CreatedTenant> child = service_->Create(Admin(), New("ml-a", "ml", "k1"));
  ASSERT_TRUE(child.ok()) << child.status().message();
  EXPECT_FALSE(child->replay);
  EXPECT_EQ(child->record.parent, "ml");
  EXPECT_EQ(child->record.created_ms, 1'000'000);
  EXPECT_EQ(tree_size_, 2u);
  EXPECT_EQ(changes_, 2);

  TenantBody change;
  change.default_qos = "Guaranteed";
  StatusOr<store::TenantRecord> changed = service_->Update(As({Role::kTenantAdmin, "ml"}), "ml-a", change);
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  EXPECT_EQ(TenantView(*changed)["default_qos"], "Guaranteed");
  EXPECT_EQ(changed->parent, "ml");  // what the change does not name stays

  EXPECT_THAT(Names(service_->List([&](std::string_view n) { return InSubtree(n, "ml", service_->Parents()); })),
              ElementsAre("ml", "ml-a"));
  const Status busy = service_->Delete(Admin(), "ml");
  EXPECT_EQ(busy.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(busy.message()), HasSubstr("has sub-tenants ('ml-a', ...)"));
  ASSERT_TRUE(service_->Delete(Admin(), "ml-a").ok());
  StatusOr<TenantInfo> gone = service_->Get(Admin(), "ml-a");
  EXPECT_EQ(gone.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(gone.status().message(), "tenant 'ml-a' not found");
  EXPECT_THAT(Stored(), ElementsAre("ml"));
  EXPECT_EQ(Audits(), 4);  // create, create, update, delete
  StatusOr<TenantInfo> ml = service_->Get(Admin(), "ml");
  ASSERT_TRUE(ml.ok());
  EXPECT_EQ(ml->usage->at("gpu_milli"), 500);
}

TEST_F(TenantServiceTest, ATenantTokenSeesAndChangesOnlyItsSubtree) {
  for (auto [name, parent] : {std::pair{"ml", ""}, {"ml-a", "ml"}, {"cv", ""}})
    ASSERT_TRUE(service_->Create(Admin(), New(name, parent[0] ? std::optional<std::string>(parent) : std::nullopt)).ok());
  const int64_t audits = Audits();
  const TenantCaller ml_admin = As({Role::kTenantAdmin, "ml"});
  const TenantCaller ml_user = As({Role::kTenantUser, "ml-a"});
  const ParentOf parents = service_->Parents();
  EXPECT_THAT(Names(service_->List([&](std::string_view n) { return InSubtree(n, "ml", parents); })),
              ElementsAre("ml", "ml-a"));
  EXPECT_THAT(Names(service_->List([&](std::string_view n) { return InSubtree(n, "ml-a", parents); })),
              ElementsAre("ml-a"));
  // Another subtree's tenant is not found (never "forbidden": its existence is not told).
  EXPECT_EQ(service_->Get(ml_admin, "cv").status().message(), "tenant 'cv' not found");
  EXPECT_EQ(service_->Update(ml_admin, "cv", TenantBody{}).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(service_->Delete(ml_admin, "cv").code(), StatusCode::kNotFound);
  EXPECT_EQ(service_->Create(ml_admin, New("ml-b", "cv")).status().code(), StatusCode::kNotFound);
  TenantBody move;
  move.parent = "cv";
  EXPECT_EQ(service_->Update(ml_admin, "ml-a", move).status().message(), "tenant 'ml-a' not found");
  // A root is nobody's subtree; a tenant-user may read but not change.
  EXPECT_EQ(service_->Create(ml_admin, New("top")).status().code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(service_->Get(ml_user, "ml-a").ok());
  EXPECT_EQ(service_->Delete(ml_user, "ml-a").code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(service_->Create(ml_admin, New("ml-b", "ml")).ok());
  EXPECT_EQ(Audits(), audits + 1);  // only the one allowed change was written
}

TEST_F(TenantServiceTest, ErrorsNameTheField) {
  std::string field;
  StatusOr<CreatedTenant> orphan = service_->Create(Admin(), New("a", "nobody"), &field);
  EXPECT_EQ(orphan.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(orphan.status().message(), "parent: unknown tenant 'nobody'");
  EXPECT_EQ(field, "parent");
  ASSERT_TRUE(service_->Create(Admin(), New("a"), &field).ok());
  EXPECT_EQ(field, "");
  TenantBody move;
  move.parent = "nobody";
  EXPECT_EQ(service_->Update(Admin(), "a", move, &field).status().message(), "parent: unknown tenant 'nobody'");
  EXPECT_EQ(field, "parent");
  EXPECT_EQ(service_->Create(Admin(), New("b", std::nullopt, "has space"), &field).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(field, "Idempotency-Key");
  // A quota the scheduler's tree refuses names the quota, and nothing is written.
  refuse_tree_ = InvalidArgumentError("tenant 'b': guaranteed over its parent's");
  EXPECT_EQ(service_->Create(Admin(), New("b", "a"), &field).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(field, "quota");
  EXPECT_THAT(Stored(), ElementsAre("a"));
  EXPECT_EQ(service_->Create(Admin(), New("a"), &field).status().code(), StatusCode::kAlreadyExists);
}

TEST_F(TenantServiceTest, AnIdempotencyKeyReplaysTheFirstAnswerAndRefusesAnotherTenant) {
  StatusOr<CreatedTenant> first = service_->Create(Admin(), New("a", std::nullopt, "k1"));
  ASSERT_TRUE(first.ok());
  clock_.Advance(std::chrono::seconds(5));  // the times differ; the request is the same
  StatusOr<CreatedTenant> again = service_->Create(Admin(), New("a", std::nullopt, "k1"));
  ASSERT_TRUE(again.ok()) << again.status().message();
  ASSERT_TRUE(again->replay);
  EXPECT_EQ(again->replay->status_code, 201);
  EXPECT_EQ(again->replay->body, TenantView(first->record).dump());
  EXPECT_EQ(Audits(), 1);
  std::string field;
  StatusOr<CreatedTenant> other = service_->Create(Admin(), New("b", std::nullopt, "k1"), &field);
  EXPECT_EQ(other.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(other.status().message()), StartsWith("Idempotency-Key: already used"));
  EXPECT_THAT(std::string(other.status().message()), HasSubstr("(tenant 'a')"));
  EXPECT_EQ(field, "Idempotency-Key");
  // Keys are the caller's: another token's "k1" is a new request.
  EXPECT_TRUE(service_->Create(As({Role::kAdmin, "x"}), New("b", std::nullopt, "k1")).ok());
  EXPECT_THAT(Stored(), ElementsAre("a", "b"));
}

TEST_F(TenantServiceTest, ATenantThatHadATokenIsKeptAndTheTreeStays) {
  ASSERT_TRUE(service_->Create(Admin(), New("a")).ok());
  ASSERT_TRUE(db_->Transact([](store::Transaction& tx) {
    store::TokenRecord t;
    t.id = "tok_1";
    t.hash_hex = "ab";
    t.role = "tenant-user";
    t.tenant = "a";
    return tx.CreateToken(t);
  }).ok());
  const int changes = changes_;
  const Status kept = service_->Delete(Admin(), "a");
  EXPECT_EQ(kept.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(kept.message()), HasSubstr("has 1 token (tok_1)"));
  EXPECT_EQ(changes_, changes);
  EXPECT_TRUE(service_->Get(Admin(), "a").ok());
  // WhileExists (the token service's guard) runs the write only for a tenant that exists.
  int writes = 0;
  EXPECT_TRUE(service_->WhileExists("a", [&] { ++writes; return Status::Ok(); }).ok());
  EXPECT_EQ(service_->WhileExists("zz", [&] { ++writes; return Status::Ok(); }).code(), StatusCode::kNotFound);
  EXPECT_EQ(writes, 1);
}

}  // namespace
}  // namespace tessera::daemon
