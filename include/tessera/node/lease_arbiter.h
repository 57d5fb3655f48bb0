// LeaseArbiter: the node agent's compute scheduler for one GPU. It drives a `LeaseBoard`
// (tessera/enforce/lease.h) that the tenants' shims read: at each step it ends the current
// lease when it expires, when its holder goes idle (work-conserving) or when a higher-priority
// tenant waits (priority policy), charges the holder the GPU time it used, picks the next
// tenant among those with waiting work with a `TimeslicePolicy` (weighted_fair,
// priority, hierarchical, round_robin, lottery, edf), grants it a lease of one quantum and
// wakes its waiting processes (FUTEX_WAKE on the slot's wake_seq).
//
// Untrusted input. Everything on a tenant's page (its tenant and GPU lines: waiting, launches,
// estimates, measured time, queued work) is written by that tenant's processes, i.e. by the tenant:
// the arbiter bounds what it believes (kMeasuredConcurrency, kMaxTailQuanta; counted in
// LeaseTenantStats::implausible_reports), so that no value there makes a charge negative, wraps
// a sum, or holds the GPU past a bounded tail. (A tenant that under-reports its own measured time
// is charged less: the arbiter cannot see the GPU; docs/security.md, "What remains".)
//
// Charging. A tenant whose shim meters its GPU time (the slot's `gpu.metering` flag; shim
// gpu_meter.h) is charged exactly what its events measured: at every step, the growth of the
// slot's `gpu.gpu_ns`, whether it holds the lease or its queued work is still finishing; its lease
// end charges nothing more (an unused grant is still charged the time it was reserved), and its
// idle test uses its published `busy_until_ns` and measured `unit_ns`. Any other holder is charged
// max(lease time it used, estimated GPU time it submitted during the lease), where the estimate is
// `enforce::LaunchCostNs` (the per-tenant kernel estimate, times the kernel nodes of a graph). Work submitted just before expiry keeps the
// GPU busy after it; that tail is charged to the holder, and the next holder is charged from
// when the tail is estimated to drain (its lease still expires one quantum after the grant,
// so nobody waits more than a quantum for a lease to end).
//
// Worked example (weighted_fair, quantum 10 ms, A weight 1, B weight 3, both saturating with
// 1 ms kernels and kernel_est_ns = 1 ms):
//   t=0   A and B wait; vtime 0/0 -> A (tie, lower slot) gets [0, 10) ms
//   t=10  A charged 10 ms (vtime 10); B (0) gets [10, 20); charged 10 -> vtime 3.3
//   t=20  B (3.3) again, ... B runs 3 leases for each of A's: 25 % / 75 %.
//   If A's last launch is at t=3 ms (work drained at 4 ms) while B waits, the lease ends at
//   max(4, 3 + 1) + max(idle_grace 0.5, 1/2) = 4.5 ms; A is charged 4 ms (its submitted
//   work, which exceeds the 3 ms up to its last launch), and B starts then.
//
// Min/max shares (fractions of wall time over an exponentially decayed window): a tenant whose
// share is at its max is not picked (a hard cap, not work-conserving by design: it is the
// tenant's limit); a runnable tenant below its min is picked first (largest deficit).
//
// Step(now) is a pure function of the board, the configured tenants and `now`: tests drive it
// on a virtual clock; `LeaseArbiterRunner` drives it in real time on a thread, sleeping on the
// board's doorbell futex until the next wake-up or until a tenant starts waiting.
//
// Thread-safety: LeaseArbiter is single-threaded (the runner serialises calls with a mutex;
// use LeaseArbiterRunner::WithArbiter to change tenants while it runs). Ownership: the board
// memory is owned by the caller and must outlive the arbiter.
//
// Observed time. The node side may see more GPU time than a tenant reported: the agent's backstop
// reads NVML's per-process SM utilisation (node/agent.h) and adds the difference UnderChargedNs
// finds to the slot's node-line `observed_extra_ns`; every step charges that field's growth like
// measured time (LeaseTenantStats::recharged_ns), at most kMaxMeasuredCreditNs per step. So a
// tenant that zeroes or slows its own `gpu_ns`, or whose kernels outrun the duration estimate,
// pays for what the GPU saw rather than for what it said.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tessera/core/status.h"
#include "tessera/enforce/lease.h"
#include "tessera/node/timeslice.h"

namespace tessera::node {

using Nanos = std::chrono::nanoseconds;

struct LeaseArbiterOptions {
  // Time-slice policy (MakeTimeslicePolicy): weighted_fair, priority, hierarchical,
  // round_robin, lottery, edf.
  std::string policy = "weighted_fair";
  uint64_t seed = 1;  // lottery only
  // Lease length. 10 ms: long enough that switching tenants (the GPU's context switch plus
  // the drained tail of the previous holder, ~0.1-2 ms) costs a few percent at most, short
  // enough that a waiting tenant's launch latency without preemption is one frame-sized slice
  // (docs/enforcement-compute.md, "Quantum").
  Nanos quantum = std::chrono::milliseconds(10);
  // A holder is idle when its estimated work has drained and it launched nothing for one
  // kernel estimate plus max(this, half an estimate): its lease ends early and the GPU goes
  // to the next waiter (work conservation).
  Nanos idle_grace = std::chrono::microseconds(500);
  // A freshly granted holder gets this long for its first launch (its processes must wake up
  // and be scheduled by the OS) before the grant counts as unused.
  Nanos wake_grace = std::chrono::milliseconds(2);
  // priority policy: end the holder's lease as soon as a strictly higher-priority tenant waits.
  bool preempt_for_priority = true;
  // Window of the min/max share accounting (exponential decay time constant).
  Nanos share_window = std::chrono::seconds(1);
  // Longest sleep of the real-time runner when nothing happens (the doorbell wakes it earlier);
  // also the heartbeat period tenants see.
  Nanos max_sleep = std::chrono::milliseconds(50);
};

struct LeaseTenantConfig {
  uint32_t tenant_id = 0;       // the tenant's global id (copied to the slot)
  uint32_t weight = 1;          // >= 1
  int32_t priority = 0;         // priority policy: higher first
  uint32_t group = 0;           // hierarchical policy: the parent (e.g. the team)
  uint32_t group_weight = 1;    // hierarchical policy: the parent's weight
  double min_share = 0.0;       // 0..1 of the GPU's time, guaranteed when the tenant has work
  double max_share = 1.0;       // 0..1, a hard cap
  Nanos kernel_estimate{0};     // the duration model's per-kernel estimate (0 = unknown)
  Nanos deadline{0};            // edf policy: relative deadline of waiting work (0 = quantum)
};

// kReturned: the lease was granted while a tenant the policy prefers had paused (to
// synchronise), and that tenant is waiting again: it gets the GPU back without waiting out the
// borrower's quantum.
enum class LeaseEndReason : uint8_t { kExpired, kIdle, kPreempted, kReturned, kRemoved, kStopped };

// Per-slot counters kept by the arbiter (the board holds the ones tenants may read).
struct LeaseTenantStats {
  uint64_t grants = 0;
  uint64_t charged_ns = 0;
  uint64_t ended_expired = 0;
  uint64_t ended_idle = 0;
  uint64_t ended_preempted = 0;
  uint64_t ended_returned = 0;  // borrowed in a paused tenant's gap, handed back when it returned
  uint64_t unused_grants = 0;
  // Self-reports of the tenant's page (enforce/lease.h: its own lines, which its processes or a
  // hostile tenant write freely) that were implausible and clamped: a measured GPU time that went
  // backwards or grew faster than kMeasuredConcurrency x wall time, queued work reported to end
  // more than kMaxTailQuanta quanta after its lease. `clamped_ns`: the time not charged or not
  // believed because of them.
  uint64_t implausible_reports = 0;
  uint64_t clamped_ns = 0;
  // GPU time charged from the node line's `observed_extra_ns` (seen by the node side, not reported).
  uint64_t recharged_ns = 0;
};

// Bounds on what the arbiter believes of a tenant's own lines (see LeaseTenantStats).
inline constexpr uint64_t kMeasuredConcurrency = 16;  // event-measured GPU time per ns of wall time
inline constexpr uint64_t kMaxMeasuredCreditNs = 16'000'000'000;  // measured time reported late, at most
inline constexpr uint64_t kMaxTailQuanta = 8;  // queued work believed past a lease's end

// How much more GPU time than it was charged a tenant took, as the node side observed it over a
// window: `observed_ns` (NVML: its processes' SM utilisation x the window), `charged_ns` (the
// growth of its board charge over the same window, minus what this rule added before). Zero
// unless the observation is clearly above the charge: more than twice it (a tenant that reports
// half of its time or less; NVML's sampling error is far smaller than that) and at least
// kObservedMarginMilli of the window more (a nearly idle tenant's noise). The margin is small on
// purpose: a window the rule forgives is time the tenant keeps (with the control plane's 250 milli
// of usage_under_reported, a tenant at a 30 % share reporting a tenth kept 35 % on the virtual node;
// with 50, 30 %), and what the rule charges is what the driver saw, never more.
// Worked example (window 1 s): observed 600 ms, charged 100 ms: 600 >= 100 + 50 and 600 > 200,
// so 500 ms more; observed 320 ms, charged 300 ms: 0; observed 400 ms, charged 0 (a tenant that
// zeroed its gpu_ns, or one that bypasses the gate): 400 ms; observed 40 ms, charged 0: 0.
inline constexpr uint64_t kObservedMarginMilli = 50;
uint64_t UnderChargedNs(uint64_t observed_ns, uint64_t charged_ns, uint64_t window_ns);

// UnderChargedNs over time, for one tenant on one GPU, pass by pass (the agent's backstop passes):
// what to add to its observed_extra_ns after each pass. Two things keep an honest tenant from
// paying twice. A metering tenant reports a kernel's time when a later launch reads its events
// back, so its report comes after NVML saw the kernel run (a 3 s kernel, or work followed by a
// pause without launches): NVML's time enters the comparison only `lag` after its pass. And the
// comparison is over decayed sums (time constant `horizon`), not one pass: a late report still
// counts against time NVML saw earlier, and what was added before is subtracted from what the
// sums call for (Decayed: the sums of observed, own, window and added time all shrink by
// exp(-window / horizon) each pass, so the past weighs less and nothing grows without bound).
// Worked example (lag 2 s, passes of 1 s): an honest tenant runs one 3 s kernel in passes 1-3
// and its report of 3 s arrives in pass 4. NVML's 1 s of pass 1 enters at pass 3, where own is
// still 0: 1 s is added; pass 4: observed ~2 s, own ~3 s: nothing more; pass 5: observed ~3 s,
// own ~3 s: nothing. So it paid 1 s twice, where a pass-by-pass rule charged it 3 s twice; a lag
// of 5 s (the agent's) covers kernels and pauses up to 5 s. A tenant that reports nothing is
// charged what NVML saw, `lag` late.
class UnderChargeTracker {
 public:
  UnderChargeTracker() : UnderChargeTracker(std::chrono::seconds(5)) {}  // the agent's
  explicit UnderChargeTracker(std::chrono::nanoseconds lag,
                              std::chrono::nanoseconds horizon = std::chrono::seconds(60));
  // One pass of `window_ns`: NVML's time of the tenant in it and the growth of its own charge
  // (its board charge less what these calls added); returns the time to add now.
  uint64_t Pass(uint64_t observed_ns, uint64_t own_ns, uint64_t window_ns);

 private:
  uint64_t lag_ns_, horizon_ns_;
  std::deque<std::pair<uint64_t, uint64_t>> pending_;  // (observed, window) of the passes within the lag
  uint64_t pending_window_ns_ = 0;
  double observed_ = 0, own_ = 0, window_ = 0, added_ = 0;  // decayed sums
};

class LeaseArbiter {
 public:
  // INVALID_ARGUMENT naming the field for a null or invalid board, an unknown policy, a zero
  // quantum, idle_grace >= quantum, or a non-positive window.
  static StatusOr<std::unique_ptr<LeaseArbiter>> Create(enforce::LeaseBoard* board, const LeaseArbiterOptions& options);

  // Registers a tenant in `slot` (0..63) and publishes it on the board. INVALID_ARGUMENT for a
  // slot out of range or in use, weight 0, shares outside 0..1, min > max, or the sum of the
  // min shares above 1.
  Status AddTenant(uint32_t slot, const LeaseTenantConfig& config);
  // Frees the slot (its lease, if it holds one, ends at the next step). NOT_FOUND if free.
  Status RemoveTenant(uint32_t slot);
  // Updates the duration model's kernel estimate of a slot (e.g. from sampled event timings).
  Status SetKernelEstimate(uint32_t slot, Nanos estimate);

  // One scheduling step at monotonic time `now_ns`; returns the absolute time of the next step
  // it needs (a tenant that starts waiting earlier rings the doorbell).
  uint64_t Step(uint64_t now_ns);
  // Ends the current lease (charging it) and leaves the board without a holder.
  void Stop(uint64_t now_ns);

  std::optional<uint32_t> holder() const;
  LeaseTenantStats stats(uint32_t slot) const;
  uint64_t steps() const { return steps_; }
  const LeaseArbiterOptions& options() const { return options_; }
  enforce::LeaseBoard& board() { return *board_; }

 private:
  struct Tenant {
    bool active = false;
    LeaseTenantConfig config;
    uint32_t suppressed_epoch = 0;  // wait_epoch at an unused grant: not runnable until it moves
    bool suppressed = false;
    uint64_t runnable_since_ns = 0; // edf: when it started waiting (0 = not waiting)
    double usage_ns = 0;            // decayed charged time (min/max shares)
    uint64_t gpu_seen_ns = 0;       // the slot's measured gpu_ns already charged
    uint64_t measured_at_ns = 0;    // when gpu_ns was last read (0 = not yet)
    uint64_t measured_credit_ns = kMaxMeasuredCreditNs;  // measured time it may still report late
    uint64_t observed_seen_ns = 0;  // the node line's observed_extra_ns already charged
    LeaseTenantStats stats;
  };
  struct Lease {
    bool active = false;
    uint32_t slot = 0;
    uint64_t granted_ns = 0;     // when the grant was made
    uint64_t start_ns = 0;       // when its GPU time starts (after the previous tail drains)
    uint64_t expiry_ns = 0;
    uint64_t launches_at_grant = 0;
    uint64_t est_at_grant = 0;
    std::vector<uint32_t> lenders;  // paused at the grant and preferred by the policy over the holder
  };

  LeaseArbiter(enforce::LeaseBoard* board, const LeaseArbiterOptions& options,
               std::unique_ptr<TimeslicePolicy> policy);
  bool HasDemand(uint32_t slot) const;
  bool HigherPriorityWaiting(int32_t priority) const;
  // Tenants with no waiting work that launched (or whose measured work ran) less than a quantum
  // ago: paused to synchronise, so they keep their place in the policy (KeepPlace).
  std::vector<uint32_t> Paused(uint64_t now_ns) const;
  // A lender of the current lease (Lease::lenders) waits again and is still preferred.
  bool LenderReturned() const;
  void EndLease(uint64_t now_ns, LeaseEndReason reason);
  void Grant(uint32_t slot, uint64_t now_ns);
  // The earliest time the current holder counts as idle (`used`: it launched in this lease).
  uint64_t IdleAt(bool used) const;
  void Decay(uint64_t now_ns);
  bool Metering(uint32_t slot) const;
  void ChargeSlot(uint32_t slot, uint64_t charge);
  // Charges every metering tenant the GPU time its processes measured since the last step, at most
  // kMeasuredConcurrency x the wall time since the last look plus its credit of time not
  // reported then (up to kMaxMeasuredCreditNs); beyond it, or backwards, is counted implausible.
  void ChargeMeasured(uint64_t now_ns);
  // Charges every tenant the growth of its node line's observed_extra_ns (see "Observed time").
  void ChargeObserved();
  // The latest end of queued work believed of the holder: kMaxTailQuanta quanta after its expiry.
  uint64_t TailBound() const;
  double Share(uint32_t slot) const;

  enforce::LeaseBoard* board_;
  LeaseArbiterOptions options_;
  std::unique_ptr<TimeslicePolicy> policy_;
  bool preempt_;
  std::vector<Tenant> tenants_;
  Lease lease_;
  uint64_t gpu_free_est_ns_ = 0;  // when the last holder's submitted work is estimated to drain
  double window_ns_ = 0;          // decayed elapsed time (min/max shares)
  uint64_t decayed_at_ns_ = 0;
  uint64_t steps_ = 0;
};

// Runs a LeaseArbiter in real time on its own thread (CLOCK_MONOTONIC), sleeping on the
// board's doorbell futex between steps. Not copyable; Stop() (or the destructor) joins.
class LeaseArbiterRunner {
 public:
  explicit LeaseArbiterRunner(LeaseArbiter& arbiter) : arbiter_(arbiter) {}
  ~LeaseArbiterRunner() { Stop(); }
  LeaseArbiterRunner(const LeaseArbiterRunner&) = delete;
  LeaseArbiterRunner& operator=(const LeaseArbiterRunner&) = delete;

  void Start();
  // Stops the thread and the arbiter (the current lease ends; waiters time out or are granted
  // by a later arbiter).
  void Stop();
  // Calls f(arbiter) with the runner's lock held, then wakes the thread to step at once.
  template <typename F>
  auto WithArbiter(F&& f) {
    struct Ring {
      LeaseArbiterRunner* r;
      ~Ring() { r->Ring(); }
    } ring{this};
    std::lock_guard<std::mutex> lock(mu_);
    return f(arbiter_);
  }

 private:
  void Loop();
  void Ring();

  LeaseArbiter& arbiter_;
  std::mutex mu_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace tessera::node
