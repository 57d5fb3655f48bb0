#include "tessera/metering/price_plan.h"

#include <yaml-cpp/yaml.h>

#include <set>

namespace tessera::metering {

namespace {

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

struct Walk {
  std::string source;
  const GpuModelCatalog* catalog;
  std::vector<std::string> problems;

  void Problem(const YAML::Node& n, const std::string& what) {
    problems.push_back(source + ":" + std::to_string(n.Mark().line + 1) + ": " + what);
  }

  // A key of a map, checked against the allowed ones.
  bool Known(const YAML::Node& key, const std::string& field, const std::vector<std::string>& allowed) {
    const std::string k = key.IsScalar() ? key.Scalar() : "";
    for (const std::string& a : allowed) {
      if (a == k) return true;
    }
    Problem(key, field + ": unknown key '" + k + "' (expected " + Join(allowed) + ")");
    return false;
  }

  // Bounds keep every exact charge inside 128 bits and every invoice inside int64 micro-units.
  static constexpr Micro kMaxPrice = 10'000 * kMicroPerUnit;  // per unit (GPU-hour, ...)

  std::optional<Micro> Price(const YAML::Node& n, const std::string& field, Micro max = kMaxPrice) {
    if (!n.IsScalar()) {
      Problem(n, field + ": expected a price (a decimal number)");
      return std::nullopt;
    }
    auto v = ParseDecimalMicro(n.Scalar());
    if (!v.ok()) {
      Problem(n, field + ": " + v.status().message());
      return std::nullopt;
    }
    if (*v < 0) {
      Problem(n, field + ": negative price " + n.Scalar());
      return std::nullopt;
    }
    if (*v > max) {
      Problem(n, field + ": " + n.Scalar() + " is above the largest value accepted, " + FormatMicro(max));
      return std::nullopt;
    }
    return *v;
  }

  std::optional<int64_t> Count(const YAML::Node& n, const std::string& field, int64_t max) {
    if (n.IsScalar()) {
      const std::string& s = n.Scalar();
      bool ok = !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
      // More than 12 digits is above any max used here; the sum of at most 12 cannot overflow.
      int64_t v = ok && s.size() > 12 ? max + 1 : 0;
      for (size_t i = 0; ok && v <= max && i < s.size(); ++i) v = v * 10 + (s[i] - '0');
      if (ok && v > max) {
        Problem(n, field + ": " + s + " is above the largest value accepted, " + std::to_string(max));
        return std::nullopt;
      }
      if (ok) return v;
      if (!s.empty() && s[0] == '-') {
        Problem(n, field + ": negative value " + s);
        return std::nullopt;
      }
    }
    Problem(n, field + ": expected a non-negative integer");
    return std::nullopt;
  }

  std::optional<std::string> Name(const YAML::Node& n, const std::string& field) {
    if (!n.IsScalar() || n.Scalar().empty()) {
      Problem(n, field + ": expected a non-empty name");
      return std::nullopt;
    }
    return n.Scalar();
  }

  const GpuModelInfo* Model(const YAML::Node& n, const std::string& field) {
    if (!n.IsScalar()) {
      Problem(n, field + ": expected a GPU model name");
      return nullptr;
    }
    auto id = catalog->Find(n.Scalar());
    if (!id.ok()) {
      Problem(n, field + ": unknown GPU model '" + n.Scalar() + "' (known: " + catalog->KnownNames() + ")");
      return nullptr;
    }
    return &catalog->info(*id);
  }

  void Tiers(const YAML::Node& n, const std::string& field, std::vector<PriceTier>& out) {
    if (!n.IsSequence()) {
      Problem(n, field + ": expected a list of {from, to, gpu_hour}");
      return;
    }
    int64_t expect_from = 0;
    bool open_seen = false;
    for (const YAML::Node& t : n) {
      if (!t.IsMap()) {
        Problem(t, field + ": expected a map {from, to, gpu_hour}");
        continue;
      }
      PriceTier tier;
      bool have_price = false, have_from = false;
      for (const auto& kv : t) {
        if (!Known(kv.first, field, {"from", "to", "gpu_hour"})) continue;
        const std::string k = kv.first.Scalar();
        if (k == "gpu_hour") {
          if (auto p = Price(kv.second, field + ".gpu_hour")) tier.gpu_hour = *p, have_price = true;
        } else if (auto v = Count(kv.second, field + "." + k, 1'000'000'000)) {
          (k == "from" ? tier.from_gpu_hours : tier.to_gpu_hours) = *v;
          if (k == "from") have_from = true;
        }
      }
      if (!have_price) Problem(t, field + ": a tier needs gpu_hour");
      if (!have_from) Problem(t, field + ": a tier needs from (GPU-hours)");
      if (open_seen) {
        Problem(t, field + ": tier after an unbounded tier (only the last tier may omit 'to')");
      } else if (tier.to_gpu_hours >= 0 && tier.to_gpu_hours <= tier.from_gpu_hours) {
        Problem(t, field + ": inverted tier: to " + std::to_string(tier.to_gpu_hours) + " <= from " +
                       std::to_string(tier.from_gpu_hours));
      } else if (have_from && tier.from_gpu_hours < expect_from) {
        Problem(t, field + ": tier from " + std::to_string(tier.from_gpu_hours) +
                       " overlaps the previous tier (which ends at " + std::to_string(expect_from) + ")");
      } else if (have_from && tier.from_gpu_hours > expect_from) {
        Problem(t, field + ": gap between tiers: from " + std::to_string(tier.from_gpu_hours) +
                       ", expected " + std::to_string(expect_from));
      }
      if (tier.to_gpu_hours < 0) open_seen = true;
      else expect_from = std::max(expect_from, tier.to_gpu_hours);
      out.push_back(tier);
    }
    if (!out.empty() && !open_seen) Problem(n, field + ": the last tier must be unbounded (omit 'to')");
  }

  void Prices(const YAML::Node& n, PricePlan& plan) {
    if (!n.IsMap()) {
      Problem(n, "prices: expected a map of GPU model to prices");
      return;
    }
    for (const auto& m : n) {
      const GpuModelInfo* info = Model(m.first, "prices");
      if (info == nullptr) continue;
      const std::string f = "prices." + info->name;
      if (plan.prices.count(info->name)) {
        Problem(m.first, f + ": duplicate model");
        continue;
      }
      ModelPrices& p = plan.prices[info->name];
      if (!m.second.IsMap()) {
        Problem(m.second, f + ": expected a map (gpu_hour, milli_gpu_hour, memory_gib_hour, mig, tiers)");
        continue;
      }
      std::set<std::string> seen;  // YAML maps may repeat a key; yaml-cpp keeps both
      for (const auto& kv : m.second) {
        if (!Known(kv.first, f, {"gpu_hour", "milli_gpu_hour", "memory_gib_hour", "mig", "tiers"})) continue;
        const std::string k = kv.first.Scalar();
        if (!seen.insert(k).second) {
          Problem(kv.first, f + "." + k + ": given twice");
          continue;
        }
        if (k == "gpu_hour") p.gpu_hour = Price(kv.second, f + ".gpu_hour");
        else if (k == "milli_gpu_hour") p.milli_gpu_hour = Price(kv.second, f + ".milli_gpu_hour");
        else if (k == "memory_gib_hour") p.memory_gib_hour = Price(kv.second, f + ".memory_gib_hour");
        else if (k == "tiers") Tiers(kv.second, f + ".tiers", p.tiers);
        else Mig(kv.second, f + ".mig", *info, p);
      }
    }
  }

  void Mig(const YAML::Node& n, const std::string& f, const GpuModelInfo& info, ModelPrices& p) {
    if (!n.IsMap()) {
      Problem(n, f + ": expected a map of MIG profile to price per profile-hour");
      return;
    }
    for (const auto& kv : n) {
      const std::string profile = kv.first.IsScalar() ? kv.first.Scalar() : "";
      if (!info.mig) {
        Problem(kv.first, f + ": " + info.name + " has no MIG profiles");
        continue;
      }
      if (info.mig->FindProfile(profile) == nullptr) {
        std::vector<std::string> known;
        for (const MigProfile& mp : info.mig->profiles) known.push_back(mp.name);
        Problem(kv.first, f + ": unknown MIG profile '" + profile + "' for " + info.name + " (known: " +
                              Join(known) + ")");
        continue;
      }
      if (auto v = Price(kv.second, f + "." + profile)) p.mig[profile] = *v;
    }
  }

  void Reservations(const YAML::Node& n, PricePlan& plan) {
    if (!n.IsSequence()) {
      Problem(n, "reservations: expected a list");
      return;
    }
    std::set<std::pair<std::string, std::string>> seen;
    for (const YAML::Node& r : n) {
      if (!r.IsMap()) {
        Problem(r, "reservations: expected a map {tenant, model, gpus, gpu_hour}");
        continue;
      }
      Reservation res;
      bool have_price = false, have_size = false, model_ok = false;
      for (const auto& kv : r) {
        if (!Known(kv.first, "reservations", {"tenant", "model", "gpus", "gpu_milli", "gpu_hour", "burst_gpu_hour"}))
          continue;
        const std::string k = kv.first.Scalar();
        if (k == "tenant") {
          if (auto v = Name(kv.second, "reservations.tenant")) res.tenant = *v;
        } else if (k == "model") {
          if (const GpuModelInfo* info = Model(kv.second, "reservations.model")) res.model = info->name, model_ok = true;
        } else if (k == "gpus" || k == "gpu_milli") {
          if (auto v = Count(kv.second, "reservations." + k, k == "gpus" ? 10'000 : 10'000'000)) {
            res.gpu_milli = k == "gpus" ? *v * 1000 : *v;
            have_size = true;
          }
        } else if (k == "gpu_hour") {
          if (auto v = Price(kv.second, "reservations.gpu_hour")) res.gpu_hour = *v, have_price = true;
        } else {
          res.burst_gpu_hour = Price(kv.second, "reservations.burst_gpu_hour");
        }
      }
      if (res.tenant.empty()) Problem(r, "reservations: missing tenant");
      if (res.model.empty() && !model_ok) Problem(r, "reservations: missing model");
      if (!have_size) Problem(r, "reservations: missing gpus (or gpu_milli)");
      if (!have_price) Problem(r, "reservations: missing gpu_hour (the committed price)");
      if (!res.tenant.empty() && !res.model.empty() && !seen.insert({res.tenant, res.model}).second) {
        Problem(r, "reservations: a second reservation of " + res.tenant + " on " + res.model);
      }
      plan.reservations.push_back(res);
    }
  }

  void Credits(const YAML::Node& n, PricePlan& plan) {
    if (!n.IsSequence()) {
      Problem(n, "sla_credits: expected a list");
      return;
    }
    for (const YAML::Node& r : n) {
      if (!r.IsMap()) {
        Problem(r, "sla_credits: expected a map {metric, above|below, credit_percent}");
        continue;
      }
      SlaRule rule;
      int thresholds = 0;
      bool have_credit = false;
      for (const auto& kv : r) {
        if (!Known(kv.first, "sla_credits", {"metric", "above", "below", "credit_percent", "tenants"})) continue;
        const std::string k = kv.first.Scalar();
        if (k == "metric") {
          if (auto v = Name(kv.second, "sla_credits.metric")) rule.metric = *v;
        } else if (k == "above" || k == "below") {
          ++thresholds;
          rule.above = k == "above";
          if (auto v = Price(kv.second, "sla_credits." + k, Micro{1'000'000'000} * kMicroPerUnit)) rule.threshold = *v;
        } else if (k == "credit_percent") {
          if (auto v = Price(kv.second, "sla_credits.credit_percent")) {
            if (*v > 100 * kMicroPerUnit) Problem(kv.second, "sla_credits.credit_percent: above 100");
            else rule.credit_percent = *v, have_credit = true;
          }
        } else if (!kv.second.IsSequence()) {
          Problem(kv.second, "sla_credits.tenants: expected a list of tenant names");
        } else {
          for (const YAML::Node& t : kv.second) {
            if (auto v = Name(t, "sla_credits.tenants")) rule.tenants.push_back(*v);
          }
        }
      }
      if (rule.metric.empty()) Problem(r, "sla_credits: missing metric");
      if (thresholds != 1) Problem(r, "sla_credits: give exactly one of above, below");
      if (!have_credit) Problem(r, "sla_credits: missing credit_percent");
      plan.sla_credits.push_back(rule);
    }
  }

  void ChargebackList(const YAML::Node& n, PricePlan& plan) {
    if (!n.IsSequence()) {
      Problem(n, "chargeback: expected a list of {tenant, organisation, team}");
      return;
    }
    for (const YAML::Node& e : n) {
      if (!e.IsMap()) {
        Problem(e, "chargeback: expected a map {tenant, organisation, team}");
        continue;
      }
      std::string tenant;
      Chargeback c;
      for (const auto& kv : e) {
        if (!Known(kv.first, "chargeback", {"tenant", "organisation", "team"})) continue;
        const std::string k = kv.first.Scalar();
        auto v = Name(kv.second, "chargeback." + k);
        if (!v) continue;
        (k == "tenant" ? tenant : k == "organisation" ? c.organisation : c.team) = *v;
      }
      if (tenant.empty()) {
        Problem(e, "chargeback: missing tenant");
        continue;
      }
      if (c.organisation.empty()) Problem(e, "chargeback: missing organisation for '" + tenant + "'");
      if (c.team.empty()) c.team = tenant;
      if (!plan.chargeback.emplace(tenant, c).second) Problem(e, "chargeback: tenant '" + tenant + "' listed twice");
    }
  }

  void Top(const YAML::Node& root, PricePlan& plan) {
    for (const auto& kv : root) {
      if (!Known(kv.first, "plan", {"currency", "idle", "operator_account", "capacity", "prices",
                                    "reservations", "chargeback", "sla_credits"}))
        continue;
      const std::string k = kv.first.Scalar();
      if (k == "currency") {
        if (auto v = Name(kv.second, "currency")) plan.currency = *v;
      } else if (k == "operator_account") {
        if (auto v = Name(kv.second, "operator_account")) plan.operator_account = *v;
      } else if (k == "idle") {
        const std::string v = kv.second.IsScalar() ? kv.second.Scalar() : "";
        if (v == "operator") plan.idle = IdlePolicy::kOperator;
        else if (v == "uniform") plan.idle = IdlePolicy::kUniform;
        else if (v == "proportional") plan.idle = IdlePolicy::kProportional;
        else Problem(kv.second, "idle: expected operator, uniform or proportional, got '" + v + "'");
      } else if (k == "capacity") {
        if (!kv.second.IsMap()) {
          Problem(kv.second, "capacity: expected a map of GPU model to GPUs");
          continue;
        }
        for (const auto& m : kv.second) {
          const GpuModelInfo* info = Model(m.first, "capacity");
          auto v = Count(m.second, "capacity", 1'000'000);
          if (info != nullptr && v) plan.capacity_gpus[info->name] = *v;
        }
      } else if (k == "prices") {
        Prices(kv.second, plan);
      } else if (k == "reservations") {
        Reservations(kv.second, plan);
      } else if (k == "chargeback") {
        ChargebackList(kv.second, plan);
      } else {
        Credits(kv.second, plan);
      }
    }
    if (!root["prices"]) problems.push_back(source + ":1: missing 'prices'");
    for (const Reservation& r : plan.reservations) {
      auto it = plan.prices.find(r.model);
      if (!r.model.empty() && !r.burst_gpu_hour && (it == plan.prices.end() || !it->second.gpu_hour)) {
        problems.push_back(source + ": reservations: " + r.tenant + " on " + r.model +
                           ": no burst_gpu_hour and no prices." + r.model + ".gpu_hour for use above it");
      }
    }
    for (const auto& [model, gpus] : plan.capacity_gpus) {
      auto it = plan.prices.find(model);
      if (gpus > 0 && (it == plan.prices.end() || !it->second.gpu_hour)) {
        problems.push_back(source + ": capacity: " + model + " needs prices." + model +
                           ".gpu_hour (the rate of its idle capacity)");
      }
    }
  }
};

}  // namespace

StatusOr<PricePlan> ParsePricePlanYaml(std::string_view text, std::string_view source,
                                       const GpuModelCatalog& catalog) {
  Walk w{std::string(source), &catalog, {}};
  PricePlan plan;
  try {
    const YAML::Node root = YAML::Load(std::string(text));
    if (!root.IsMap()) return InvalidArgumentError(w.source + ":1: expected a map with 'prices'");
    w.Top(root, plan);
  } catch (const YAML::Exception& e) {
    w.problems.push_back(w.source + ":" + std::to_string(e.mark.line + 1) + ": not valid YAML: " + e.msg);
  }
  if (!w.problems.empty()) {
    std::string msg = std::to_string(w.problems.size()) + (w.problems.size() == 1 ? " problem" : " problems") +
                      " in the price plan:";
    for (const std::string& p : w.problems) msg += "\n  " + p;
    return InvalidArgumentError(msg);
  }
  return plan;
}

}  // namespace tessera::metering
