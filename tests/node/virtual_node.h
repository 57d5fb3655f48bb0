// VirtualNode: a discrete-event model of one GPU shared by tenant processes under a
// LeaseArbiter, on a virtual clock. It is the fake driver of the compute tests: every kernel
// takes a known time on a FIFO GPU (kernels run back to back in submission order, so a
// holder's queued tail delays the next holder, as on a real GPU), and each process runs the
// real tenant-side gate (enforce::TryAdmitLaunch / BeginLeaseWait / RenewLeaseWait /
// EndLeaseWait) against a real LeaseBoard in memory. Only the sleeping is modelled: a process
// that must wait parks until the arbiter bumps its slot's wake_seq, then retries after
// `wake_latency`; a tenant ringing the doorbell makes the arbiter step after `arbiter_latency`.
//
//   VirtualNode node({.policy = "weighted_fair"});
//   node.AddTenant(0, {.weight = 3, .kernel_estimate = 1ms});
//   node.AddProcess({.slot = 0, .kernel = 1ms});
//   VirtualNode::Result r = node.Run(10s);     // r.gpu_ns[0], r.waits_ns[0], ...
//
// ObserveEvery(period) adds the node side's view (the agent's NVML backstop, node/agent.h): every
// period, each slot's GPU time over the period (what the FIFO GPU ran for it) is compared with the
// growth of its board charge (less what the observer added itself) through the agent's rule
// (UnderChargeTracker, its 5 s lag included), and what it finds is added to the slot's node-line
// observed_extra_ns, which the arbiter charges at its next step. A kernel's GPU time counts at its
// launch here, and a metering tenant reports it when the kernel ends: NVML sees a long kernel
// before its tenant reports it, as on a real GPU.
//
// Deterministic: same specs and seed, same result. Single-threaded.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <queue>
#include <vector>

#include "tessera/core/rng.h"
#include "tessera/node/lease_arbiter.h"
#include "tessera/enforce/lease.h"

namespace tessera::node::testing {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::seconds;

struct SimProcess {
  uint32_t slot = 0;
  Nanos kernel = milliseconds(1);  // GPU time of one kernel
  double jitter = 0;               // kernel time uniform in kernel * [1 - jitter, 1 + jitter)
  uint32_t max_inflight = 1;       // 1: synchronous (launch, wait for it, launch ...)
  Nanos launch_gap = microseconds(5);     // CPU time between two launches
  Nanos wake_latency = microseconds(30);  // futex wake to running again
  Nanos active_from{0};                   // continuous demand in [active_from, active_until)
  Nanos active_until = Nanos::max();
  Nanos period{0};       // > 0: instead, a burst of `burst` launches every `period`
  Nanos phase{0};        // first burst at `phase`
  uint32_t burst = 0;
  enforce::LaunchKind kind = enforce::LaunchKind::kKernel;
  uint32_t graph_kernels = 1;  // kGraph: GPU time = graph_kernels * kernel
  // >= 0: the tenant meters its GPU time (the shim's gpu_meter.h: the slot's metering flag, its
  // queued work's end in busy_until_ns, its kernel time in unit_ns) and adds `report` x each
  // finished kernel's GPU time to gpu_ns: 1 is honest, 0.1 a tenant that under-reports tenfold.
  double report = -1;
};

class VirtualNode {
 public:
  struct Result {
    std::array<uint64_t, enforce::kLeaseMaxTenants> gpu_ns{};    // GPU time per slot in [0, T)
    std::array<uint64_t, enforce::kLeaseMaxTenants> launches{};  // admitted launches per slot
    std::array<std::vector<uint64_t>, enforce::kLeaseMaxTenants> waits_ns;  // gate waits
    uint64_t busy_ns = 0;                                        // GPU busy time in [0, T)
    double Share(uint32_t slot) const {
      uint64_t total = 0;
      for (uint64_t g : gpu_ns) total += g;
      return total == 0 ? 0.0 : static_cast<double>(gpu_ns[slot]) / static_cast<double>(total);
    }
    uint64_t MaxWait(uint32_t slot) const {
      return waits_ns[slot].empty() ? 0 : *std::max_element(waits_ns[slot].begin(), waits_ns[slot].end());
    }
  };

  explicit VirtualNode(const LeaseArbiterOptions& options, uint64_t seed = 1,
                       Nanos arbiter_latency = microseconds(10))
      : memory_(new Storage), rng_(seed), arbiter_latency_(static_cast<uint64_t>(arbiter_latency.count())) {
    EXPECT_EQ(enforce::InitLeaseBoard(memory_.get(), sizeof(Storage), 0, 0, &board_), enforce::LeaseBoardCheck::kOk);
    auto a = LeaseArbiter::Create(board_, options);
    EXPECT_TRUE(a.ok()) << a.status().ToString();
    if (a.ok()) arbiter_ = std::move(a).value();
  }

  void AddTenant(uint32_t slot, const LeaseTenantConfig& config) {
    ASSERT_TRUE(arbiter_ != nullptr);
    const Status s = arbiter_->AddTenant(slot, config);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  void AddProcess(const SimProcess& spec) { procs_.push_back(Proc{.spec = spec}); }
  void ObserveEvery(Nanos period) { observe_period_ = Ns(period); }
  enforce::LeaseBoard& board() { return *board_; }
  LeaseArbiter& arbiter() { return *arbiter_; }

  Result Run(Nanos duration) {
    result_ = Result{};
    end_ = static_cast<uint64_t>(duration.count());
    for (uint32_t i = 0; i < procs_.size(); ++i) {
      Proc& p = procs_[i];
      if (p.spec.period.count() > 0) {
        Push(Ns(p.spec.phase), Kind::kBurst, i);
      } else {
        Push(Ns(p.spec.active_from), Kind::kTry, i);
        p.try_pending = true;
      }
    }
    ScheduleArbiter(0);
    if (observe_period_ > 0) Push(observe_period_, Kind::kObserve, 0);
    while (!events_.empty()) {
      const Event e = events_.top();
      events_.pop();
      if (e.t >= end_) break;
      now_ = e.t;
      switch (e.kind) {
        case Kind::kArbiter:
          if (e.token == arbiter_token_) StepArbiter();
          break;
        case Kind::kTry: Try(e.index); break;
        case Kind::kDone: Done(e.index, e.token); break;
        case Kind::kBurst: Burst(e.index); break;
        case Kind::kObserve: Observe(); break;
      }
    }
    return result_;
  }

 private:
  struct alignas(64) Storage {
    unsigned char bytes[sizeof(enforce::LeaseBoard)];
  };
  enum class Kind { kArbiter, kTry, kDone, kBurst, kObserve };
  struct Event {
    uint64_t t;
    uint64_t seq;
    Kind kind;
    uint32_t index;
    uint64_t token;
    bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
  };
  struct Proc {
    SimProcess spec;
    bool try_pending = false;
    bool parked = false;
    bool blocked = false;  // in-flight limit reached
    uint64_t wait_start = 0;
    uint32_t inflight = 0;
    uint32_t burst_left = 0;
  };

  static uint64_t Ns(Nanos d) { return static_cast<uint64_t>(d.count()); }

  void Push(uint64_t t, Kind kind, uint32_t index, uint64_t token = 0) {
    events_.push(Event{t, seq_++, kind, index, token});
  }
  void ScheduleArbiter(uint64_t t) {
    if (arbiter_armed_ && t >= arbiter_at_) return;
    arbiter_armed_ = true;
    arbiter_at_ = t;
    Push(t, Kind::kArbiter, 0, ++arbiter_token_);
  }
  void RingDoorbell() { ScheduleArbiter(now_ + arbiter_latency_); }

  bool Wants(const Proc& p) const {
    if (p.spec.period.count() > 0) return p.burst_left > 0;
    return now_ >= Ns(p.spec.active_from) && (p.spec.active_until == Nanos::max() || now_ < Ns(p.spec.active_until));
  }

  void ScheduleTry(uint32_t i, uint64_t t) {
    if (procs_[i].try_pending) return;
    procs_[i].try_pending = true;
    Push(t, Kind::kTry, i);
  }

  void StepArbiter() {
    arbiter_armed_ = false;
    std::array<uint32_t, enforce::kLeaseMaxTenants> before;
    for (uint32_t s = 0; s < enforce::kLeaseMaxTenants; ++s) {
      before[s] = board_->node[s].wake_seq.load();
    }
    const uint64_t next = arbiter_->Step(now_);
    for (uint32_t i = 0; i < procs_.size(); ++i) {
      const uint32_t s = procs_[i].spec.slot;
      if (procs_[i].parked && board_->node[s].wake_seq.load() != before[s]) {
        ScheduleTry(i, now_ + Ns(procs_[i].spec.wake_latency));
      }
    }
    ScheduleArbiter(next);
  }

  void Burst(uint32_t i) {
    Proc& p = procs_[i];
    p.burst_left += p.spec.burst;
    Push(now_ + Ns(p.spec.period), Kind::kBurst, i);
    if (!p.parked && !p.blocked) ScheduleTry(i, now_);
  }

  void Try(uint32_t i) {
    Proc& p = procs_[i];
    p.try_pending = false;
    if (!Wants(p)) {
      if (p.parked) {  // demand ended while waiting (end of an active window)
        enforce::EndLeaseWait(*board_, p.spec.slot, now_ - p.wait_start);
        p.parked = false;
      }
      if (p.spec.period.count() == 0 && now_ < Ns(p.spec.active_from)) ScheduleTry(i, Ns(p.spec.active_from));
      return;  // idle (a burst event or nothing wakes it)
    }
    if (p.inflight >= p.spec.max_inflight) {
      p.blocked = true;
      return;
    }
    const uint32_t slot = p.spec.slot;
    if (p.parked) {
      if (!enforce::LeaseHeld(*board_, slot, now_)) {
        enforce::RenewLeaseWait(*board_, slot);  // as WaitForLease does after a wake-up
        RingDoorbell();
        return;
      }
      enforce::EndLeaseWait(*board_, slot, now_ - p.wait_start);
      p.parked = false;
      result_.waits_ns[slot].push_back(now_ - p.wait_start);
    }
    const enforce::LaunchRequest req{.kind = p.spec.kind, .graph_kernels = p.spec.graph_kernels};
    const enforce::GateResult r = enforce::TryAdmitLaunch(*board_, slot, req, now_);
    if (r == enforce::GateResult::kMustWait) {
      p.parked = true;
      p.wait_start = now_;
      enforce::BeginLeaseWait(*board_, slot);
      RingDoorbell();
      return;
    }
    EXPECT_EQ(r, enforce::GateResult::kAdmitted);
    ++result_.launches[slot];
    if (p.burst_left > 0) --p.burst_left;
    uint64_t dur = Ns(p.spec.kernel);
    if (p.spec.jitter > 0) {
      dur = static_cast<uint64_t>(static_cast<double>(dur) * (1.0 - p.spec.jitter + 2 * p.spec.jitter * rng_.UniformDouble()));
    }
    if (p.spec.kind == enforce::LaunchKind::kGraph) dur *= p.spec.graph_kernels;
    const uint64_t start = std::max(now_, gpu_free_);
    const uint64_t end = start + dur;
    gpu_free_ = end;
    const uint64_t clipped = end <= end_ ? dur : (start < end_ ? end_ - start : 0);
    result_.gpu_ns[slot] += clipped;
    result_.busy_ns += clipped;
    ++p.inflight;
    if (p.spec.report >= 0) {
      enforce::LeaseSlotGpuLine& gpu = board_->slots[slot].gpu;
      gpu.metering.store(1);
      gpu.unit_ns.store(dur);
      gpu.busy_until_ns.store(std::max(gpu.busy_until_ns.load(), end));
    }
    Push(end, Kind::kDone, i, dur);
    ScheduleTry(i, now_ + Ns(p.spec.launch_gap));
  }

  void Observe() {
    for (uint32_t s = 0; s < enforce::kLeaseMaxTenants; ++s) {
      enforce::LeaseSlotNodeLine& line = board_->node[s];
      const uint64_t charged = line.charged_ns.load(), extra = line.observed_extra_ns.load();
      const uint64_t ran = result_.gpu_ns[s] - observed_[s].ran;
      // The charge's growth less what the previous observation added (the arbiter charged it since).
      const int64_t own = static_cast<int64_t>(charged - observed_[s].charged) - static_cast<int64_t>(extra - observed_[s].extra);
      line.observed_extra_ns.fetch_add(trackers_[s].Pass(ran, static_cast<uint64_t>(std::max<int64_t>(own, 0)), observe_period_));
      observed_[s] = {result_.gpu_ns[s], charged, extra};
    }
    Push(now_ + observe_period_, Kind::kObserve, 0);
  }

  void Done(uint32_t i, uint64_t dur) {
    Proc& p = procs_[i];
    --p.inflight;
    if (p.spec.report >= 0) {
      board_->slots[p.spec.slot].gpu.gpu_ns.fetch_add(static_cast<uint64_t>(static_cast<double>(dur) * p.spec.report));
    }
    if (p.blocked) {
      p.blocked = false;
      ScheduleTry(i, now_);
    }
  }

  std::unique_ptr<Storage> memory_;
  enforce::LeaseBoard* board_ = nullptr;
  std::unique_ptr<LeaseArbiter> arbiter_;
  std::vector<Proc> procs_;
  Rng rng_;
  uint64_t arbiter_latency_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  uint64_t seq_ = 0;
  uint64_t now_ = 0;
  uint64_t end_ = 0;
  uint64_t gpu_free_ = 0;
  bool arbiter_armed_ = false;
  uint64_t arbiter_at_ = 0;
  uint64_t arbiter_token_ = 0;
  Result result_;
  uint64_t observe_period_ = 0;  // ObserveEvery; 0: off
  struct Observed {
    uint64_t ran = 0, charged = 0, extra = 0;  // at the previous observation
  };
  std::array<Observed, enforce::kLeaseMaxTenants> observed_{};
  std::array<UnderChargeTracker, enforce::kLeaseMaxTenants> trackers_{};  // the agent's, per slot
};

}  // namespace tessera::node::testing
