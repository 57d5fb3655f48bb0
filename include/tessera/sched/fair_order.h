// The fair order: which tenant's job a scheduling cycle tries next. Within each pass of
// Scheduler::Cycle (entitled, borrowing, leftovers) the cycle asks the order for a leaf tenant
// with pending work in that pass, tries that tenant's next job, and asks again; a tenant whose
// job starts has its share raised before the next question, so the order decides how the
// surplus is shared out. Chosen by SchedulerOptions::fair_order (names: FairOrderNames()).
//
// Inputs, indexed by tenant (TenantTree index, every node of the tree):
//   share[a]   the weighted dominant share of a's subtree (Scheduler::dominant_share): the
//              largest of its usage / cluster capacity over the resource dimensions, divided by
//              its over-quota weight;
//   active[a]  how many leaves under a (a itself for a leaf) have a job to try in this pass.
//              A leaf is active iff active[leaf] > 0.
// Next returns an active leaf, or kNoTenant iff no leaf is active.
//
// Implementations:
//   hdrf      (the default) hierarchical weighted DRF: the least-served active root, then its
//             least-served active child, and so on down to a leaf; ties go to the tenant listed
//             first (TenantTree::roots / children order). An organisation's share is that of its
//             whole subtree, so organisations share the cluster by their weights first and
//             their teams share what their organisation gets: a team of a heavily served
//             organisation waits even when it is itself little served.
//   flat-drf  weighted DRF over the leaves only, ignoring the hierarchy: the least-served
//             active leaf of the whole tree; ties by tenant index. Choose it when the tree is
//             an accounting device (departments grouping projects for limits and guarantees)
//             and every project should compete for the surplus on its own weight, so that an
//             organisation with many projects gets more of the surplus than one with few.
//
// Worked example (one resource, 10 GPUs, every weight 1; tenants A, a1 under A, B, b1 and b2
// under B, in that index order; every leaf has 1-GPU jobs waiting):
//   a1 uses 2 GPUs, b1 1, b2 0 -> shares A 0.2, a1 0.2, B 0.1, b1 0.1, b2 0.
//     hdrf:     B (0.1 < 0.2), then within B b2 (0 < 0.1)  -> b2
//     flat-drf: b2 (0, the least-served leaf)              -> b2
//   b2's job starts: B 0.2, b2 0.1.
//     hdrf:     A and B tie at 0.2, A is listed first      -> a1
//     flat-drf: b1 and b2 tie at 0.1, b1 has the lower index -> b1
//   Kept up until the cluster is full, hdrf gives A and B 5 GPUs each (a1 5, b1 and b2 2.5
//   each); flat-drf gives a1, b1 and b2 about 3.3 each (A gets a third).
//
// Contract (tests/sched/fair_order_contract_test.cc runs it over every name): kNoTenant iff no
// leaf is active; otherwise an active leaf; the same inputs give the same pick; and no active
// leaf starves when every pick raises the picked leaf's (and its ancestors') share.
// Thread-safety: implementations are stateless; Next may be called from any thread.
// Ownership: Next reads the tree and spans only during the call. Next allocates nothing (it
// runs once per job tried in a cycle).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/status.h"
#include "tessera/sched/tenant.h"

namespace tessera::sched {

class FairOrder {
 public:
  virtual ~FairOrder() = default;
  // The leaf whose job to try next (see the header comment). `share` and `active` have one
  // entry per tenant of `tree`.
  virtual TenantIndex Next(const TenantTree& tree, std::span<const double> share,
                           std::span<const int> active) const = 0;
  virtual std::string_view name() const = 0;
};

// Names accepted by MakeFairOrder, the default ("hdrf") first.
const std::vector<std::string>& FairOrderNames();

// INVALID_ARGUMENT for an unknown name, listing the known ones.
StatusOr<std::unique_ptr<FairOrder>> MakeFairOrder(std::string_view name);

}  // namespace tessera::sched
