#include "src/daemon/authz.h"

namespace tessera::daemon {

std::string_view RoleName(Role r) {
  switch (r) {
    case Role::kAdmin: return "admin";
    case Role::kTenantAdmin: return "tenant-admin";
    case Role::kTenantUser: return "tenant-user";
    case Role::kNodeAgent: return "node-agent";
    case Role::kViewer: return "viewer";
  }
  return "?";
}

std::string_view RoleNames() { return "admin, tenant-admin, tenant-user, node-agent or viewer"; }

StatusOr<Role> ParseRole(std::string_view name) {
  for (Role r : {Role::kAdmin, Role::kTenantAdmin, Role::kTenantUser, Role::kNodeAgent, Role::kViewer})
    if (RoleName(r) == name) return r;
  return InvalidArgumentError("role '" + std::string(name) + "' is not " + std::string(RoleNames()));
}

bool InSubtree(std::string_view t, std::string_view root, const ParentOf& parent_of) {
  if (root.empty()) return false;
  std::string at(t);
  // A tree has no cycles, but a bound keeps a corrupt parent table from looping.
  for (int depth = 0; depth < 1024 && !at.empty(); ++depth) {
    if (at == root) return true;
    const std::optional<std::string> parent = parent_of(at);
    if (!parent) return false;
    at = *parent;
  }
  return false;
}

namespace {

// What a viewer may do: read what the dashboard shows, cluster-wide.
bool ViewerMay(Action a) {
  switch (a) {
    case Action::kReadTenant:
    case Action::kListTenants:
    case Action::kReadWorkload:
    case Action::kReadNodes:
    case Action::kReadUsage:
    case Action::kReadEvents:
    case Action::kReadInvoices:
    case Action::kReadMetrics:
      return true;
    default:
      return false;
  }
}

// Actions about one tenant's objects (the rest are lists the caller filters, or not about
// tenants at all).
bool Targeted(Action a) {
  switch (a) {
    case Action::kReadTenant:
    case Action::kCreateTenant:
    case Action::kChangeQuota:
    case Action::kDeleteTenant:
    case Action::kSubmitWorkload:
    case Action::kReadWorkload:
    case Action::kChangeWorkload:
    case Action::kCancelWorkload:
    case Action::kCreateToken:
    case Action::kRevokeToken:
      return true;
    default:
      return false;
  }
}

Decision TenantRole(const Principal& who, Action action, std::string_view target,
                    const ParentOf& parent_of, Role new_token_role) {
  const bool admin = who.role == Role::kTenantAdmin;
  if ((action == Action::kReadUsage || action == Action::kReadInvoices) && !target.empty())
    return InSubtree(target, who.tenant, parent_of) ? Decision::kAllow : Decision::kNotFound;
  if (!Targeted(action)) {
    switch (action) {
      case Action::kListTenants:
      case Action::kReadEvents:
      case Action::kReadUsage:
      case Action::kReadInvoices:
      case Action::kReadMetrics:
        return Decision::kAllow;
      case Action::kListTokens:
        return admin ? Decision::kAllow : Decision::kForbidden;
      default:  // nodes and the node-agent endpoints
        return Decision::kForbidden;
    }
  }
  // Creating a root, or a token not tied to a tenant: nothing of the caller's is involved.
  if (target.empty()) return Decision::kForbidden;
  if (!InSubtree(target, who.tenant, parent_of)) return Decision::kNotFound;
  switch (action) {
    case Action::kReadTenant:
    case Action::kSubmitWorkload:
    case Action::kReadWorkload:
    case Action::kChangeWorkload:
    case Action::kCancelWorkload:
      return Decision::kAllow;
    case Action::kCreateTenant:  // target: the parent, which may be the caller's own tenant
    case Action::kRevokeToken:
      return admin ? Decision::kAllow : Decision::kForbidden;
    case Action::kChangeQuota:
    case Action::kDeleteTenant:  // strictly below: its own tenant's quota is its parent's call
      return admin && target != who.tenant ? Decision::kAllow : Decision::kForbidden;
    case Action::kCreateToken:
      return admin && (new_token_role == Role::kTenantAdmin || new_token_role == Role::kTenantUser)
                 ? Decision::kAllow
                 : Decision::kForbidden;
    default:
      return Decision::kForbidden;
  }
}

}  // namespace

Decision Authorize(const Principal& who, Action action, std::string_view target,
                   const ParentOf& parent_of, Role new_token_role) {
  switch (who.role) {
    case Role::kAdmin:
      return action == Action::kNodeAgent ? Decision::kForbidden : Decision::kAllow;
    case Role::kNodeAgent:
      return action == Action::kNodeAgent || action == Action::kReadNodes || action == Action::kReadMetrics
                 ? Decision::kAllow
                 : Decision::kForbidden;
    case Role::kTenantAdmin:
    case Role::kTenantUser:
      return TenantRole(who, action, target, parent_of, new_token_role);
    case Role::kViewer:
      return ViewerMay(action) ? Decision::kAllow : Decision::kForbidden;
  }
  return Decision::kForbidden;
}

std::string_view ActionText(Action a) {
  switch (a) {
    case Action::kReadTenant: return "read tenants";
    case Action::kListTenants: return "list tenants";
    case Action::kCreateTenant: return "create tenants here";
    case Action::kChangeQuota: return "change this tenant";
    case Action::kDeleteTenant: return "delete this tenant";
    case Action::kSubmitWorkload: return "submit workloads";
    case Action::kReadWorkload: return "read workloads";
    case Action::kChangeWorkload: return "change workloads";
    case Action::kCancelWorkload: return "cancel workloads";
    case Action::kCreateToken: return "create this token";
    case Action::kListTokens: return "list tokens";
    case Action::kRevokeToken: return "revoke tokens";
    case Action::kReadNodes: return "read nodes";
    case Action::kNodeAgent: return "use the node endpoints (node-agent tokens only)";
    case Action::kReadUsage: return "read usage";
    case Action::kReadEvents: return "read events";
    case Action::kReadInvoices: return "read invoices";
    case Action::kReadAudit: return "read the audit log (admins only)";
    case Action::kManageNodes: return "cordon, uncordon, drain or remove nodes (admins only)";
    case Action::kReadMetrics: return "read metrics";
  }
  return "do that";
}

bool RoleMayEver(Role role, Action action) {
  switch (role) {
    case Role::kViewer: return ViewerMay(action);
    case Role::kAdmin: return action != Action::kNodeAgent;
    case Role::kNodeAgent:
      return action == Action::kNodeAgent || action == Action::kReadNodes || action == Action::kReadMetrics;
    case Role::kTenantAdmin:
      return action != Action::kNodeAgent && action != Action::kReadNodes && action != Action::kReadAudit &&
             action != Action::kManageNodes;
    case Role::kTenantUser:
      switch (action) {
        case Action::kReadTenant:
        case Action::kListTenants:
        case Action::kSubmitWorkload:
        case Action::kReadWorkload:
        case Action::kChangeWorkload:
        case Action::kCancelWorkload:
        case Action::kReadUsage:
        case Action::kReadEvents:
        case Action::kReadInvoices:
        case Action::kReadMetrics:
          return true;
        default:
          return false;
      }
  }
  return false;
}

bool MaySeeEvent(const Principal& who, std::string_view subject, std::string_view tenant, const ParentOf& parent_of) {
  if (subject == "workload") return Authorize(who, Action::kReadWorkload, tenant, parent_of) == Decision::kAllow;
  if (subject == "tenant") return Authorize(who, Action::kReadTenant, tenant, parent_of) == Decision::kAllow;
  if (subject == "token") {
    if (who.role == Role::kAdmin) return true;
    return Authorize(who, Action::kListTokens, "", parent_of) == Decision::kAllow && !tenant.empty() &&
           InSubtree(tenant, who.tenant, parent_of);
  }
  if (subject == "node") return Authorize(who, Action::kReadNodes, "", parent_of) == Decision::kAllow;
  return false;
}

}  // namespace tessera::daemon
