// The invoice run: hourly usage records and a price plan -> one invoice per account for one
// billing period, every amount in integer micro-units, reconciled to the micro-unit.
//
// What is charged (per tenant, model; records whose hour is inside the period):
//   GPU compute   whole and share partitions, on max(allocated, used) milli-GPU-seconds of each
//                 hourly record (OpenCost's GPU cost basis). Without a reservation: the model's
//                 tiers (marginal, on the tenant's GPU-hours of the model in the period) or
//                 gpu_hour (whole) / milli_gpu_hour (share). With a reservation of R milli-GPU: in
//                 each hour, use up to R x 3600 milli-GPU-s is covered by the commitment and the
//                 rest is burst (burst_gpu_hour, default gpu_hour); the commitment is billed for
//                 every observed hour of the period (InvoiceOptions), split into a "used" and an
//                 "unused" line; in an hour outside the observed span all use is burst. A
//                 reservation of a tenant that does not exist (InvoiceOptions::tenant_exists) is
//                 not billed: the run lists it in `notes`.
//   MIG           profile-hours (seconds the instance was held) x the profile's price; not
//                 covered by reservations.
//   memory        GiB-hours of memory_mib_s x memory_gib_hour (any partition), if priced.
//   idle          per model with capacity: capacity x 1000 x 3600 milli-GPU-s per hour minus what
//                 tenants held (max(use, reservation) per tenant, MIG instances as their compute
//                 slices / the model's slices), summed over the observed hours where positive
//                 (capacity nobody watched is not billed), at gpu_hour:
//                 billed to the operator account, or shared out uniformly among the billed tenants,
//                 or in proportion to the GPU time each held of that model (OpenCost's idle
//                 allocation); with no tenant to share among it stays with the operator.
//   SLA credits   after all charges: per rule, each tenant whose observation for the period
//                 triggers it gets credit_percent of its charges back (percentages of several rules
//                 add up, capped at 100). The observations of a period: the "sla" lines that name
//                 it and the hourly ones inside it (any hour that triggers the rule triggers it;
//                 the line says the worst: hours of 120 s, 900 s and 400 s under "above 300"
//                 credit once, "guaranteed_wait_p99_s 900.000000 > 300.000000").
// Rounding: money.h's one rule (pools, half away from zero, largest remainder), so the sum of the
// lines of every account equals metered_total_micro exactly.
//
// Worked example: A100 at 2.40/GPU-hour, capacity 1 GPU, idle: uniform; tenants a and b each
// held a 250-milli share for one hour (900,000 milli-GPU-s = 0.25 GPU-hour): 600,000 micro each;
// the idle half GPU-hour (1,200,000 micro) is split 600,000 + 600,000; metered total 2,400,000 =
// the GPU-hour's price. Rounding: three tenants each held 1 milli-GPU for 1 s: exact 0.667 micro
// each, pool total 2 -> lines 1, 1, 0 (equal remainders: the first by name).
//
// Observed span: the hours of the period the caller saw the cluster (`tessera bill`: from the
// ledger's first record to the end of the hour of its last; the control plane: from the first
// usage sample it stored to the start of the current hour). A run whose span is not the whole
// period is not complete (`complete` false): an invoice of a month so far, or of a month the
// cluster existed in for part of it. Example: period 2026-12 (744 hours), observed 2026-12-01
// 00:00 to 2026-12-04 10:00 (82 hours), 4 GPUs of capacity and no use: idle 328 GPU-hours, not
// 2,976.
//
// Callers: the CLI (`tessera bill`), the control plane (GET /v1/invoices), the benchmarks, tests.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "tessera/core/gpu_model.h"
#include "tessera/core/status.h"
#include "tessera/metering/civil_time.h"
#include "tessera/metering/ledger.h"
#include "tessera/metering/ledger_file.h"
#include "tessera/metering/money.h"
#include "tessera/metering/price_plan.h"

namespace tessera::metering {

struct InvoiceLine {
  std::string description;      // "A100-80GB whole GPU", "A100-80GB reserved (unused)"
  std::string quantity;         // exact decimal, 6 places, in `unit`
  std::string unit;             // GPU-hour, milli-GPU-hour, profile-hour, GiB-hour, percent
  Micro amount_micro = 0;
  Micro list_cost_micro = 0;    // the same quantity at the list (on-demand, untiered) price
  std::string unit_price;       // decimal of the price applied ("" where several apply)
  std::string charge_category;  // FOCUS: Usage, Purchase, Credit
  std::string pricing_category; // FOCUS: Standard, Committed, Dynamic ("" for credits)
  std::string resource;         // gpu, gpu_share, mig, memory, idle, reservation, burst, credit
  std::string model;            // GPU model ("" for credits)
  std::string profile;          // MIG profile, else ""
  std::string commitment;       // reservation id ("tenant/model"), else ""
  std::string commitment_status;  // Used | Unused | ""
};

struct Invoice {
  std::string tenant;  // the account (a tenant, or the operator account)
  std::string organisation;
  std::string team;
  Micro total_micro = 0;
  std::vector<InvoiceLine> lines;
};

struct ChargebackTotal {
  std::string organisation;
  Micro total_micro = 0;
  std::vector<std::pair<std::string, Micro>> teams;  // team -> total, by name
};

struct InvoiceRun {
  Period period;
  // The observed hours [observed_start, observed_end) (seconds, whole hours, inside the period;
  // equal when nothing of the period was observed); complete: they are the whole period.
  int64_t observed_start = 0;
  int64_t observed_end = 0;
  bool complete = true;
  // What the run left out and why, one sentence each ("reservation app-0/G2 not billed: tenant
  // app-0 does not exist").
  std::vector<std::string> notes;
  std::string currency;
  Micro metered_total_micro = 0;  // sum of the pools' rounded totals
  std::vector<Invoice> invoices;  // by account name
  std::vector<ChargebackTotal> chargeback;  // by organisation
};

struct InvoiceOptions {
  // The observed span, seconds (rounded out to whole hours, clipped to the period); the default:
  // the whole period.
  int64_t observed_start = INT64_MIN;
  int64_t observed_end = INT64_MAX;
  // Whether a tenant exists (reservations of others are not billed); empty: every tenant does.
  std::function<bool(const std::string&)> tenant_exists;
};

// The observed span of a ledger: from the hour of its first record to the end of the hour of its
// last (all records, any period); {0, 0} for none. `tessera bill`'s rule.
std::pair<int64_t, int64_t> ObservedSpan(const std::vector<HourlyRecord>& records);

// INVALID_ARGUMENT listing every price the usage needs and the plan lacks ("prices.A100-80GB.
// gpu_hour: ..."). `sources` are the ids of `records` (Ledger::sources()).
StatusOr<InvoiceRun> ComputeInvoices(const std::vector<SourceKey>& sources,
                                     const std::vector<HourlyRecord>& records,
                                     const std::vector<SlaObservation>& sla, const PricePlan& plan,
                                     const Period& period, const GpuModelCatalog& catalog,
                                     const InvoiceOptions& options = {});

// The models of `models` the plan cannot bill whole-GPU and share use of (no prices.<model> with
// gpu_hour or tiers), by name: what `tessera serve` checks at start against its cluster.
std::vector<std::string> UnpricedModels(const PricePlan& plan, const std::vector<std::string>& models);

// The chargeback of `invoices`: per organisation (by name) its total and its teams' (by name).
std::vector<ChargebackTotal> ChargebackOf(const std::vector<Invoice>& invoices);

// The run as seen by a caller who may see only some accounts (a tenant's token at the control
// plane): the invoices of the accounts `shown` keeps, exactly as the whole run priced them;
// metered_total_micro their sum and the chargeback of those alone, so that nothing of the other
// accounts' amounts shows, not even the cluster's total.
//   run: a 600,000, b 600,000, operator 1,200,000 (metered 2,400,000); shown = {a}
//   -> invoices [a], metered_total_micro 600,000, chargeback {unassigned: 600,000 {a: 600,000}}
InvoiceRun RestrictToAccounts(InvoiceRun run, const std::function<bool(const std::string&)>& shown);

}  // namespace tessera::metering
