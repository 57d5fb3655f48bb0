#include "tessera/metering/invoice_render.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include "tessera/core/html.h"

namespace tessera::metering {

namespace {

using nlohmann::ordered_json;

std::string Csv(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

// The FOCUS names of our units and resource types.
std::string ResourceType(const InvoiceLine& l) {
  if (l.resource == "mig") return "GPU MIG instance";
  if (l.resource == "memory") return "GPU memory";
  if (l.resource == "credit") return "";
  if (l.resource == "idle") return "GPU idle capacity";
  return "GPU";
}

// The line that says a period is not complete ("" when it is): what was observed of it.
std::string Coverage(const InvoiceRun& run) {
  if (run.complete) return "";
  const int64_t hours = (run.observed_end - run.observed_start) / kSecondsPerHour;
  if (hours == 0)
    return "Not complete: nothing of " + run.period.name + " was observed; no idle capacity or reservation is billed";
  return "Not complete: observed " + FormatUtc(run.observed_start) + " to " + FormatUtc(run.observed_end) + " (" +
         std::to_string(hours) + " of " + std::to_string(run.period.Hours()) +
         " hours); idle capacity and reservations are billed for those hours only";
}

}  // namespace

std::string RenderInvoicesJson(const InvoiceRun& run) {
  ordered_json j;
  j["period"] = run.period.name;
  j["complete"] = run.complete;
  const bool seen = run.observed_end > run.observed_start;
  j["observed_start"] = seen ? ordered_json(FormatUtc(run.observed_start)) : ordered_json(nullptr);
  j["observed_end"] = seen ? ordered_json(FormatUtc(run.observed_end)) : ordered_json(nullptr);
  j["observed_hours"] = (run.observed_end - run.observed_start) / kSecondsPerHour;
  j["notes"] = run.notes;
  j["currency"] = run.currency;
  j["metered_total_micro"] = run.metered_total_micro;
  j["invoices"] = ordered_json::array();
  for (const Invoice& inv : run.invoices) {
    ordered_json i;
    i["tenant"] = inv.tenant;
    i["organisation"] = inv.organisation;
    i["team"] = inv.team;
    i["total_micro"] = inv.total_micro;
    i["lines"] = ordered_json::array();
    for (const InvoiceLine& l : inv.lines) {
      i["lines"].push_back({{"description", l.description}, {"quantity", l.quantity}, {"unit", l.unit},
                            {"amount_micro", l.amount_micro}, {"list_cost_micro", l.list_cost_micro},
                            {"unit_price", l.unit_price}, {"charge_category", l.charge_category},
                            {"pricing_category", l.pricing_category}, {"resource", l.resource},
                            {"model", l.model}, {"profile", l.profile}, {"commitment", l.commitment},
                            {"commitment_status", l.commitment_status}});
    }
    j["invoices"].push_back(std::move(i));
  }
  j["chargeback"] = ordered_json::array();
  for (const ChargebackTotal& c : run.chargeback) {
    ordered_json o{{"organisation", c.organisation}, {"total_micro", c.total_micro}, {"teams", ordered_json::array()}};
    for (const auto& [team, total] : c.teams) o["teams"].push_back({{"team", team}, {"total_micro", total}});
    j["chargeback"].push_back(std::move(o));
  }
  return j.dump(2) + "\n";
}

std::string RenderInvoicesCsv(const InvoiceRun& run) {
  static const char* const kColumns[] = {
      "BillingAccountId", "BillingAccountName", "BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart",
      "ChargePeriodEnd", "BilledCost", "EffectiveCost", "ListCost", "ContractedCost", "BillingCurrency",
      "ChargeCategory", "ChargeClass", "ChargeDescription", "ChargeFrequency", "ConsumedQuantity", "ConsumedUnit",
      "PricingQuantity", "PricingUnit", "PricingCategory", "ListUnitPrice", "ContractedUnitPrice",
      "CommitmentDiscountId", "CommitmentDiscountName", "CommitmentDiscountCategory", "CommitmentDiscountType",
      "CommitmentDiscountStatus", "ResourceType", "ServiceCategory", "ServiceName", "SkuId", "SubAccountId",
      "SubAccountName", "Tags"};
  std::string out;
  for (const char* c : kColumns) out += std::string(out.empty() ? "" : ",") + c;
  out += "\n";
  const std::string start = FormatUtc(run.period.start), end = FormatUtc(run.period.end);
  for (const Invoice& inv : run.invoices) {
    for (const InvoiceLine& l : inv.lines) {
      const bool commit = !l.commitment.empty() && l.resource == "reservation";
      const std::string tags = "{\"organisation\":\"" + inv.organisation + "\",\"team\":\"" + inv.team + "\"}";
      const std::string sku = l.model + (l.profile.empty() ? "" : "/" + l.profile) + "/" + l.resource;
      const std::string cells[] = {
          "tessera", "tessera", start, end, start, end, FormatMicro(l.amount_micro), FormatMicro(l.amount_micro),
          FormatMicro(l.list_cost_micro), FormatMicro(l.amount_micro), run.currency, l.charge_category, "",
          l.description, commit ? "Recurring" : "Usage-Based", l.charge_category == "Credit" ? "" : l.quantity,
          l.charge_category == "Credit" ? "" : l.unit, l.quantity, l.unit, l.pricing_category, l.unit_price,
          l.unit_price, l.commitment, l.commitment.empty() ? "" : l.commitment + " reservation",
          l.commitment.empty() ? "" : "Usage", l.commitment.empty() ? "" : "Reservation",
          commit ? l.commitment_status : "", ResourceType(l), "AI and Machine Learning", "tessera GPU sharing",
          l.charge_category == "Credit" ? "" : sku, inv.tenant, inv.tenant, tags};
      std::string row;
      for (const std::string& c : cells) row += (row.empty() ? "" : ",") + Csv(c);
      // The first cell is never empty, so `row.empty()` only skips the leading comma.
      out += row + "\n";
    }
  }
  return out;
}

std::string RenderInvoicesTable(const InvoiceRun& run) {
  std::string out = "Invoices for " + run.period.name + " (" + run.currency + "), metered total " +
                    FormatMicro(run.metered_total_micro) + "\n";
  if (!run.complete) out += Coverage(run) + "\n";
  for (const std::string& n : run.notes) out += "Note: " + n + "\n";
  char buf[512];
  for (const Invoice& inv : run.invoices) {
    std::snprintf(buf, sizeof buf, "\n%s (%s / %s): %s\n", inv.tenant.c_str(), inv.organisation.c_str(),
                  inv.team.c_str(), FormatMicro(inv.total_micro).c_str());
    out += buf;
    for (const InvoiceLine& l : inv.lines) {
      std::snprintf(buf, sizeof buf, "  %-52s %16s %-15s %16s\n", l.description.c_str(), l.quantity.c_str(),
                    l.unit.c_str(), FormatMicro(l.amount_micro).c_str());
      out += buf;
    }
  }
  out += "\nChargeback\n";
  for (const ChargebackTotal& c : run.chargeback) {
    std::snprintf(buf, sizeof buf, "  %-30s %16s\n", c.organisation.c_str(), FormatMicro(c.total_micro).c_str());
    out += buf;
    for (const auto& [team, total] : c.teams) {
      std::snprintf(buf, sizeof buf, "    %-28s %16s\n", team.c_str(), FormatMicro(total).c_str());
      out += buf;
    }
  }
  return out;
}

std::string RenderInvoicesHtml(const InvoiceRun& run) {
  std::string out =
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>tessera invoices " + HtmlEscape(run.period.name) +
      "</title>\n<style>body{font-family:sans-serif}table{border-collapse:collapse;margin-bottom:1em}"
      "td,th{border:1px solid #ccc;padding:2px 6px}td.n{text-align:right}</style></head><body>\n<h1>Invoices " +
      HtmlEscape(run.period.name) + "</h1>\n<p>Metered total: " + FormatMicro(run.metered_total_micro) + " " +
      HtmlEscape(run.currency) + "</p>\n";
  if (!run.complete) out += "<p>" + HtmlEscape(Coverage(run)) + "</p>\n";
  for (const std::string& n : run.notes) out += "<p>Note: " + HtmlEscape(n) + "</p>\n";
  for (const Invoice& inv : run.invoices) {
    out += "<h2>" + HtmlEscape(inv.tenant) + " <small>(" + HtmlEscape(inv.organisation) + " / " + HtmlEscape(inv.team) + ")</small>: " +
           FormatMicro(inv.total_micro) + "</h2>\n<table><tr><th>description</th><th>quantity</th><th>unit</th>"
           "<th>amount</th></tr>\n";
    for (const InvoiceLine& l : inv.lines) {
      out += "<tr><td>" + HtmlEscape(l.description) + "</td><td class=\"n\">" + HtmlEscape(l.quantity) + "</td><td>" +
             HtmlEscape(l.unit) + "</td><td class=\"n\">" + FormatMicro(l.amount_micro) + "</td></tr>\n";
    }
    out += "</table>\n";
  }
  return out + "</body></html>\n";
}

}  // namespace tessera::metering
