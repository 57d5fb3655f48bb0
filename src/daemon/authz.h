// Who may do what in `tessera serve`: the five token roles and tenant isolation, as one pure
// decision the API handlers ask before they touch anything.
//
//   admin         everything but the node-agent endpoints
//   tenant-admin  its tenant's subtree: read it; create, change and delete tenants strictly
//                 below its own (quotas included; never its own quota, which its parent set);
//                 workloads anywhere in the subtree; tokens of role tenant-admin or tenant-user
//                 for tenants in the subtree
//   tenant-user   its subtree's tenants (read only) and workloads (submit, read, change,
//                 cancel); no quota changes, no tokens
//   viewer        read only, the whole cluster: tenants, workloads, nodes, usage, invoices,
//                 events (not tokens nor the audit log); changes nothing. What `make demo`
//                 prints for its dashboard URL, and what a wall screen or an auditor gets.
//   node-agent    the node endpoints only (register, heartbeat, usage, desired state); a token
//                 bound to a node (TokenRecord::node) only for that node, which the control
//                 plane's route wrapper checks (a decision about the path, not the role)
//
// Tenant isolation: an object of a tenant outside the caller's subtree is NOT FOUND (404), never
// FORBIDDEN (403), so that a tenant cannot even learn that another tenant or its workload
// exists. FORBIDDEN is for what the caller can see but its role may not do (a tenant-user
// changing its own tenant's quota; a node-agent listing tenants).
//
// Worked example (tree acme -> {vision, speech}; vision -> {ranking}):
//   tenant-admin of vision, kChangeQuota on ranking -> kAllow
//   tenant-admin of vision, kChangeQuota on vision  -> kForbidden (its own quota: acme's admin)
//   tenant-admin of vision, kReadWorkload of speech -> kNotFound
//   tenant-user of ranking, kSubmitWorkload ranking -> kAllow; kChangeQuota ranking -> kForbidden
//   node-agent, kListTenants                        -> kForbidden
//   viewer, kReadWorkload of speech                 -> kAllow; kCancelWorkload -> kForbidden
//
// Thread-safety: pure functions.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "tessera/core/status.h"

namespace tessera::daemon {

enum class Role { kAdmin, kTenantAdmin, kTenantUser, kNodeAgent, kViewer };
std::string_view RoleName(Role r);  // "admin", "tenant-admin", "tenant-user", "node-agent", "viewer"
StatusOr<Role> ParseRole(std::string_view name);
// "admin, tenant-admin, tenant-user, node-agent or viewer": for messages that list the roles.
std::string_view RoleNames();

struct Principal {
  Role role = Role::kTenantUser;
  std::string tenant;  // tenant-admin and tenant-user: the root of what they may see
};
// Admins and viewers see every tenant's objects (lists are not filtered to a subtree).
inline bool SeesAllTenants(const Principal& who) { return who.role == Role::kAdmin || who.role == Role::kViewer; }

enum class Action {
  kReadTenant,        // GET a tenant (target: it)
  kListTenants,       // GET /v1/tenants (filtered to the subtree by the caller)
  kCreateTenant,      // POST (target: the new tenant's parent; "" for a root)
  kChangeQuota,       // PATCH a tenant's quota, weight or parent (target: it)
  kDeleteTenant,      // target: it
  kSubmitWorkload,    // target: the workload's tenant
  kReadWorkload,      // target: the workload's tenant
  kChangeWorkload,    // PATCH (limit, share, priority)
  kCancelWorkload,    // DELETE
  kCreateToken,       // target: the token's tenant ("" for admin and node-agent tokens)
  kListTokens,
  kRevokeToken,       // target: the token's tenant
  kReadNodes,         // GET /v1/nodes
  kNodeAgent,         // the node-agent endpoints
  kReadUsage,         // target: the tenant whose usage is asked for ("" for all)
  kReadEvents,        // GET /v1/events (filtered to the subtree by the caller)
  kReadInvoices,      // GET /v1/invoices; target: the tenant asked for ("" for all)
  kReadAudit,         // GET /v1/audit (admins)
  kManageNodes,       // cordon, uncordon, drain, remove a node (admins)
  kReadMetrics,       // GET /metrics with --metrics-auth (any role)
};
// "read tenants", "submit workloads", ...: what the 403 of a refused action says the role may not do.
std::string_view ActionText(Action a);

enum class Decision { kAllow, kForbidden, kNotFound };

// Whether tenant `t` is `root` or below it, given each tenant's parent ("" for a root; nullopt
// for an unknown tenant). An unknown tenant is below nobody.
using ParentOf = std::function<std::optional<std::string>(std::string_view tenant)>;
bool InSubtree(std::string_view t, std::string_view root, const ParentOf& parent_of);

// `target` is the tenant the action is about (see Action). `new_token_role` matters only for
// kCreateToken.
Decision Authorize(const Principal& who, Action action, std::string_view target,
                   const ParentOf& parent_of, Role new_token_role = Role::kTenantUser);

// Whether `role` may do `action` to some target (Authorize allows it for at least one): the route
// wrapper's check for routes whose target the handler finds (the body's tenant, a workload's).
// A role that may never do it is FORBIDDEN whatever the target.
//   RoleMayEver(kTenantUser, kCreateToken) -> false; RoleMayEver(kTenantUser, kSubmitWorkload) -> true
bool RoleMayEver(Role role, Action action);

// Whether `who` may see an event of GET /v1/events, by the event's subject and tenant (a
// workload's tenant; an object event's scope, store.h ObjectEvent):
//   workload  whoever may read the workload (kReadWorkload on its tenant)
//   tenant    whoever may read the tenant (kReadTenant on the scope: the tenant itself; for a
//             created or deleted one its parent, "" for a root: admins only)
//   token     admins; a tenant-admin for the tokens of its subtree (as GET /v1/tokens lists them);
//             a tenant-user none
//   node      whoever may read nodes (kReadNodes): admins; tenant tokens see no node event (node
//             names and states are the cluster's; their own workloads' events say where they run)
// Worked example (tree acme -> vision -> ranking): the tenant-admin of vision sees "tenant.created
// ranking" and "token.created" of a ranking token, not "node.lost" nor anything of acme itself;
// the tenant-user of vision sees the tenant event, not the token event.
bool MaySeeEvent(const Principal& who, std::string_view subject, std::string_view tenant, const ParentOf& parent_of);

// What a read service (usage, events, invoices, forecasts, anomalies) knows of its caller: who it
// is and how to check an action (the control plane's Check, or a test's stand-in).
struct ReadCaller {
  Principal principal;
  // OK, NOT_FOUND ("<what> not found") or PERMISSION_DENIED for `action` on `tenant`.
  std::function<Status(Action action, std::string_view tenant, std::string_view what)> check;
};

}  // namespace tessera::daemon
