// Price plans: what each unit of GPU use costs, in YAML (yaml-cpp), parsed into a value the
// invoice run (invoice.h) applies. Prices are decimals of the currency, held as micro-units.
//
//   currency: USD
//   idle: proportional          # operator (default) | uniform | proportional (OpenCost idle)
//   operator_account: operator  # the account idle capacity is billed to under `idle: operator`
//   capacity: {A100-80GB: 8}    # GPUs the operator provides per model; idle = capacity - held
//   prices:
//     A100-80GB:
//       gpu_hour: 2.40          # a whole GPU for an hour (also the idle rate and default burst rate)
//       milli_gpu_hour: 0.0026  # a fractional share (MPS / time-slice); default gpu_hour / 1000
//       memory_gib_hour: 0.002  # GPU memory held, any partition
//       mig: {1g.10gb: 0.40, 3g.40gb: 1.15}    # MIG profile-hours (profiles of this model)
//       tiers:                  # volume tiers on a tenant's on-demand GPU-hours of this model in
//         - {from: 0, to: 500, gpu_hour: 2.40}  # the period (whole + share), marginal: replace
//         - {from: 500, gpu_hour: 2.00}         # gpu_hour/milli_gpu_hour; contiguous from 0
//   reservations:               # a commitment per tenant and model, billed for every hour of the
//     - {tenant: vision, model: A100-80GB, gpus: 2, gpu_hour: 1.70, burst_gpu_hour: 3.00}
//                               # period observed, used or not (invoice.h); use above it is
//                               # billed at burst_gpu_hour (default: the model's gpu_hour)
//   chargeback:                 # organisation and team of each tenant (default: "unassigned", tenant)
//     - {tenant: vision, organisation: acme, team: ml}
//   sla_credits:                # a rule: when a tenant's metric for the period is above (or
//     - {metric: guaranteed_wait_p99_s, above: 300, credit_percent: 10}   # below) the threshold, it
//                               # gets the percentage of its charges back (optional `tenants: [..]`)
//
// Cost basis (OpenCost's for GPUs): GPU compute is billed on max(allocated, used) per hourly
// record. Every problem of a bad plan is reported at once with file:line: bad YAML, unknown keys,
// negative or malformed prices, unknown GPU models or MIG profiles (checked against the catalog),
// inverted, overlapping or gapped tiers, duplicate entries, reservations without a price.
//
// Callers: the CLI (`tessera bill`), tests, the fuzzer. Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/gpu_model.h"
#include "tessera/core/status.h"
#include "tessera/metering/money.h"

namespace tessera::metering {

struct PriceTier {
  int64_t from_gpu_hours = 0;
  int64_t to_gpu_hours = -1;  // -1: unbounded (last tier only)
  Micro gpu_hour = 0;
};

struct ModelPrices {
  std::optional<Micro> gpu_hour;
  std::optional<Micro> milli_gpu_hour;
  std::optional<Micro> memory_gib_hour;
  std::map<std::string, Micro> mig;  // profile -> per profile-hour
  std::vector<PriceTier> tiers;      // empty: flat gpu_hour / milli_gpu_hour
};

struct Reservation {
  std::string tenant;
  std::string model;
  int64_t gpu_milli = 0;  // committed milli-GPUs (gpus: 2 -> 2000)
  Micro gpu_hour = 0;     // committed price per GPU-hour
  std::optional<Micro> burst_gpu_hour;
};

enum class IdlePolicy { kOperator, kUniform, kProportional };

struct SlaRule {
  std::string metric;            // e.g. guaranteed_wait_p99_s (ledger "sla" lines carry them)
  bool above = true;             // credit when value > threshold (false: value < threshold)
  Micro threshold = 0;           // in the metric's unit, micro
  Micro credit_percent = 0;      // micro-percent: 10 % = 10'000'000
  std::vector<std::string> tenants;  // empty: every tenant
};

struct Chargeback {
  std::string organisation;
  std::string team;
};

struct PricePlan {
  std::string currency = "USD";
  std::string operator_account = "operator";
  IdlePolicy idle = IdlePolicy::kOperator;
  std::map<std::string, int64_t> capacity_gpus;  // model -> GPUs
  std::map<std::string, ModelPrices> prices;     // model -> prices
  std::vector<Reservation> reservations;
  std::vector<SlaRule> sla_credits;
  std::map<std::string, Chargeback> chargeback;  // tenant -> organisation, team
};

// `source` names the file in messages ("plan.yaml:12: prices.A100-80GB.mig: unknown MIG profile
// '9g.90gb' for A100-80GB (known: ...)"); all problems, one per line.
StatusOr<PricePlan> ParsePricePlanYaml(std::string_view text, std::string_view source,
                                       const GpuModelCatalog& catalog);

}  // namespace tessera::metering
