// Device-level time-slice policies: who runs on a shared GPU in the next time slice. Used by
// the node side of enforcement (leases for `timeslice(weight, mem)` and `fraction` shares) and
// by the simulator. Each policy is a small state machine over a virtual clock: the caller asks
// Pick() for the next slice among the clients that have work, runs it, and reports what was
// used with Charge(). Nothing here reads a clock or sleeps.
//
//   round_robin   runnable clients in turn
//   weighted_fair stride scheduling: each client has a virtual time advanced by used/weight;
//                 the lowest virtual time runs (a newly runnable client starts at the current
//                 minimum, so sleeping earns no credit; one paused only briefly, KeepPlace,
//                 keeps its place with a bounded lag)
//   edf           earliest deadline first among runnable clients (deadline given per Pick)
//   lottery       a seeded draw weighted by tickets (= weight)
//   priority      the highest priority runs; round robin within a priority
//   hierarchical  weighted fair between tenants, then weighted fair between a tenant's clients
//
// Worked example (weighted_fair, slices of 1 ms, A weight 1, B weight 3, both always busy):
//   vtime A, B = 0, 0 -> A (tie, lower id) -> A = 1; B (0) -> B = 1/3; B -> 2/3; B -> 1;
//   A (1, tie, lower id) -> ... over 4 slices A gets 1, B gets 3: shares 25 % / 75 %.
//   If B pauses (synchronises) while A runs a slice and KeepPlace({B}, lag) was called, B comes
//   back at its old virtual time (2/3), not at A's 2: it is still owed its 75 %. Without
//   KeepPlace it would come back at 2, and a B that synchronises every slice gets ~50 %.
//
// Thread-safety: one object per GPU, used by one thread (the node agent's scheduler loop).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/status.h"

namespace tessera::node {

using Nanos = std::chrono::nanoseconds;

struct TimesliceClient {
  uint32_t id = 0;        // unique per policy
  uint32_t tenant = 0;    // for hierarchical
  uint32_t weight = 1;    // >= 1; tickets for lottery
  int32_t priority = 0;   // higher runs first (priority policy)
  uint32_t tenant_weight = 1;  // hierarchical: the tenant's weight (same for all its clients)
};

struct RunnableClient {
  uint32_t id = 0;
  Nanos deadline{0};      // edf: absolute deadline on the virtual clock of the current job
};

class TimeslicePolicy {
 public:
  virtual ~TimeslicePolicy() = default;
  virtual std::string_view name() const = 0;
  // INVALID_ARGUMENT for a duplicate id or weight 0.
  virtual Status AddClient(const TimesliceClient& client) = 0;
  // NOT_FOUND for an unknown id.
  virtual Status RemoveClient(uint32_t id) = 0;
  // The client for the next slice among `runnable` (unknown ids are ignored); nullopt if none.
  virtual std::optional<uint32_t> Pick(std::span<const RunnableClient> runnable) = 0;
  // Account `used` GPU time to `id` (a slice may end early; used may be 0).
  virtual void Charge(uint32_t id, Nanos used) = 0;
  // Clients in `paused` that are missing from the next Pick's runnable set keep their place as
  // if they had stayed runnable: a tenant that stops launching only to synchronise with its own
  // GPU work is not sent to the back of the queue (which would cost it its share every time it
  // waits for a result). A kept client that comes back has lost at most `max_lag` of virtual
  // time (GPU ns per unit of weight) to the others, so a client paused over and over cannot
  // bank credit and then starve everyone. Policies without a virtual clock ignore it.
  virtual void KeepPlace(std::span<const uint32_t> paused, Nanos max_lag) {
    (void)paused;
    (void)max_lag;
  }
  // True when the policy would run `a` before `b` were both runnable now (by virtual time, with
  // a kept client's lag bound applied). Policies without a virtual clock answer false. The lease
  // arbiter uses it to hand the GPU back to a paused tenant the moment it returns.
  virtual bool Prefers(uint32_t a, uint32_t b) const {
    (void)a;
    (void)b;
    return false;
  }
};

// "round_robin", "weighted_fair", "edf", "lottery", "priority", "hierarchical";
// INVALID_ARGUMENT lists them for anything else. `seed` is used by lottery only.
StatusOr<std::unique_ptr<TimeslicePolicy>> MakeTimeslicePolicy(std::string_view name, uint64_t seed = 1);
const std::vector<std::string>& TimeslicePolicyNames();

}  // namespace tessera::node
