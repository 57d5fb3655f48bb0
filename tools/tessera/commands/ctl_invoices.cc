// `tessera ctl invoices`: GET /v1/invoices, the month's invoices the control plane bills from
// its usage ledger and price plan; -o json prints the server's JSON (`tessera bill -o json`'s).
#include <memory>
#include <string>

#include "tools/tessera/commands/commands.h"
#include "tools/tessera/commands/common.h"
#include "tools/tessera/commands/ctl.h"

namespace tessera::cli {

namespace {

struct InvoiceFlags {
  std::string period;
  std::string tenant;
};

int Invoices(const CtlConnection& c, const InvoiceFlags& f) {
  return CtlCall(c, "", "invoices", "", "GET", "/v1/invoices" + QueryString({{"period", f.period}, {"tenant", f.tenant}}));
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
