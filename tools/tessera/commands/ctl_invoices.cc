// `tessera ctl invoices`: GET /v1/invoices, the month's invoices the control plane bills from
// its usage ledger and price plan; -o json prints the server's JSON (`tessera bill -o json`'s).
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/metering/money.h"
#include "tools/tessera/commands/commands.h"
#include "tools/tessera/commands/common.h"
#include "tools/tessera/commands/ctl.h"

namespace tessera::cli {

namespace {

using json = nlohmann::json;

struct InvoiceFlags {
  std::string period;
  std::string tenant;
};

std::string Money(const json& v) { return v.is_number_integer() ? metering::FormatMicro(v.get<int64_t>()) : "-"; }
std::string Text(const json& v) { return v.is_string() ? v.get<std::string>() : v.is_null() ? "-" : v.dump(); }

// The accounts with their totals, then every line.
std::string InvoiceTable(const json& a) {
  std::string out = "Invoices for " + Text(a["period"]) + " (" + Text(a["currency"]) + "), total " +
                    Money(a["metered_total_micro"]) + "\n";
  // A month so far, or one the cluster reported nothing in for part of it (docs/api.md#invoices).
  if (a.value("complete", true) == false) {
    const json hours = a.value("observed_hours", json(0));
    if (a["observed_start"].is_string())
      out += "Not complete: observed " + Text(a["observed_start"]) + " to " + Text(a["observed_end"]) + " (" +
             Text(hours) + " hours); idle capacity and reservations are billed for those hours only\n";
    else
      out += "Not complete: nothing of " + Text(a["period"]) + " was observed; no idle capacity or reservation is billed\n";
  }
  for (const json& n : a.value("notes", json::array())) out += "Note: " + Text(n) + "\n";
  out += "\n";
  std::vector<std::vector<std::string>> accounts = {{"TENANT", "ORGANISATION", "TEAM", "TOTAL"}};
  std::vector<std::vector<std::string>> lines = {{"TENANT", "DESCRIPTION", "QUANTITY", "UNIT", "AMOUNT"}};
  for (const json& i : a.value("invoices", json::array())) {
    accounts.push_back({Text(i["tenant"]), Text(i["organisation"]), Text(i["team"]), Money(i["total_micro"])});
    for (const json& l : i.value("lines", json::array()))
      lines.push_back({Text(i["tenant"]), Text(l["description"]), Text(l["quantity"]), Text(l["unit"]),
                       Money(l["amount_micro"])});
  }
  out += TextTable(accounts);
  if (lines.size() > 1) out += "\n" + TextTable(lines);
  return out;
}

int Invoices(const CtlConnection& c, const InvoiceFlags& f) {
  const std::string command = "ctl invoices";
  StatusOr<std::unique_ptr<daemon::ApiClient>> client = CtlClient(c);
  if (!client.ok()) return Fail(command, client.status(), kExitBadInput);
  std::string target = "/v1/invoices";
  for (const auto& [key, v] : {std::pair{"period", f.period}, {"tenant", f.tenant}})
    if (!v.empty()) target += std::string(target.find('?') == std::string::npos ? "?" : "&") + key + "=" + QueryEscape(v);
  StatusOr<daemon::ApiResponse> r = (*client)->Call("GET", target, "", {});
  if (!r.ok()) return Fail(command, r.status(), kExitFailure);
  if (r->status < 200 || r->status > 299)
    return Fail(command, "HTTP " + std::to_string(r->status) + ": " + daemon::ApiError(*r), kExitFailure);
  const json answer = json::parse(r->body, nullptr, false);
  if (answer.is_discarded()) return Fail(command, "the server's answer is not JSON", kExitFailure);
  std::printf("%s", c.output == "json" ? (answer.dump(2) + "\n").c_str() : InvoiceTable(answer).c_str());
  return kExitOk;
}

}  // namespace

void RegisterCtlInvoices(CLI::App* ctl, std::shared_ptr<const CtlConnection> connection, int* exit_code) {
  auto f = std::make_shared<InvoiceFlags>();
  CLI::App* invoices = ctl->add_subcommand(
      "invoices",
      "A month's invoices, billed by the control plane from its usage ledger with its price plan\n"
      "(tessera serve --price-plan): each account's total, then its lines. Idle capacity and\n"
      "reservations are billed for the hours observed (from the first usage sample to the start of\n"
      "the current hour); a month not observed whole says \"Not complete\". A tenant token sees its\n"
      "subtree's invoices only, and a total of those.");
  invoices->fallthrough();
  invoices->add_option("--period", f->period, "The month, YYYY-MM (UTC; default: the current month)");
  invoices->add_option("--tenant", f->tenant, "A tenant and its subtree (default: the token's; admins: all)");
  invoices->callback([connection, f, exit_code] { *exit_code = CtlGuard([&] { return Invoices(*connection, *f); }); });
}

}  // namespace tessera::cli
