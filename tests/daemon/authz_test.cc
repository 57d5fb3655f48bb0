// The role table and tenant isolation, action by action: another tenant's object is 404, what
// the caller sees but may not do is 403.
#include "src/daemon/authz.h"

#include <gtest/gtest.h>

#include <map>

namespace tessera::daemon {
namespace {

// acme -> {vision, speech}; vision -> {ranking}; other (a second root).
const std::map<std::string, std::string, std::less<>> kParents = {
    {"acme", ""}, {"vision", "acme"}, {"speech", "acme"}, {"ranking", "vision"}, {"other", ""}};

std::optional<std::string> ParentOfTree(std::string_view t) {
  auto it = kParents.find(t);
  if (it == kParents.end()) return std::nullopt;
  return it->second;
}

Decision Ask(Role role, const std::string& tenant, Action a, std::string_view target,
             Role new_role = Role::kTenantUser) {
  return Authorize({role, tenant}, a, target, ParentOfTree, new_role);
}

constexpr auto kAllow = Decision::kAllow;
constexpr auto k403 = Decision::kForbidden;
constexpr auto k404 = Decision::kNotFound;

TEST(Authz, HeaderExample) {
  EXPECT_EQ(Ask(Role::kTenantAdmin, "vision", Action::kChangeQuota, "ranking"), kAllow);
  EXPECT_EQ(Ask(Role::kTenantAdmin, "vision", Action::kChangeQuota, "vision"), k403);
  EXPECT_EQ(Ask(Role::kTenantAdmin, "vision", Action::kReadWorkload, "speech"), k404);
  EXPECT_EQ(Ask(Role::kTenantUser, "ranking", Action::kSubmitWorkload, "ranking"), kAllow);
  EXPECT_EQ(Ask(Role::kTenantUser, "ranking", Action::kChangeQuota, "ranking"), k403);
  EXPECT_EQ(Ask(Role::kNodeAgent, "", Action::kListTenants, ""), k403);
}

// RoleMayEver (the route wrapper's check where the handler finds the tenant) says yes exactly
// when Authorize allows the role the action on some tenant of the tree (or none).
TEST(Authz, RoleMayEverAgreesWithAuthorize) {
  const Action all[] = {Action::kReadTenant,    Action::kListTenants,    Action::kCreateTenant,  Action::kChangeQuota,
                        Action::kDeleteTenant,  Action::kSubmitWorkload, Action::kReadWorkload,  Action::kChangeWorkload,
                        Action::kCancelWorkload, Action::kCreateToken,   Action::kListTokens,    Action::kRevokeToken,
                        Action::kReadNodes,     Action::kNodeAgent,      Action::kReadUsage,     Action::kReadEvents,
                        Action::kReadInvoices,  Action::kReadAudit,      Action::kManageNodes,   Action::kReadMetrics};
  for (Role role : {Role::kAdmin, Role::kTenantAdmin, Role::kTenantUser, Role::kNodeAgent, Role::kViewer}) {
    const std::string own = role == Role::kAdmin || role == Role::kNodeAgent || role == Role::kViewer ? "" : "vision";
    for (Action a : all) {
      bool some = false;
      for (const char* target : {"", "acme", "vision", "ranking", "speech", "other"})
        for (Role made : {Role::kTenantAdmin, Role::kTenantUser})
          some = some || Ask(role, own, a, target, made) == kAllow;
      EXPECT_EQ(RoleMayEver(role, a), some) << RoleName(role) << " " << ActionText(a);
    }
  }
  EXPECT_FALSE(RoleMayEver(Role::kTenantUser, Action::kCreateToken));
  EXPECT_TRUE(RoleMayEver(Role::kTenantUser, Action::kSubmitWorkload));
  EXPECT_EQ(Ask(Role::kTenantAdmin, "vision", Action::kReadAudit, ""), k403);
  EXPECT_EQ(Ask(Role::kAdmin, "", Action::kManageNodes, ""), kAllow);
}

TEST(Authz, EventVisibilityFollowsWhatTheCallerMayRead) {
  auto sees = [](Role role, const std::string& tenant, std::string_view subject, std::string_view scope) {
    return MaySeeEvent({role, tenant}, subject, scope, ParentOfTree);
  };
  // The header's example.
  EXPECT_TRUE(sees(Role::kTenantAdmin, "vision", "tenant", "ranking"));
  EXPECT_TRUE(sees(Role::kTenantAdmin, "vision", "token", "ranking"));
  EXPECT_FALSE(sees(Role::kTenantAdmin, "vision", "node", ""));
  EXPECT_FALSE(sees(Role::kTenantAdmin, "vision", "tenant", "acme"));
  EXPECT_TRUE(sees(Role::kTenantUser, "vision", "tenant", "vision"));
  EXPECT_FALSE(sees(Role::kTenantUser, "vision", "token", "vision"));
  // Workloads: the subtree, as GET /v1/workloads.
  EXPECT_TRUE(sees(Role::kTenantUser, "vision", "workload", "ranking"));
  EXPECT_FALSE(sees(Role::kTenantUser, "vision", "workload", "speech"));
  // A deleted root's event (scope "") and admin tokens (no tenant): admins only.
  EXPECT_FALSE(sees(Role::kTenantAdmin, "acme", "tenant", ""));
  EXPECT_FALSE(sees(Role::kTenantAdmin, "acme", "token", ""));
  EXPECT_TRUE(sees(Role::kAdmin, "", "tenant", ""));
  EXPECT_TRUE(sees(Role::kAdmin, "", "token", ""));
  EXPECT_TRUE(sees(Role::kAdmin, "", "node", ""));
  EXPECT_TRUE(sees(Role::kAdmin, "", "workload", "speech"));
  // Node agents read nodes but no event stream is theirs (kReadEvents); an unknown subject: nobody.
  EXPECT_FALSE(sees(Role::kNodeAgent, "", "token", ""));
  EXPECT_FALSE(sees(Role::kAdmin, "", "gpu", ""));
}

TEST(Authz, AnotherTenantsObjectIsNotFoundForEveryTargetedAction) {
  for (Action a : {Action::kReadTenant, Action::kCreateTenant, Action::kChangeQuota, Action::kDeleteTenant,
                   Action::kSubmitWorkload, Action::kReadWorkload, Action::kChangeWorkload,
                   Action::kCancelWorkload, Action::kCreateToken, Action::kRevokeToken}) {
    for (Role r : {Role::kTenantAdmin, Role::kTenantUser}) {
      EXPECT_EQ(Ask(r, "vision", a, "speech"), k404) << static_cast<int>(a);
      EXPECT_EQ(Ask(r, "vision", a, "acme"), k404) << static_cast<int>(a);   // the parent too
      EXPECT_EQ(Ask(r, "vision", a, "other"), k404) << static_cast<int>(a);
      EXPECT_EQ(Ask(r, "vision", a, "nobody"), k404) << static_cast<int>(a);
    }
  }
  EXPECT_EQ(Ask(Role::kTenantUser, "vision", Action::kReadUsage, "speech"), k404);
  EXPECT_EQ(Ask(Role::kTenantUser, "vision", Action::kReadUsage, "ranking"), kAllow);
  EXPECT_EQ(Ask(Role::kTenantUser, "vision", Action::kReadInvoices, "speech"), k404);
  EXPECT_EQ(Ask(Role::kTenantAdmin, "vision", Action::kReadInvoices, "ranking"), kAllow);
  EXPECT_EQ(Ask(Role::kTenantUser, "vision", Action::kReadInvoices, ""), kAllow);  // filtered to its subtree
  EXPECT_EQ(Ask(Role::kNodeAgent, "", Action::kReadInvoices, ""), k403);
}

TEST(Authz, TenantUsersReadAndRunWorkButChangeNoQuotaAndNoToken) {
  for (Action a : {Action::kReadTenant, Action::kSubmitWorkload, Action::kReadWorkload,
                   Action::kChangeWorkload, Action::kCancelWorkload})
    EXPECT_EQ(Ask(Role::kTenantUser, "vision", a, "ranking"), kAllow);
  for (Action a : {Action::kCreateTenant, Action::kChangeQuota, Action::kDeleteTenant, Action::kCreateToken,
                   Action::kRevokeToken})
    EXPECT_EQ(Ask(Role::kTenantUser, "vision", a, "ranking"), k403);
  EXPECT_EQ(Ask(Role::kTenantUser, "vision", Action::kListTokens, ""), k403);
  EXPECT_EQ(Ask(Role::kTenantUser, "vision", Action::kListTenants, ""), kAllow);
  EXPECT_EQ(Ask(Role::kTenantUser, "vision", Action::kReadNodes, ""), k403);
  EXPECT_EQ(Ask(Role::kTenantUser, "vision", Action::kNodeAgent, ""), k403);
}

TEST(Authz, TenantAdminsManageBelowThemselvesAndMintNoStrongerToken) {
  EXPECT_EQ(Ask(Role::kTenantAdmin, "vision", Action::kCreateTenant, "vision"), kAllow);  // a child
  EXPECT_EQ(Ask(Role::kTenantAdmin, "vision", Action::kCreateTenant, ""), k403);         // a root
  EXPECT_EQ(Ask(Role::kTenantAdmin, "vision", Action::kDeleteTenant, "ranking"), kAllow);
  EXPECT_EQ(Ask(Role::kTenantAdmin, "vision", Action::kDeleteTenant, "vision"), k403);
  EXPECT_EQ(Ask(Role::kTenantAdmin, "vision", Action::kCreateToken, "ranking", Role::kTenantUser), kAllow);
  EXPECT_EQ(Ask(Role::kTenantAdmin, "vision", Action::kCreateToken, "vision", Role::kTenantAdmin), kAllow);
  EXPECT_EQ(Ask(Role::kTenantAdmin, "vision", Action::kCreateToken, "vision", Role::kAdmin), k403);
  EXPECT_EQ(Ask(Role::kTenantAdmin, "vision", Action::kCreateToken, "vision", Role::kNodeAgent), k403);
  EXPECT_EQ(Ask(Role::kTenantAdmin, "vision", Action::kCreateToken, "", Role::kNodeAgent), k403);
  EXPECT_EQ(Ask(Role::kTenantAdmin, "vision", Action::kListTokens, ""), kAllow);
  EXPECT_EQ(Ask(Role::kTenantAdmin, "vision", Action::kRevokeToken, "ranking"), kAllow);
}

TEST(Authz, AdminsAndNodeAgents) {
  for (Action a : {Action::kReadTenant, Action::kCreateTenant, Action::kChangeQuota, Action::kDeleteTenant,
                   Action::kSubmitWorkload, Action::kCreateToken, Action::kReadNodes, Action::kReadUsage,
                   Action::kReadInvoices})
    EXPECT_EQ(Ask(Role::kAdmin, "", a, "speech"), kAllow);
  EXPECT_EQ(Ask(Role::kAdmin, "", Action::kNodeAgent, ""), k403);
  EXPECT_EQ(Ask(Role::kNodeAgent, "", Action::kNodeAgent, ""), kAllow);
  EXPECT_EQ(Ask(Role::kNodeAgent, "", Action::kReadNodes, ""), kAllow);
  EXPECT_EQ(Ask(Role::kNodeAgent, "", Action::kSubmitWorkload, "vision"), k403);
}

// A viewer reads everything the dashboard shows, in every tenant, and changes nothing.
TEST(Authz, ViewersReadTheWholeClusterAndChangeNothing) {
  for (const char* tenant : {"acme", "ranking", "other"}) {
    for (Action a : {Action::kReadTenant, Action::kReadWorkload, Action::kReadUsage, Action::kReadInvoices})
      EXPECT_EQ(Ask(Role::kViewer, "", a, tenant), kAllow) << ActionText(a) << " " << tenant;
    for (Action a : {Action::kCreateTenant, Action::kChangeQuota, Action::kDeleteTenant, Action::kSubmitWorkload,
                     Action::kChangeWorkload, Action::kCancelWorkload, Action::kCreateToken, Action::kRevokeToken})
      EXPECT_EQ(Ask(Role::kViewer, "", a, tenant), k403) << ActionText(a) << " " << tenant;
  }
  for (Action a : {Action::kListTenants, Action::kReadNodes, Action::kReadEvents, Action::kReadMetrics})
    EXPECT_EQ(Ask(Role::kViewer, "", a, ""), kAllow) << ActionText(a);
  for (Action a : {Action::kListTokens, Action::kReadAudit, Action::kManageNodes, Action::kNodeAgent})
    EXPECT_EQ(Ask(Role::kViewer, "", a, ""), k403) << ActionText(a);
  EXPECT_TRUE(SeesAllTenants({Role::kViewer, ""}));
  EXPECT_FALSE(SeesAllTenants({Role::kTenantAdmin, "acme"}));
  // Events: workloads, tenants and nodes everywhere; no token event.
  EXPECT_TRUE(MaySeeEvent({Role::kViewer, ""}, "workload", "ranking", ParentOfTree));
  EXPECT_TRUE(MaySeeEvent({Role::kViewer, ""}, "tenant", "other", ParentOfTree));
  EXPECT_TRUE(MaySeeEvent({Role::kViewer, ""}, "node", "", ParentOfTree));
  EXPECT_FALSE(MaySeeEvent({Role::kViewer, ""}, "token", "vision", ParentOfTree));
}

TEST(Authz, SubtreeWalkAndRoleNames) {
  EXPECT_TRUE(InSubtree("ranking", "acme", ParentOfTree));
  EXPECT_TRUE(InSubtree("acme", "acme", ParentOfTree));
  EXPECT_FALSE(InSubtree("acme", "vision", ParentOfTree));
  EXPECT_FALSE(InSubtree("ghost", "acme", ParentOfTree));
  EXPECT_FALSE(InSubtree("acme", "", ParentOfTree));
  // A corrupt table with a cycle ends.
  auto cyclic = [](std::string_view t) -> std::optional<std::string> { return t == "a" ? "b" : "a"; };
  EXPECT_FALSE(InSubtree("a", "c", cyclic));
  for (Role r : {Role::kAdmin, Role::kTenantAdmin, Role::kTenantUser, Role::kNodeAgent, Role::kViewer})
    EXPECT_EQ(*ParseRole(RoleName(r)), r);
  EXPECT_FALSE(ParseRole("root").ok());
  EXPECT_NE(std::string(ParseRole("root").status().message()).find("viewer"), std::string::npos);
}

}  // namespace
}  // namespace tessera::daemon
