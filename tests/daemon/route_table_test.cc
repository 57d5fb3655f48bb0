// The control plane's route table (ApiRoutes in src/daemon/control_plane.cc): every route is
// authorised by an Action in the one wrapper, and a route without one is refused when the routes
// are installed (ControlPlane::Create fails), so a new handler cannot be reached unauthorised.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "src/daemon/control_plane_impl.h"

namespace tessera::daemon {
namespace {

using ::testing::HasSubstr;

TEST(RouteTable, EveryRouteHasAnActionAndAHandler) {
  for (bool metrics_auth : {false, true}) {
    const std::vector<ApiRoute>& routes = ApiRoutes(metrics_auth);
    EXPECT_TRUE(CheckApiRoutes(routes).ok()) << CheckApiRoutes(routes).message();
    std::set<std::string> seen;
    for (const ApiRoute& r : routes) {
      const std::string route = std::string(r.method) + " " + std::string(r.pattern);
      EXPECT_TRUE(r.action.has_value()) << route;
      EXPECT_NE(r.handler, nullptr) << route;
      EXPECT_TRUE(seen.insert(route).second) << route << " twice";
      // A route about the tenant in its path names one; the tenants' own routes are such routes.
      if (r.scope == RouteScope::kPathTenant) {
        EXPECT_THAT(route, HasSubstr("{name}"));
      }
      if (r.pattern == "/v1/tenants/{name}") {
        EXPECT_EQ(r.scope, RouteScope::kPathTenant) << route;
      }
    }
    EXPECT_EQ(seen.count("GET /metrics"), metrics_auth ? 1u : 0u);
  }
}

TEST(RouteTable, ARouteWithoutAnActionIsRefusedAtRegistration) {
  std::vector<ApiRoute> routes = ApiRoutes(false);
  routes.push_back({"POST", "/v1/widgets", std::nullopt, RouteScope::kObject, &ControlPlane::Impl::CreateTenant, {}});
  const Status st = CheckApiRoutes(routes);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(st.message()), HasSubstr("route POST /v1/widgets has no Action"));
  routes.back() = {"GET", "/v1/widgets", Action::kReadTenant, RouteScope::kPathTenant, &ControlPlane::Impl::GetTenant, {}};
  EXPECT_THAT(std::string(CheckApiRoutes(routes).message()), HasSubstr("names none"));
}

}  // namespace
}  // namespace tessera::daemon
