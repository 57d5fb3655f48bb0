// Renderers of an invoice run (invoice.h): what `tessera bill -o table|json|csv|html` prints.
//
//   json  {"period", "complete", "observed_start", "observed_end" (UTC, null when nothing was
//         observed), "observed_hours", "notes": [text], "currency", "metered_total_micro", "invoices": [{"tenant", "organisation",
//         "team", "total_micro", "lines": [{"description", "quantity", "unit", "amount_micro",
//         "list_cost_micro", "unit_price", "charge_category", "pricing_category", "resource",
//         "model", "profile", "commitment", "commitment_status"}]}], "chargeback":
//         [{"organisation", "total_micro", "teams": [{"team", "total_micro"}]}]}
//   csv   one row per line with the FinOps FOCUS 1.1 columns (BilledCost, EffectiveCost, ListCost,
//         ContractedCost, ChargeCategory, ChargeClass, ChargeDescription, ConsumedQuantity,
//         ConsumedUnit, PricingQuantity, PricingUnit, PricingCategory, CommitmentDiscount*, ...);
//         money as decimals of the currency (6 places).
//   table a text table per account; html a standalone page with the same tables. Both say when
//         the period is not complete ("Not complete: observed 2026-11-01T00:00:00Z to
//         2026-11-08T00:00:00Z (168 of 720 hours); ...") and list the notes.
//
// Callers: the CLI. Thread-safety: pure functions.
#pragma once

#include <string>

#include "tessera/metering/invoice.h"

namespace tessera::metering {

std::string RenderInvoicesJson(const InvoiceRun& run);   // indented by 2, final newline
std::string RenderInvoicesCsv(const InvoiceRun& run);    // header + rows, RFC 4180 quoting
std::string RenderInvoicesTable(const InvoiceRun& run);
std::string RenderInvoicesHtml(const InvoiceRun& run);

}  // namespace tessera::metering
