#include "tessera/metering/invoice.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <unordered_map>

namespace tessera::metering {

namespace {

constexpr Int128 kMilliSPerGpuHour = 1000 * kSecondsPerHour;  // milli-GPU-s in a GPU-hour
constexpr Int128 kMibSPerGibHour = 1024 * kSecondsPerHour;

enum class Kind { kWhole, kShare, kMig };

// One tenant's use of one model in the period.
struct Slot {
  int tenant = 0;
  std::string model;
  Int128 whole = 0, share = 0, memory = 0;  // milli-GPU-s (basis), milli-GPU-s, MiB-s
  std::map<std::string, Int128> mig;        // profile -> seconds
  std::vector<int64_t> basis_by_hour;       // whole + share basis, per hour of the period
  std::vector<int64_t> mig_held_by_hour;    // MIG as milli-GPU-s (compute slices), if any
};

struct PendingLine {
  int account;
  InvoiceLine line;
  Int128 num;
};

struct Pool {
  Int128 den = 1;
  std::vector<PendingLine> lines;
};

std::string Qty(Int128 num, Int128 den) { return FormatRational(num, den, 6); }

class Run {
 public:
  Run(const PricePlan& plan, const Period& period, const GpuModelCatalog& catalog, const InvoiceOptions& o)
      : plan_(plan), period_(period), catalog_(catalog), hours_(period.Hours()) {
    // The observed hours, as indexes of the period's hours: [first_, last_).
    auto clip = [&](int64_t t, bool up) {
      if (t <= period.start) return int64_t{0};
      if (t >= period.end) return hours_;
      const int64_t h = (t - period.start) / kSecondsPerHour;
      return up && (t - period.start) % kSecondsPerHour != 0 ? h + 1 : h;
    };
    first_ = clip(o.observed_start, false);
    last_ = std::max(first_, clip(o.observed_end, true));
    for (const Reservation& r : plan.reservations) {
      if (!o.tenant_exists || o.tenant_exists(r.tenant)) {
        reservations_.push_back(&r);
      } else {
        notes_.push_back("reservation " + r.tenant + "/" + r.model + " not billed: tenant " + r.tenant +
                         " does not exist");
      }
    }
  }

  Status Collect(const std::vector<SourceKey>& sources, const std::vector<HourlyRecord>& records);
  void Charge();
  InvoiceRun Finish(const std::vector<SlaObservation>& sla);
  std::vector<std::string> problems;

 private:
  int Account(const std::string& name) {
    auto [it, inserted] = account_ids_.try_emplace(name, static_cast<int>(accounts_.size()));
    if (inserted) accounts_.push_back(name);
    return it->second;
  }
  const ModelPrices* Prices(const std::string& model) const {
    auto it = plan_.prices.find(model);
    return it == plan_.prices.end() ? nullptr : &it->second;
  }
  void Missing(const std::string& what) { missing_.insert(what); }
  void ChargeCompute(Slot& s, const Reservation* r);
  void ChargeTiers(Slot& s, Int128 q, const ModelPrices& p);
  void ChargeIdle(const std::string& model, int64_t gpus);
  void Add(const std::string& pool_key, Int128 den, int account, InvoiceLine line, Int128 num) {
    Pool& p = pools_[pool_key];
    p.den = den;
    p.lines.push_back({account, std::move(line), num});
  }
  Micro ListCost(const std::string& model, Int128 milli_s) const {
    const ModelPrices* p = Prices(model);
    if (p == nullptr || !p->gpu_hour) return 0;
    return static_cast<Micro>(RoundHalfAway(milli_s * *p->gpu_hour, kMilliSPerGpuHour));
  }

  const PricePlan& plan_;
  const Period& period_;
  const GpuModelCatalog& catalog_;
  int64_t hours_;
  std::vector<std::string> accounts_;
  std::unordered_map<std::string, int> account_ids_;
  std::vector<Slot> slots_;
  std::set<std::string> missing_;
  std::map<std::string, Pool> pools_;  // by key: a stable order of pools
  std::vector<std::vector<InvoiceLine>> lines_;  // per account, after allocation
  std::vector<Int128> totals_;
  Int128 metered_ = 0;
  int64_t first_ = 0, last_ = 0;  // the observed hours of the period
  std::vector<const Reservation*> reservations_;  // of tenants that exist
  std::vector<std::string> notes_;

 public:
  bool overflow_ = false;  // an amount left the int64 micro-unit range
};

Status Run::Collect(const std::vector<SourceKey>& sources, const std::vector<HourlyRecord>& records) {
  // Per source: its slot, kind, MIG profile and the milli-GPU a MIG instance of it holds.
  struct SourceInfo {
    int slot = -1;
    Kind kind = Kind::kWhole;
    int64_t mig_milli = 0;  // x 7 (the slices' denominator is applied per record)
    int64_t mig_den = 1;
  };
  std::vector<SourceInfo> info(sources.size());
  std::map<std::pair<std::string, std::string>, int> slot_ids;
  std::vector<bool> resolved(sources.size(), false);
  for (const HourlyRecord& r : records) {
    if (r.hour < period_.start || r.hour >= period_.end || r.source >= sources.size()) continue;
    SourceInfo& si = info[r.source];
    if (!resolved[r.source]) {
      resolved[r.source] = true;
      const SourceKey& k = sources[r.source];
      auto [it, inserted] = slot_ids.try_emplace({k.tenant, k.model}, static_cast<int>(slots_.size()));
      if (inserted) {
        Slot s;
        s.tenant = Account(k.tenant);
        s.model = k.model;
        s.basis_by_hour.assign(static_cast<size_t>(hours_), 0);
        slots_.push_back(std::move(s));
      }
      si.slot = it->second;
      si.kind = k.partition == "whole" ? Kind::kWhole : k.partition == "share" ? Kind::kShare : Kind::kMig;
      if (si.kind == Kind::kMig) {
        auto id = catalog_.Find(k.model);
        const MigProfile* p = id.ok() && catalog_.info(*id).mig ? catalog_.info(*id).mig->FindProfile(k.partition) : nullptr;
        if (p == nullptr) {
          problems.push_back("source " + k.tenant + "/" + k.node + "/" + k.gpu + ": '" + k.partition +
                             "' is not a MIG profile of " + k.model);
          continue;
        }
        int slices = 1;
        for (const MigProfile& q : catalog_.info(*id).mig->profiles) slices = std::max(slices, q.compute_slices);
        si.mig_milli = 1000 * p->compute_slices;
        si.mig_den = slices;
      }
    }
    if (si.slot < 0) continue;
    Slot& s = slots_[si.slot];
    const size_t h = static_cast<size_t>((r.hour - period_.start) / kSecondsPerHour);
    s.memory += r.memory_mib_s;
    if (si.kind == Kind::kMig) {
      const std::string& profile = sources[r.source].partition;
      s.mig[profile] += r.seconds;
      if (s.mig_held_by_hour.empty()) s.mig_held_by_hour.assign(static_cast<size_t>(hours_), 0);
      s.mig_held_by_hour[h] += r.seconds * si.mig_milli / si.mig_den;
      continue;
    }
    const int64_t basis = std::max(r.gpu_milli_s_allocated, r.gpu_milli_s_used);
    (si.kind == Kind::kWhole ? s.whole : s.share) += basis;
    s.basis_by_hour[h] += basis;
  }
  return Status::Ok();
}

void Run::ChargeTiers(Slot& s, Int128 q, const ModelPrices& p) {
  const std::string& m = s.model;
  for (size_t k = 0; k < p.tiers.size(); ++k) {
    const PriceTier& t = p.tiers[k];
    const Int128 lo = Int128{t.from_gpu_hours} * kMilliSPerGpuHour;
    const Int128 hi = t.to_gpu_hours < 0 ? q : std::min<Int128>(q, Int128{t.to_gpu_hours} * kMilliSPerGpuHour);
    if (hi <= lo) continue;
    const std::string range = std::to_string(t.from_gpu_hours) + "-" +
                              (t.to_gpu_hours < 0 ? std::string() : std::to_string(t.to_gpu_hours));
    InvoiceLine l{m + " GPU-hours, tier " + range, Qty(hi - lo, kMilliSPerGpuHour), "GPU-hour", 0,
                  ListCost(m, hi - lo), FormatMicro(t.gpu_hour), "Usage", "Standard", "gpu", m, "", "", ""};
    Add("gpu/" + m + "/tier" + std::to_string(k), kMilliSPerGpuHour, s.tenant, l, (hi - lo) * t.gpu_hour);
  }
}

void Run::ChargeCompute(Slot& s, const Reservation* r) {
  const std::string& m = s.model;
  const ModelPrices* p = Prices(m);
  if (r != nullptr) {
    const int64_t cap = r->gpu_milli * kSecondsPerHour;
    // Outside the observed hours nothing is committed: use there is burst.
    Int128 covered = 0, over = 0;
    for (int64_t h = 0; h < hours_; ++h) {
      const int64_t b = s.basis_by_hour[static_cast<size_t>(h)];
      const int64_t c = h >= first_ && h < last_ ? cap : 0;
      covered += std::min(b, c);
      over += std::max<int64_t>(0, b - c);
    }
    const Int128 committed = Int128{cap} * (last_ - first_);
    const std::string id = r->tenant + "/" + m;
    const std::string price = FormatMicro(r->gpu_hour);
    Add("reservation/" + id, kMilliSPerGpuHour, s.tenant,
        {m + " reserved (used)", Qty(covered, kMilliSPerGpuHour), "GPU-hour", 0, ListCost(m, covered), price,
         "Purchase", "Committed", "reservation", m, "", id, "Used"},
        covered * r->gpu_hour);
    Add("reservation/" + id, kMilliSPerGpuHour, s.tenant,
        {m + " reserved (unused)", Qty(committed - covered, kMilliSPerGpuHour), "GPU-hour", 0, 0, price,
         "Purchase", "Committed", "reservation", m, "", id, "Unused"},
        (committed - covered) * r->gpu_hour);
    if (over > 0) {
      const Micro burst = r->burst_gpu_hour ? *r->burst_gpu_hour : p != nullptr && p->gpu_hour ? *p->gpu_hour : 0;
      if (!r->burst_gpu_hour && (p == nullptr || !p->gpu_hour)) Missing("prices." + m + ".gpu_hour (burst above the reservation of " + r->tenant + ")");
      Add("burst/" + m + "/" + std::to_string(burst), kMilliSPerGpuHour, s.tenant,
          {m + " burst above reservation", Qty(over, kMilliSPerGpuHour), "GPU-hour", 0, ListCost(m, over),
           FormatMicro(burst), "Usage", "Dynamic", "burst", m, "", id, ""},
          over * burst);
    }
  } else if (s.whole + s.share > 0) {
    if (p != nullptr && !p->tiers.empty()) {
      ChargeTiers(s, s.whole + s.share, *p);
    } else {
      if (s.whole > 0) {
        if (p == nullptr || !p->gpu_hour) Missing("prices." + m + ".gpu_hour (whole-GPU use)");
        const Micro price = p != nullptr && p->gpu_hour ? *p->gpu_hour : 0;
        Add("gpu/" + m + "/whole", kMilliSPerGpuHour, s.tenant,
            {m + " whole GPU", Qty(s.whole, kMilliSPerGpuHour), "GPU-hour", 0, ListCost(m, s.whole),
             FormatMicro(price), "Usage", "Standard", "gpu", m, "", "", ""},
            s.whole * price);
      }
      if (s.share > 0) {
        // Per milli-GPU-hour; without milli_gpu_hour, gpu_hour / 1000 (exactly, as a rational).
        Int128 num = 0;
        std::string price;
        if (p != nullptr && p->milli_gpu_hour) {
          num = s.share * *p->milli_gpu_hour * 1000;
          price = FormatMicro(*p->milli_gpu_hour);
        } else if (p != nullptr && p->gpu_hour) {
          num = s.share * *p->gpu_hour;
          price = FormatRational(*p->gpu_hour, Int128{1000} * kMicroPerUnit, 9);
        } else {
          Missing("prices." + m + ".milli_gpu_hour or gpu_hour (shared-GPU use)");
        }
        Add("gpu/" + m + "/share", kMilliSPerGpuHour, s.tenant,
            {m + " GPU share", Qty(s.share, kSecondsPerHour), "milli-GPU-hour", 0, ListCost(m, s.share), price,
             "Usage", "Standard", "gpu_share", m, "", "", ""},
            num);
      }
    }
  }
  for (const auto& [profile, seconds] : s.mig) {
    auto it = p != nullptr ? p->mig.find(profile) : std::map<std::string, Micro>::const_iterator();
    if (p == nullptr || it == p->mig.end()) {
      Missing("prices." + m + ".mig." + profile + " (MIG use)");
      continue;
    }
    Add("mig/" + m + "/" + profile, kSecondsPerHour, s.tenant,
        {m + " MIG " + profile, Qty(seconds, kSecondsPerHour), "profile-hour", 0,
         static_cast<Micro>(RoundHalfAway(seconds * it->second, kSecondsPerHour)), FormatMicro(it->second), "Usage",
         "Standard", "mig", m, profile, "", ""},
        seconds * it->second);
  }
  if (s.memory > 0 && p != nullptr && p->memory_gib_hour) {
    const Int128 num = s.memory * *p->memory_gib_hour;
    Add("memory/" + m, kMibSPerGibHour, s.tenant,
        {m + " GPU memory", Qty(s.memory, kMibSPerGibHour), "GiB-hour", 0,
         static_cast<Micro>(RoundHalfAway(num, kMibSPerGibHour)), FormatMicro(*p->memory_gib_hour), "Usage",
         "Standard", "memory", m, "", "", ""},
        num);
  }
}

void Run::ChargeIdle(const std::string& m, int64_t gpus) {
  const ModelPrices* p = Prices(m);
  if (p == nullptr || !p->gpu_hour || gpus <= 0) return;  // the plan parser reports a missing rate
  std::vector<int64_t> held(static_cast<size_t>(hours_), 0);
  std::map<int, Int128> weight;  // account -> GPU time held of this model
  for (const Slot& s : slots_) {
    if (s.model != m) continue;
    int64_t reserved = 0;
    for (const Reservation* r : reservations_) {
      if (r->model == m && r->tenant == accounts_[s.tenant]) reserved = r->gpu_milli * kSecondsPerHour;
    }
    for (size_t h = static_cast<size_t>(first_); h < static_cast<size_t>(last_); ++h) {
      const int64_t x = std::max(s.basis_by_hour[h], reserved) + (s.mig_held_by_hour.empty() ? 0 : s.mig_held_by_hour[h]);
      held[h] += x;
      weight[s.tenant] += x;
    }
  }
  Int128 idle = 0;
  const int64_t cap = gpus * 1000 * kSecondsPerHour;
  for (int64_t h = first_; h < last_; ++h) idle += std::max<int64_t>(0, cap - held[static_cast<size_t>(h)]);
  if (idle == 0) return;
  const Int128 num = idle * *p->gpu_hour;
  const InvoiceLine base{m + " idle capacity", "", "GPU-hour", 0, 0, FormatMicro(*p->gpu_hour), "Usage",
                         "Standard", "idle", m, "", "", ""};
  if (plan_.idle == IdlePolicy::kUniform) {  // uniform: every tenant billed in the period
    weight.clear();
    for (const Slot& s : slots_) weight[s.tenant] = 1;
  }
  Int128 total_weight = 0;
  for (const auto& [a, w] : weight) total_weight += w;
  // num x weight must fit 127 bits: with extreme weights, scale them down together (the shares
  // stay proportional to within 2^-30 and still sum to the pool exactly).
  auto bits = [](Int128 x) {
    int b = 0;
    for (; x > 0; x >>= 1) ++b;
    return b;
  };
  if (bits(num) + bits(total_weight) > 124) {
    const int shift = bits(total_weight) - 30;
    total_weight = 0;
    for (auto& [a, w] : weight) total_weight += (w >>= shift);
  }
  if (plan_.idle == IdlePolicy::kOperator || total_weight == 0) {
    InvoiceLine l = base;
    l.quantity = Qty(idle, kMilliSPerGpuHour);
    l.list_cost_micro = static_cast<Micro>(RoundHalfAway(num, kMilliSPerGpuHour));
    Add("idle/" + m, kMilliSPerGpuHour, Account(plan_.operator_account), l, num);
    return;
  }
  for (const auto& [a, w] : weight) {
    if (w == 0) continue;
    InvoiceLine l = base;
    l.description += plan_.idle == IdlePolicy::kUniform ? " (uniform share)" : " (proportional share)";
    l.quantity = Qty(idle * w, kMilliSPerGpuHour * total_weight);
    l.list_cost_micro = static_cast<Micro>(RoundHalfAway(num * w, kMilliSPerGpuHour * total_weight));
    Add("idle/" + m, kMilliSPerGpuHour * total_weight, a, l, num * w);
  }
}

void Run::Charge() {
  std::sort(slots_.begin(), slots_.end(), [&](const Slot& a, const Slot& b) {
    return std::tie(accounts_[a.tenant], a.model) < std::tie(accounts_[b.tenant], b.model);
  });
  std::map<std::pair<std::string, std::string>, const Reservation*> res;
  for (const Reservation* r : reservations_) res[{r->tenant, r->model}] = r;
  // A reservation is billed even when its tenant used nothing of the model in the period (but
  // not when nothing of the period was observed).
  for (const Reservation* r : reservations_) {
    if (last_ == first_) break;
    bool found = false;
    for (const Slot& s : slots_) found = found || (accounts_[s.tenant] == r->tenant && s.model == r->model);
    if (!found) {
      Slot s;
      s.tenant = Account(r->tenant);
      s.model = r->model;
      s.basis_by_hour.assign(static_cast<size_t>(hours_), 0);
      slots_.push_back(std::move(s));
    }
  }
  for (Slot& s : slots_) {
    auto it = res.find({accounts_[s.tenant], s.model});
    ChargeCompute(s, it == res.end() ? nullptr : it->second);
  }
  for (const auto& [model, gpus] : plan_.capacity_gpus) ChargeIdle(model, gpus);
  for (const std::string& m : missing_) problems.push_back(m + ": missing in the price plan");
}

InvoiceRun Run::Finish(const std::vector<SlaObservation>& sla) {
  lines_.assign(accounts_.size(), {});
  totals_.assign(accounts_.size(), 0);
  auto allocate = [&](std::map<std::string, Pool>& pools) {
    for (auto& [key, pool] : pools) {
      std::stable_sort(pool.lines.begin(), pool.lines.end(), [&](const PendingLine& a, const PendingLine& b) {
        return std::tie(accounts_[a.account], a.line.description) < std::tie(accounts_[b.account], b.line.description);
      });
      std::vector<Int128> nums;
      for (const PendingLine& l : pool.lines) nums.push_back(l.num);
      const std::vector<Micro> amounts = Allocate(nums, pool.den);
      for (size_t i = 0; i < amounts.size(); ++i) {
        InvoiceLine line = pool.lines[i].line;
        line.amount_micro = amounts[i];
        if (line.charge_category == "Credit") line.list_cost_micro = amounts[i];
        if (line.resource == "idle" || line.resource == "memory" || line.resource == "mig")
          line.list_cost_micro = std::max(line.list_cost_micro, amounts[i]);
        totals_[pool.lines[i].account] += amounts[i];
        metered_ += amounts[i];
        if (std::abs(static_cast<double>(metered_)) > 4e18 || std::abs(static_cast<double>(totals_[pool.lines[i].account])) > 4e18)
          overflow_ = true;
        lines_[pool.lines[i].account].push_back(std::move(line));
      }
    }
  };
  allocate(pools_);
  // SLA credits on the charges so far.
  std::map<std::string, Pool> credits;
  std::vector<Micro> pre(totals_.size());
  for (size_t a = 0; a < pre.size(); ++a) pre[a] = overflow_ ? 0 : static_cast<Micro>(totals_[a]);
  std::vector<Micro> credited(accounts_.size(), 0);  // micro-percent given so far
  for (size_t k = 0; k < plan_.sla_credits.size(); ++k) {
    const SlaRule& rule = plan_.sla_credits[k];
    for (size_t a = 0; a < accounts_.size(); ++a) {
      if (accounts_[a] == plan_.operator_account || pre[a] <= 0) continue;
      if (!rule.tenants.empty() && std::find(rule.tenants.begin(), rule.tenants.end(), accounts_[a]) == rule.tenants.end())
        continue;
      bool hit = false;
      Micro value = 0;  // the worst observation that triggers the rule
      for (const SlaObservation& o : sla) {
        if (o.tenant != accounts_[a] || o.metric != rule.metric) continue;
        if (o.hour >= 0 ? o.hour < period_.start || o.hour >= period_.end : o.period != period_.name) continue;
        if (!(rule.above ? o.value > rule.threshold : o.value < rule.threshold)) continue;
        if (!hit || (rule.above ? o.value > value : o.value < value)) value = o.value;
        hit = true;
      }
      if (!hit) continue;
      const Micro pct = std::min(rule.credit_percent, 100 * kMicroPerUnit - credited[a]);
      if (pct <= 0) continue;
      credited[a] += pct;
      InvoiceLine l{"SLA credit: " + rule.metric + " " + FormatMicro(value) + (rule.above ? " > " : " < ") +
                        FormatMicro(rule.threshold),
                    FormatMicro(pct), "percent", 0, 0, "", "Credit", "", "credit", "", "", "", ""};
      Pool& p = credits["credit/" + std::to_string(100000 + k)];
      p.den = Int128{100} * kMicroPerUnit;
      p.lines.push_back({static_cast<int>(a), l, -Int128{pre[a]} * pct});
    }
  }
  allocate(credits);

  InvoiceRun run;
  run.period = period_;
  run.observed_start = period_.start + first_ * kSecondsPerHour;
  run.observed_end = period_.start + last_ * kSecondsPerHour;
  run.complete = first_ == 0 && last_ == hours_;
  run.notes = notes_;
  run.currency = plan_.currency;
  run.metered_total_micro = static_cast<Micro>(metered_);
  std::vector<size_t> order(accounts_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return accounts_[a] < accounts_[b]; });
  for (size_t a : order) {
    Invoice inv;
    inv.tenant = accounts_[a];
    auto cb = plan_.chargeback.find(inv.tenant);
    if (inv.tenant == plan_.operator_account && cb == plan_.chargeback.end()) {
      inv.organisation = "operator";
      inv.team = inv.tenant;
    } else {
      inv.organisation = cb == plan_.chargeback.end() ? "unassigned" : cb->second.organisation;
      inv.team = cb == plan_.chargeback.end() ? inv.tenant : cb->second.team;
    }
    inv.total_micro = static_cast<Micro>(totals_[a]);
    inv.lines = std::move(lines_[a]);
    run.invoices.push_back(std::move(inv));
  }
  run.chargeback = ChargebackOf(run.invoices);
  return run;
}

}  // namespace

std::vector<ChargebackTotal> ChargebackOf(const std::vector<Invoice>& invoices) {
  std::map<std::string, std::map<std::string, Micro>> orgs;
  for (const Invoice& inv : invoices) orgs[inv.organisation][inv.team] += inv.total_micro;
  std::vector<ChargebackTotal> out;
  for (const auto& [org, teams] : orgs) {
    ChargebackTotal t{org, 0, {}};
    for (const auto& [team, total] : teams) {
      t.total_micro += total;
      t.teams.emplace_back(team, total);
    }
    out.push_back(std::move(t));
  }
  return out;
}

InvoiceRun RestrictToAccounts(InvoiceRun run, const std::function<bool(const std::string&)>& shown) {
  std::vector<Invoice> kept;
  Micro total = 0;
  for (Invoice& inv : run.invoices) {
    if (!shown(inv.tenant)) continue;
    total += inv.total_micro;
    kept.push_back(std::move(inv));
  }
  run.invoices = std::move(kept);
  run.metered_total_micro = total;
  run.notes.clear();  // about the plan's other tenants: the operator's to read
  run.chargeback = ChargebackOf(run.invoices);
  return run;
}

StatusOr<InvoiceRun> ComputeInvoices(const std::vector<SourceKey>& sources,
                                     const std::vector<HourlyRecord>& records,
                                     const std::vector<SlaObservation>& sla, const PricePlan& plan,
                                     const Period& period, const GpuModelCatalog& catalog,
                                     const InvoiceOptions& options) {
  if (period.end <= period.start) return InvalidArgumentError("empty billing period");
  Run run(plan, period, catalog, options);
  TESSERA_RETURN_IF_ERROR(run.Collect(sources, records));
  run.Charge();
  if (!run.problems.empty()) {
    std::string msg = std::to_string(run.problems.size()) +
                      (run.problems.size() == 1 ? " problem" : " problems") + " billing the ledger with the plan:";
    for (const std::string& p : run.problems) msg += "\n  " + p;
    return InvalidArgumentError(msg);
  }
  InvoiceRun out = run.Finish(sla);
  if (run.overflow_) return InvalidArgumentError("the invoice's amounts exceed the int64 micro-unit range");
  return out;
}

std::pair<int64_t, int64_t> ObservedSpan(const std::vector<HourlyRecord>& records) {
  if (records.empty()) return {0, 0};
  int64_t first = records.front().hour, last = records.front().hour;
  for (const HourlyRecord& r : records) {
    first = std::min(first, r.hour);
    last = std::max(last, r.hour);
  }
  return {first, last + kSecondsPerHour};
}

std::vector<std::string> UnpricedModels(const PricePlan& plan, const std::vector<std::string>& models) {
  std::set<std::string> out;
  for (const std::string& m : models) {
    auto it = plan.prices.find(m);
    if (it == plan.prices.end() || (!it->second.gpu_hour && it->second.tiers.empty())) out.insert(m);
  }
  return {out.begin(), out.end()};
}

}  // namespace tessera::metering
