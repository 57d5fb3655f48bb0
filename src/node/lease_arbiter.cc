#include "tessera/node/lease_arbiter.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cmath>

namespace tessera::node {
namespace {

using enforce::LeaseBoard;
using enforce::LeaseSlotState;
using enforce::kLeaseMaxTenants;

// Never schedule the next step closer than this (a holder right at its idle threshold would
// otherwise make the runner spin).
constexpr uint64_t kMinStepNs = 20'000;
// How soon to look again when tenants wait but none may run (all at their max share).
constexpr uint64_t kCappedPollNs = 1'000'000;
// A paused tenant (Paused) keeps its place in the policy's queue with at most this many quanta
// of virtual time lost to the others: enough for the lease another tenant ran in its pause,
// not enough to bank credit by pausing over and over.
constexpr uint64_t kMaxPausedLagQuanta = 2;

uint64_t Ns(Nanos d) { return static_cast<uint64_t>(d.count()); }

}  // namespace

StatusOr<std::unique_ptr<LeaseArbiter>> LeaseArbiter::Create(LeaseBoard* board, const LeaseArbiterOptions& options) {
  if (board == nullptr) return InvalidArgumentError("lease arbiter: board is null");
  if (const auto check = enforce::AttachLeaseBoard(board, sizeof(LeaseBoard), nullptr);
      check != enforce::LeaseBoardCheck::kOk) {
    return InvalidArgumentError(std::string("lease arbiter: board: ") + enforce::LeaseBoardCheckName(check));
  }
  if (options.quantum.count() <= 0) return InvalidArgumentError("lease arbiter: quantum must be > 0");
  if (options.idle_grace.count() <= 0 || options.idle_grace >= options.quantum) {
    return InvalidArgumentError("lease arbiter: idle_grace must be > 0 and < quantum");
  }
  if (options.wake_grace.count() <= 0) return InvalidArgumentError("lease arbiter: wake_grace must be > 0");
  if (options.share_window.count() <= 0) return InvalidArgumentError("lease arbiter: share_window must be > 0");
  if (options.max_sleep.count() <= 0) return InvalidArgumentError("lease arbiter: max_sleep must be > 0");
  auto policy = MakeTimeslicePolicy(options.policy, options.seed);
  if (!policy.ok()) return policy.status().WithPrefix("lease arbiter: policy");
  return std::unique_ptr<LeaseArbiter>(new LeaseArbiter(board, options, std::move(policy).value()));
}

LeaseArbiter::LeaseArbiter(LeaseBoard* board, const LeaseArbiterOptions& options,
                           std::unique_ptr<TimeslicePolicy> policy)
    : board_(board),
      options_(options),
      policy_(std::move(policy)),
      preempt_(options.preempt_for_priority && options.policy == "priority"),
      tenants_(kLeaseMaxTenants) {
  board_->arbiter.quantum_ns.store(Ns(options_.quantum), std::memory_order_relaxed);
  board_->arbiter.arbiter_pid.store(static_cast<uint32_t>(getpid()), std::memory_order_relaxed);
}

Status LeaseArbiter::AddTenant(uint32_t slot, const LeaseTenantConfig& c) {
  const std::string what = "lease tenant slot " + std::to_string(slot);
  if (slot >= kLeaseMaxTenants) {
    return InvalidArgumentError(what + ": out of range (0.." + std::to_string(kLeaseMaxTenants - 1) + ")");
  }
  if (tenants_[slot].active) return InvalidArgumentError(what + ": already in use");
  if (c.weight == 0) return InvalidArgumentError(what + ": weight must be >= 1");
  if (!(c.min_share >= 0.0 && c.min_share <= 1.0)) return InvalidArgumentError(what + ": min_share must be in 0..1");
  if (!(c.max_share > 0.0 && c.max_share <= 1.0)) return InvalidArgumentError(what + ": max_share must be in (0, 1]");
  if (c.min_share > c.max_share) return InvalidArgumentError(what + ": min_share exceeds max_share");
  if (c.kernel_estimate.count() < 0 || c.deadline.count() < 0) {
    return InvalidArgumentError(what + ": kernel_estimate and deadline must be >= 0");
  }
  double min_sum = c.min_share;
  for (const Tenant& t : tenants_) {
    if (t.active) min_sum += t.config.min_share;
  }
  if (min_sum > 1.0 + 1e-9) return InvalidArgumentError(what + ": the min shares of all tenants exceed 1");
  TESSERA_RETURN_IF_ERROR(policy_->AddClient({.id = slot,
                                               .tenant = c.group,
                                               .weight = c.weight,
                                               .priority = c.priority,
                                               .tenant_weight = c.group_weight})
                              .WithPrefix(what));
  Tenant& t = tenants_[slot];
  t = Tenant{};
  t.active = true;
  t.config = c;

  enforce::LeaseTenantSlot& s = board_->slots[slot];
  // A reused slot starts clean; the new tenant's processes are not running yet. But a slot the
  // board still shows active belongs to a tenant an earlier arbiter served (this one resumes
  // from the board, e.g. `tessera run` taking over the arbiter role): its processes may be
  // waiting right now, so `waiting` and `wait_epoch` are kept (zeroing `waiting` under a
  // sleeping waiter would hide its demand for good).
  const bool resumed = board_->node[slot].state.load(std::memory_order_acquire) ==
                       static_cast<uint32_t>(LeaseSlotState::kActive);
  if (!resumed) s.tenant.waiting.store(0, std::memory_order_relaxed);
  s.tenant.launches.store(0, std::memory_order_relaxed);
  s.tenant.graph_launches.store(0, std::memory_order_relaxed);
  s.tenant.captured_launches.store(0, std::memory_order_relaxed);
  s.tenant.submitted_est_ns.store(0, std::memory_order_relaxed);
  s.tenant.last_launch_ns.store(0, std::memory_order_relaxed);
  s.tenant.waits.store(0, std::memory_order_relaxed);
  s.tenant.wait_ns.store(0, std::memory_order_relaxed);
  if (!resumed) {  // the GPU line of a resumed slot belongs to processes that may be metering now
    s.gpu.metering.store(0, std::memory_order_relaxed);
    s.gpu.gpu_ns.store(0, std::memory_order_relaxed);
    s.gpu.busy_until_ns.store(0, std::memory_order_relaxed);
    s.gpu.unit_ns.store(0, std::memory_order_relaxed);
  }
  t.gpu_seen_ns = s.gpu.gpu_ns.load(std::memory_order_acquire);
  t.measured_at_ns = 0;
  t.measured_credit_ns = kMaxMeasuredCreditNs;
  t.observed_seen_ns = board_->node[slot].observed_extra_ns.load(std::memory_order_acquire);
  board_->node[slot].tenant_id.store(c.tenant_id, std::memory_order_relaxed);
  board_->node[slot].priority.store(static_cast<uint32_t>(c.priority) + 0x80000000u, std::memory_order_relaxed);
  board_->node[slot].kernel_est_ns.store(Ns(c.kernel_estimate), std::memory_order_relaxed);
  board_->node[slot].charged_ns.store(0, std::memory_order_relaxed);
  board_->node[slot].grants.store(0, std::memory_order_relaxed);
  board_->node[slot].unused_grants.store(0, std::memory_order_relaxed);
  board_->node[slot].preemptions.store(0, std::memory_order_relaxed);
  board_->node[slot].state.store(static_cast<uint32_t>(LeaseSlotState::kActive), std::memory_order_release);
  return Status::Ok();
}

Status LeaseArbiter::RemoveTenant(uint32_t slot) {
  if (slot >= kLeaseMaxTenants || !tenants_[slot].active) {
    return NotFoundError("lease tenant slot " + std::to_string(slot) + ": not in use");
  }
  TESSERA_RETURN_IF_ERROR(policy_->RemoveClient(slot));
  tenants_[slot].active = false;
  board_->node[slot].state.store(static_cast<uint32_t>(LeaseSlotState::kFree), std::memory_order_release);
  return Status::Ok();
}

Status LeaseArbiter::SetKernelEstimate(uint32_t slot, Nanos estimate) {
  if (slot >= kLeaseMaxTenants || !tenants_[slot].active) {
    return NotFoundError("lease tenant slot " + std::to_string(slot) + ": not in use");
  }
  if (estimate.count() < 0) return InvalidArgumentError("kernel estimate must be >= 0");
  tenants_[slot].config.kernel_estimate = estimate;
  board_->node[slot].kernel_est_ns.store(Ns(estimate), std::memory_order_relaxed);
  return Status::Ok();
}

bool LeaseArbiter::HasDemand(uint32_t slot) const {
  const Tenant& t = tenants_[slot];
  if (!t.active) return false;
  const auto& line = board_->slots[slot].tenant;
  if (line.waiting.load(std::memory_order_acquire) == 0) return false;
  // After an unused grant the slot's waiters may be dead (a process killed while waiting
  // leaves `waiting` raised): only a live waiter re-arming its wait brings it back.
  return !(t.suppressed && line.wait_epoch.load(std::memory_order_acquire) == t.suppressed_epoch);
}

std::vector<uint32_t> LeaseArbiter::Paused(uint64_t now_ns) const {
  std::vector<uint32_t> paused;
  for (uint32_t i = 0; i < kLeaseMaxTenants; ++i) {
    const Tenant& t = tenants_[i];
    if (!t.active || HasDemand(i)) continue;
    const enforce::LeaseTenantSlot& s = board_->slots[i];
    // Its last launch, or (metering) the end of its queued work, is less than a quantum ago:
    // it is waiting on its own results, not gone. That includes a tenant whose grant just went
    // unused because its processes woke late (a loaded host): it is not granted again until
    // they wait again, but it keeps its place.
    uint64_t recent = s.tenant.last_launch_ns.load(std::memory_order_acquire);
    if (Metering(i)) recent = std::max(recent, s.gpu.busy_until_ns.load(std::memory_order_acquire));
    recent = std::min(recent, now_ns);  // a time the tenant wrote in the future keeps no place for ever
    if (recent != 0 && recent + Ns(options_.quantum) > now_ns) paused.push_back(i);
  }
  return paused;
}

bool LeaseArbiter::LenderReturned() const {
  for (uint32_t i : lease_.lenders) {
    if (i != lease_.slot && HasDemand(i) && policy_->Prefers(i, lease_.slot)) return true;
  }
  return false;
}

bool LeaseArbiter::HigherPriorityWaiting(int32_t priority) const {
  for (uint32_t i = 0; i < kLeaseMaxTenants; ++i) {
    if (i != lease_.slot && tenants_[i].active && tenants_[i].config.priority > priority && HasDemand(i)) return true;
  }
  return false;
}

void LeaseArbiter::Decay(uint64_t now_ns) {
  if (now_ns <= decayed_at_ns_) return;
  const double tau = static_cast<double>(Ns(options_.share_window));
  const double f = std::exp(-static_cast<double>(now_ns - decayed_at_ns_) / tau);
  window_ns_ = window_ns_ * f + tau * (1.0 - f);
  for (Tenant& t : tenants_) t.usage_ns *= f;
  decayed_at_ns_ = now_ns;
}

uint64_t LeaseArbiter::IdleAt(bool used) const {
  const auto& line = board_->slots[lease_.slot].tenant;
  const auto& gpu = board_->slots[lease_.slot].gpu;
  const bool metering = Metering(lease_.slot);
  const uint64_t est_delta = line.submitted_est_ns.load(std::memory_order_acquire) - lease_.est_at_grant;
  // A metering tenant publishes when its queued work should finish (measured time per kernel).
  const uint64_t work_end = std::min(
      TailBound(), metering ? std::max(lease_.start_ns, gpu.busy_until_ns.load(std::memory_order_acquire))
                            : lease_.start_ns + std::min(est_delta, TailBound() - lease_.start_ns));
  if (!used) return std::max(work_end, lease_.granted_ns + Ns(options_.wake_grace));
  // A synchronous launcher's next launch comes one kernel after its last; a kernel may run
  // longer than the estimate, so the grace is at least half an estimate. Calling a busy holder
  // idle would cost it its place in the policy's queue (idling earns no credit).
  const uint64_t last =
      std::max(std::min(line.last_launch_ns.load(std::memory_order_acquire), lease_.expiry_ns), lease_.granted_ns);
  const uint64_t unit = metering ? gpu.unit_ns.load(std::memory_order_relaxed) : 0;
  const uint64_t est = unit != 0 ? unit : board_->node[lease_.slot].kernel_est_ns.load(std::memory_order_relaxed);
  return std::max(work_end, last + est) + std::max(Ns(options_.idle_grace), est / 2);
}

bool LeaseArbiter::Metering(uint32_t slot) const {
  return board_->slots[slot].gpu.metering.load(std::memory_order_acquire) != 0;
}

void LeaseArbiter::ChargeSlot(uint32_t slot, uint64_t charge) {
  Tenant& t = tenants_[slot];
  policy_->Charge(slot, Nanos(charge));
  t.usage_ns += static_cast<double>(charge);
  t.stats.charged_ns += charge;
  board_->node[slot].charged_ns.fetch_add(charge, std::memory_order_relaxed);
}

uint64_t LeaseArbiter::TailBound() const {
  return lease_.expiry_ns + kMaxTailQuanta * Ns(options_.quantum);
}

void LeaseArbiter::ChargeMeasured(uint64_t now_ns) {
  for (uint32_t i = 0; i < kLeaseMaxTenants; ++i) {
    Tenant& t = tenants_[i];
    if (!t.active) continue;
    const uint64_t measured = board_->slots[i].gpu.gpu_ns.load(std::memory_order_acquire);
    const uint64_t wall = t.measured_at_ns != 0 && now_ns > t.measured_at_ns ? now_ns - t.measured_at_ns : 0;
    t.measured_at_ns = now_ns;
    // Time the tenant could have measured since the last look (several streams overlap), plus
    // what it measured earlier and reports only now (segments are read back without blocking).
    const uint64_t allowance =
        std::min(kMaxMeasuredCreditNs, t.measured_credit_ns + std::min(wall, kMaxMeasuredCreditNs) * kMeasuredConcurrency);
    uint64_t charge = 0;
    if (Metering(i)) {
      if (measured < t.gpu_seen_ns) {
        ++t.stats.implausible_reports;  // went backwards: nothing to charge; counted from here on
      } else {
        const uint64_t delta = measured - t.gpu_seen_ns;
        charge = std::min(delta, allowance);
        if (charge != delta) {
          ++t.stats.implausible_reports;
          t.stats.clamped_ns += delta - charge;
        }
      }
    }
    t.measured_credit_ns = allowance - charge;
    if (charge != 0) ChargeSlot(i, charge);
    t.gpu_seen_ns = measured;  // a non-metering tenant's samples are not charged twice later
  }
}

void LeaseArbiter::ChargeObserved() {
  for (uint32_t i = 0; i < kLeaseMaxTenants; ++i) {
    Tenant& t = tenants_[i];
    if (!t.active) continue;
    const uint64_t observed = board_->node[i].observed_extra_ns.load(std::memory_order_acquire);
    if (observed <= t.observed_seen_ns) {
      t.observed_seen_ns = observed;  // only the node side writes it; never backwards in practice
      continue;
    }
    const uint64_t charge = std::min(observed - t.observed_seen_ns, kMaxMeasuredCreditNs);
    t.observed_seen_ns = observed;
    t.stats.recharged_ns += charge;
    ChargeSlot(i, charge);
  }
}

uint64_t UnderChargedNs(uint64_t observed_ns, uint64_t charged_ns, uint64_t window_ns) {
  const uint64_t margin = window_ns / 1000 * kObservedMarginMilli;
  if (observed_ns < charged_ns + margin || observed_ns <= 2 * charged_ns) return 0;
  return observed_ns - charged_ns;
}

UnderChargeTracker::UnderChargeTracker(std::chrono::nanoseconds lag, std::chrono::nanoseconds horizon)
    : lag_ns_(static_cast<uint64_t>(std::max<int64_t>(0, lag.count()))),
      horizon_ns_(static_cast<uint64_t>(std::max<int64_t>(1, horizon.count()))) {}

uint64_t UnderChargeTracker::Pass(uint64_t observed_ns, uint64_t own_ns, uint64_t window_ns) {
  const double f = std::exp(-static_cast<double>(window_ns) / static_cast<double>(horizon_ns_));
  observed_ *= f;
  own_ *= f;
  window_ *= f;
  added_ *= f;
  pending_.emplace_back(observed_ns, window_ns);
  pending_window_ns_ += window_ns;
  // A pass enters the comparison once the passes after it cover the lag.
  while (!pending_.empty() && pending_window_ns_ - pending_.front().second >= lag_ns_) {
    observed_ += static_cast<double>(pending_.front().first);
    window_ += static_cast<double>(pending_.front().second);
    pending_window_ns_ -= pending_.front().second;
    pending_.pop_front();
  }
  own_ += static_cast<double>(own_ns);
  const double target = static_cast<double>(
      UnderChargedNs(static_cast<uint64_t>(observed_), static_cast<uint64_t>(own_), static_cast<uint64_t>(window_)));
  if (target <= added_) return 0;
  const uint64_t add = static_cast<uint64_t>(target - added_);
  added_ += static_cast<double>(add);
  return add;
}

double LeaseArbiter::Share(uint32_t slot) const {
  return window_ns_ <= 0 ? 0.0 : tenants_[slot].usage_ns / window_ns_;
}

void LeaseArbiter::EndLease(uint64_t now_ns, LeaseEndReason reason) {
  const uint32_t slot = lease_.slot;
  enforce::LeaseTenantSlot& s = board_->slots[slot];
  const uint64_t launches = s.tenant.launches.load(std::memory_order_acquire);
  Tenant& t = tenants_[slot];
  // The tenant's own estimate of its submitted work: believed up to the tail bound (a value that
  // went backwards wraps to a huge delta and is clamped too).
  const uint64_t reported_est = s.tenant.submitted_est_ns.load(std::memory_order_acquire) - lease_.est_at_grant;
  const uint64_t est_delta = std::min(reported_est, TailBound() - lease_.start_ns);
  if (est_delta != reported_est) {
    ++t.stats.implausible_reports;
    t.stats.clamped_ns += reported_est - est_delta;
  }
  const bool used = launches != lease_.launches_at_grant;
  // Its last launch as it reports it, but not after the lease's end (a time in the future would
  // charge it for time that has not passed).
  const uint64_t last =
      used ? std::max(std::min(s.tenant.last_launch_ns.load(std::memory_order_acquire), std::min(now_ns, lease_.expiry_ns)),
                      lease_.granted_ns)
           : lease_.granted_ns;
  const bool metering = Metering(slot);
  uint64_t work_end =
      metering ? std::max(lease_.start_ns, s.gpu.busy_until_ns.load(std::memory_order_acquire)) : lease_.start_ns + est_delta;
  if (work_end > TailBound()) {
    ++t.stats.implausible_reports;
    work_end = TailBound();
  }
  const uint64_t idle_at = IdleAt(used);
  const uint64_t end_time = std::min(now_ns, lease_.expiry_ns);
  // A holder that stopped launching before the end used the GPU up to its last launch (plus
  // its submitted work, below); an unused grant is charged the time it was reserved.
  const uint64_t busy_end = (used && idle_at <= end_time) ? std::max(last, lease_.start_ns) : end_time;
  const uint64_t elapsed = busy_end > lease_.start_ns ? busy_end - lease_.start_ns : 0;
  // A metering tenant's used lease is charged through ChargeMeasured (its events), not here.
  const uint64_t charge = metering ? (used ? 0 : elapsed) : std::max(elapsed, est_delta);

  ChargeSlot(slot, charge);
  switch (reason) {
    case LeaseEndReason::kExpired: ++t.stats.ended_expired; break;
    case LeaseEndReason::kIdle: ++t.stats.ended_idle; break;
    case LeaseEndReason::kPreempted:
      ++t.stats.ended_preempted;
      board_->node[slot].preemptions.fetch_add(1, std::memory_order_relaxed);
      break;
    case LeaseEndReason::kReturned: ++t.stats.ended_returned; break;
    case LeaseEndReason::kRemoved:
    case LeaseEndReason::kStopped: break;
  }
  if (!used) {
    ++t.stats.unused_grants;
    board_->node[slot].unused_grants.fetch_add(1, std::memory_order_relaxed);
    t.suppressed = true;
    t.suppressed_epoch = s.tenant.wait_epoch.load(std::memory_order_acquire);
  }
  // Work still queued on the GPU delays the next holder's start.
  gpu_free_est_ns_ = std::max(gpu_free_est_ns_, work_end);

  board_->lease.word.store(0, std::memory_order_release);
  board_->lease.holder.store(0, std::memory_order_relaxed);
  board_->lease.generation.fetch_add(1, std::memory_order_release);
  lease_.active = false;
}

void LeaseArbiter::Grant(uint32_t slot, uint64_t now_ns) {
  enforce::LeaseTenantSlot& s = board_->slots[slot];
  // The lease expires one quantum after the grant, so a waiter never waits more than a
  // quantum for it to end; a holder whose start is delayed by the previous tail gets less
  // GPU time in it (and is charged only from `start`), but at least a quarter quantum.
  const uint64_t start = std::max(now_ns, gpu_free_est_ns_);
  const uint64_t expiry = std::max(now_ns + Ns(options_.quantum), start + Ns(options_.quantum) / 4);
  lease_ = Lease{.active = true,
                 .slot = slot,
                 .granted_ns = now_ns,
                 .start_ns = start,
                 .expiry_ns = expiry,
                 .launches_at_grant = s.tenant.launches.load(std::memory_order_acquire),
                 .est_at_grant = s.tenant.submitted_est_ns.load(std::memory_order_acquire)};
  board_->lease.start_ns.store(start, std::memory_order_relaxed);
  board_->lease.expiry_ns.store(expiry, std::memory_order_relaxed);
  board_->lease.holder.store(slot + 1, std::memory_order_relaxed);
  board_->lease.word.store(enforce::PackLeaseWord(slot, expiry), std::memory_order_release);
  board_->lease.generation.fetch_add(1, std::memory_order_release);
  Tenant& t = tenants_[slot];
  t.suppressed = false;
  t.runnable_since_ns = 0;
  ++t.stats.grants;
  board_->node[slot].grants.fetch_add(1, std::memory_order_relaxed);
  // The lease word is stored before the sequence moves: a waiter that read the old sequence
  // either sees the lease or finds the futex value changed (WaitForLease).
  board_->node[slot].wake_seq.fetch_add(1, std::memory_order_acq_rel);
  enforce::FutexWake(board_->node[slot].wake_seq, INT_MAX);
}

uint64_t LeaseArbiter::Step(uint64_t now_ns) {
  ++steps_;
  board_->arbiter.heartbeat_ns.store(now_ns, std::memory_order_relaxed);
  Decay(now_ns);
  ChargeMeasured(now_ns);
  ChargeObserved();

  // 1. End the current lease if it is over.
  std::optional<uint32_t> still_busy;  // a holder cut off while it still had work
  if (lease_.active) {
    const uint32_t slot = lease_.slot;
    const auto& line = board_->slots[slot].tenant;
    const bool used = line.launches.load(std::memory_order_acquire) != lease_.launches_at_grant;
    const uint64_t idle_at = IdleAt(used);
    std::optional<LeaseEndReason> reason;
    if (!tenants_[slot].active) {
      reason = LeaseEndReason::kRemoved;
    } else if (now_ns >= lease_.expiry_ns) {
      reason = LeaseEndReason::kExpired;
      if (used && idle_at > lease_.expiry_ns) still_busy = slot;
    } else if (now_ns >= idle_at) {
      reason = LeaseEndReason::kIdle;
    } else if (preempt_ && HigherPriorityWaiting(tenants_[slot].config.priority)) {
      reason = LeaseEndReason::kPreempted;
      if (used) still_busy = slot;
    } else if (LenderReturned()) {
      reason = LeaseEndReason::kReturned;
      if (used) still_busy = slot;
    }
    if (reason) EndLease(now_ns, *reason);
  }

  // 2. Grant the next lease.
  bool capped = false;
  if (!lease_.active) {
    std::vector<RunnableClient> runnable;
    std::optional<uint32_t> below_min;
    double best_deficit = 0;
    for (uint32_t i = 0; i < kLeaseMaxTenants; ++i) {
      Tenant& t = tenants_[i];
      if (!t.active) continue;
      if (!HasDemand(i) && still_busy != i) {
        t.runnable_since_ns = 0;
        continue;
      }
      const double share = Share(i);
      if (t.config.max_share < 1.0 && share >= t.config.max_share) {
        capped = true;
        continue;
      }
      if (t.runnable_since_ns == 0) t.runnable_since_ns = now_ns;
      const uint64_t rel = t.config.deadline.count() > 0 ? Ns(t.config.deadline) : Ns(options_.quantum);
      runnable.push_back({.id = i, .deadline = Nanos(t.runnable_since_ns + rel)});
      if (t.config.min_share > 0 && share < t.config.min_share && t.config.min_share - share > best_deficit) {
        best_deficit = t.config.min_share - share;
        below_min = i;
      }
    }
    const std::vector<uint32_t> paused = Paused(now_ns);
    policy_->KeepPlace(paused, Nanos(kMaxPausedLagQuanta * Ns(options_.quantum)));
    std::optional<uint32_t> pick = below_min ? below_min : policy_->Pick(runnable);
    if (pick) {
      Grant(*pick, now_ns);
      for (uint32_t i : paused) {
        if (policy_->Prefers(i, *pick)) lease_.lenders.push_back(i);
      }
    }
  }

  // 3. When to look again.
  uint64_t next = now_ns + Ns(options_.max_sleep);
  if (lease_.active) {
    next = std::min(next, lease_.expiry_ns);
    bool others = false;
    for (uint32_t i = 0; i < kLeaseMaxTenants && !others; ++i) others = i != lease_.slot && HasDemand(i);
    if (others) {
      // Someone waits: look again when the holder could count as idle.
      const auto& line = board_->slots[lease_.slot].tenant;
      const bool used = line.launches.load(std::memory_order_acquire) != lease_.launches_at_grant;
      const uint64_t idle_at = IdleAt(used);
      next = std::min(next, std::max(idle_at, now_ns + kMinStepNs));
    }
  } else if (capped) {
    next = std::min(next, now_ns + kCappedPollNs);
  }
  return std::max(next, now_ns + 1);
}

void LeaseArbiter::Stop(uint64_t now_ns) {
  if (lease_.active) EndLease(now_ns, LeaseEndReason::kStopped);
}

std::optional<uint32_t> LeaseArbiter::holder() const {
  return lease_.active ? std::optional<uint32_t>(lease_.slot) : std::nullopt;
}

LeaseTenantStats LeaseArbiter::stats(uint32_t slot) const {
  return slot < kLeaseMaxTenants ? tenants_[slot].stats : LeaseTenantStats{};
}

void LeaseArbiterRunner::Start() {
  if (thread_.joinable()) return;
  stop_.store(false);
  thread_ = std::thread([this] { Loop(); });
}

void LeaseArbiterRunner::Stop() {
  if (!thread_.joinable()) return;
  stop_.store(true);
  Ring();
  thread_.join();
}

void LeaseArbiterRunner::Ring() {
  enforce::RingNodeDoorbell(arbiter_.board());
}

void LeaseArbiterRunner::Loop() {
  enforce::LeaseBoard& board = arbiter_.board();
  while (!stop_.load()) {
    // Read the doorbells before stepping: a tenant that rings during the step makes the wait
    // below return at once.
    const enforce::DoorbellSnapshot seen = enforce::ReadDoorbells(board);
    uint64_t next;
    {
      std::lock_guard<std::mutex> lock(mu_);
      next = arbiter_.Step(enforce::MonotonicNowNs());
    }
    const uint64_t now = enforce::MonotonicNowNs();
    if (next > now && !stop_.load()) enforce::WaitForDoorbells(board, seen, next - now);
  }
  std::lock_guard<std::mutex> lock(mu_);
  arbiter_.Stop(enforce::MonotonicNowNs());
}

}  // namespace tessera::node
