// TokenService without HTTP (src/daemon/token_service.h): typed requests and a caller's check in,
// typed records out, against a real SQLite store; the header's worked example, the last admin
// token that never expires, and a refusal by the caller's check that writes nothing.
#include "src/daemon/token_service.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "tests/daemon/service_test_store.h"

namespace tessera::daemon {
namespace {

using ::testing::HasSubstr;

class TokenServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    OpenServiceTestStore("tessera-token-service", dir_, db_);
    ASSERT_NE(db_, nullptr);
    ASSERT_TRUE(db_->Transact([](store::Transaction& tx) { return tx.CreateTenant({.name = "ml", .parent = ""}); }).ok());
    service_ = std::make_unique<TokenService>(
        [this](std::string_view, const std::function<Status(store::Transaction&)>& fn) { return db_->Transact(fn); },
        clock_,
        [this](std::string_view tenant, const std::function<Status()>& write) -> Status {
          if (tenant != "ml") return NotFoundError("tenant '" + std::string(tenant) + "' not found");
          return write();
        });
  }
  void TearDown() override {
    service_.reset();
    db_.reset();
    std::filesystem::remove_all(dir_);
  }
  // A caller whose check allows everything (an admin) or answers `refusal`.
  static TokenCaller Caller(Status refusal = Status::Ok()) {
    return {"tok_caller", [refusal](Action, std::string_view, Role) { return refusal; }};
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

  FakeClock clock_{FromUnixMillis(1'000'000)};  // declared first: the service reads it
  std::filesystem::path dir_;
  std::unique_ptr<store::Store> db_;
  std::unique_ptr<TokenService> service_;
};

TEST_F(TokenServiceTest, HeaderExample) {
  StatusOr<IssuedToken> made = service_->Create(Caller(), {.role = Role::kTenantUser, .tenant = "ml"});
  ASSERT_TRUE(made.ok()) << made.status().message();
  EXPECT_EQ(made->record.role, "tenant-user");
  EXPECT_THAT(made->secret, ::testing::StartsWith("tsr_"));
  StatusOr<store::TokenRecord> who = service_->Authenticate(made->secret);
  ASSERT_TRUE(who.ok()) << who.status().message();
  EXPECT_EQ(who->id, made->record.id);
  EXPECT_EQ(who->tenant, "ml");
  EXPECT_EQ(service_->List([](const store::TokenRecord&) { return true; }).size(), 1u);
  StatusOr<store::TokenRecord> revoked = service_->Revoke(Caller(), made->record.id);
  ASSERT_TRUE(revoked.ok()) << revoked.status().message();
  EXPECT_TRUE(revoked->revoked);
  EXPECT_EQ(service_->Authenticate(made->secret).status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(Audits(), 2);  // token.create, token.revoke
}

TEST_F(TokenServiceTest, ExpiryAndTheLastAdminTokenThatNeverExpires) {
  StatusOr<IssuedToken> brief = service_->Create(Caller(), {.role = Role::kAdmin, .expires_in_s = 60});
  StatusOr<IssuedToken> lasting = service_->Create(Caller(), {.role = Role::kAdmin});
  ASSERT_TRUE(brief.ok() && lasting.ok());
  StatusOr<store::TokenRecord> refused = service_->Revoke(Caller(), lasting->record.id);
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("no other admin token that never expires"));
  EXPECT_TRUE(service_->Revoke(Caller(), brief->record.id).ok());
  clock_.Advance(std::chrono::seconds(61));
  EXPECT_TRUE(service_->StillValid(lasting->record.hash_hex));
  EXPECT_FALSE(service_->StillValid(brief->record.hash_hex));
}

TEST_F(TokenServiceTest, ARefusalWritesNothingAndTenantlessTokensAreNotFound) {
  const Status denied(StatusCode::kPermissionDenied, "this token's role may not create this token");
  StatusOr<IssuedToken> made = service_->Create(Caller(denied), {.role = Role::kTenantUser, .tenant = "ml"});
  EXPECT_EQ(made.status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(service_->Create(Caller(), {.role = Role::kTenantUser, .tenant = "gone"}).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(Audits(), 0);
  StatusOr<IssuedToken> agent = service_->Create(Caller(), {.role = Role::kNodeAgent, .node = "n1"});
  ASSERT_TRUE(agent.ok());
  // A tenant-admin's check refuses a token of no tenant: it is in nobody's subtree, so 404.
  EXPECT_EQ(service_->Revoke(Caller(denied), agent->record.id).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(service_->Revoke(Caller(), "tok_nonexistent").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(service_->Authenticate(agent->secret).ok());
}

}  // namespace
}  // namespace tessera::daemon
