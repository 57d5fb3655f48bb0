// AuditService without HTTP (src/daemon/audit_service.h): the audit records of a real SQLite store
// in order, paged by after and limit, for admins only.
#include "src/daemon/audit_service.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>

#include "tests/daemon/service_test_store.h"

namespace tessera::daemon {
namespace {

using ::testing::ElementsAre;

class AuditServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    OpenServiceTestStore("tessera-audit-service", dir_, db_);
    ASSERT_NE(db_, nullptr);
    ASSERT_TRUE(db_->Transact([&](store::Transaction& tx) -> Status {
      for (const char* action : {"tenant.create", "token.create", "node.register"})
        TESSERA_RETURN_IF_ERROR(tx.AppendAudit({1000, "tok_admin", action, "x", "200"}).status());
      return Status::Ok();
    }).ok());
    service_ = std::make_unique<AuditService>(
        [this](std::string_view, const std::function<Status(store::Transaction&)>& fn) { return db_->Transact(fn); });
  }
  void TearDown() override {
    service_.reset();
    db_.reset();
    std::filesystem::remove_all(dir_);
  }
  // The control plane's check (Impl::Check) for a role; the audit log is about no tenant.
  static ReadCaller As(Role role) {
    const Principal who{role, role == Role::kTenantAdmin ? "ml" : ""};
    return {who, [who](Action action, std::string_view tenant, std::string_view what) -> Status {
              const Decision d = Authorize(who, action, tenant, [](std::string_view t) -> std::optional<std::string> {
                if (t == "ml") return std::string();
                return std::nullopt;
              });
              if (d == Decision::kAllow) return Status::Ok();
              if (d == Decision::kNotFound) return NotFoundError(std::string(what) + " not found");
              return Status(StatusCode::kPermissionDenied, "this token's role may not " + std::string(ActionText(action)));
            }};
  }
  static std::vector<std::string> Actions(const std::vector<store::AuditRecord>& records) {
    std::vector<std::string> out;
    for (const auto& r : records) out.push_back(std::to_string(r.seq) + " " + r.action);
    return out;
  }

  std::filesystem::path dir_;
  std::unique_ptr<store::Store> db_;
  std::unique_ptr<AuditService> service_;
};

TEST_F(AuditServiceTest, AnAdminReadsTheRecordsInOrderAPageAtATime) {
  StatusOr<std::vector<store::AuditRecord>> all = service_->List(As(Role::kAdmin), {});
  ASSERT_TRUE(all.ok()) << all.status().message();
  EXPECT_THAT(Actions(*all), ElementsAre("1 tenant.create", "2 token.create", "3 node.register"));
  EXPECT_EQ((*all)[1].prev_hash, (*all)[0].hash);  // the chain
  StatusOr<std::vector<store::AuditRecord>> page = service_->List(As(Role::kAdmin), {.after = 1, .limit = 1});
  ASSERT_TRUE(page.ok()) << page.status().message();
  EXPECT_THAT(Actions(*page), ElementsAre("2 token.create"));
  EXPECT_TRUE(service_->List(As(Role::kAdmin), {.after = 3})->empty());
}

TEST_F(AuditServiceTest, NoRoleButAnAdminsMayReadIt) {
  for (Role role : {Role::kViewer, Role::kTenantAdmin, Role::kNodeAgent}) {
    const Status st = service_->List(As(role), {}).status();
    EXPECT_EQ(st.code(), StatusCode::kPermissionDenied) << st.message();
    EXPECT_EQ(st.message(), "this token's role may not read the audit log (admins only)");
  }
}

}  // namespace
}  // namespace tessera::daemon
