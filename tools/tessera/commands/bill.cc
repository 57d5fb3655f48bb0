// `tessera bill`: invoices for one billing period from a ledger and a price plan.
//   tessera bill --usage LEDGER.jsonl[.gz] --plan PLAN.yaml [--period 2026-11 | 2026-11-01..2026-11-08] [-o table|json|csv|html]
//       [--json PATH]
// Reads the two files (gzip-compressed ones are decompressed: core/input_bytes.h), hands them to
// the metering module (ledger_file.h, price_plan.h, invoice.h) and prints what its renderers
// return. Bad files: every problem, file:line, exit 2. Idle capacity and reservations are billed
// for the hours the ledger covers (its first record's hour to the end of its last's), and only
// reservations of tenants the ledger names; a period the ledger does not cover is marked not
// complete (the table's second line; on stderr with -o json|csv, and the JSON's "complete").
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>
#include <tuple>

#include "tessera/core/gpu_model.h"
#include "tessera/core/input_bytes.h"
#include "tessera/metering/invoice.h"
#include "tessera/metering/invoice_render.h"
#include "tessera/metering/ledger_file.h"
#include "tessera/metering/price_plan.h"
#include "tools/tessera/commands/commands.h"
#include "tools/tessera/commands/common.h"

namespace tessera::cli {

namespace {

struct BillFlags {
  std::string usage;
  std::string plan;
  std::string period;
  OutputFlags output;  // -o table|json|csv|html, --json PATH (common.h)
};

// "-": standard input (e.g. `curl ... | tessera bill --usage - ...`). Gzip is decompressed.
StatusOr<std::string> ReadFile(const std::string& path, const std::string& flag) {
  std::stringstream ss;
  if (path == "-") {
    ss << std::cin.rdbuf();
    return DecompressIfGzip(ss.str(), "<stdin>");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError(flag + ": cannot read '" + path + "'");
  ss << in.rdbuf();
  return DecompressIfGzip(ss.str(), path);
}

int RunBill(const BillFlags& f) {
  const GpuModelCatalog& catalog = GpuModelCatalog::Builtin();
  auto ledger_text = ReadFile(f.usage, "--usage");
  if (!ledger_text.ok()) return Fail("bill", ledger_text.status(), kExitBadInput);
  auto plan_text = ReadFile(f.plan, "--plan");
  if (!plan_text.ok()) return Fail("bill", plan_text.status(), kExitBadInput);
  // Both files are checked before either is reported, so one run lists every problem.
  auto ledger = metering::ParseLedgerJsonl(*ledger_text, f.usage == "-" ? "<stdin>" : f.usage, catalog);
  auto plan = metering::ParsePricePlanYaml(*plan_text, f.plan, catalog);
  std::string problems;
  if (!ledger.ok()) problems += ledger.status().message();
  if (!plan.ok()) problems += (problems.empty() ? "" : "\n") + plan.status().message();
  metering::Period period;
  if (!f.period.empty()) {
    auto p = metering::ParsePeriod(f.period);
    if (!p.ok()) problems += (problems.empty() ? "--period: " : "\n--period: ") + p.status().message();
    else period = *p;
  }
  if (!problems.empty()) return Fail("bill", problems, kExitBadInput);
  const std::vector<metering::HourlyRecord> records = ledger->ledger.Records();
  if (f.period.empty()) {
    if (records.empty()) return Fail("bill", "the ledger has no usage: give the month with --period", kExitBadInput);
    int64_t first = records.front().hour;
    for (const metering::HourlyRecord& r : records) first = std::min(first, r.hour);
    period = metering::MonthOf(first);
  }
  // What the ledger saw: idle capacity and reservations are billed for the hours from its first
  // record to the end of its last only, and only reservations of tenants the ledger names.
  metering::InvoiceOptions options;
  std::tie(options.observed_start, options.observed_end) = metering::ObservedSpan(records);
  std::set<std::string> tenants;
  for (const metering::SourceKey& k : ledger->ledger.sources()) tenants.insert(k.tenant);
  options.tenant_exists = [&tenants](const std::string& t) { return tenants.count(t) > 0; };
  auto run = metering::ComputeInvoices(ledger->ledger.sources(), records, ledger->sla, *plan, period, catalog, options);
  if (!run.ok()) return Fail("bill", f.plan + ": " + run.status().message(), kExitBadInput);
  const bool json_out = f.output.JsonOnStdout();
  if (json_out || f.output.format == "csv") {  // the table and the page say it themselves
    if (!run->complete)
      std::fprintf(stderr, "tessera bill: %s is not complete: the ledger covers %lld of its %lld hours (%s to %s)\n",
                   period.name.c_str(), static_cast<long long>((run->observed_end - run->observed_start) / metering::kSecondsPerHour),
                   static_cast<long long>(period.Hours()),
                   run->observed_end > run->observed_start ? metering::FormatUtc(run->observed_start).c_str() : "-",
                   run->observed_end > run->observed_start ? metering::FormatUtc(run->observed_end).c_str() : "-");
    for (const std::string& n : run->notes) std::fprintf(stderr, "tessera bill: %s\n", n.c_str());
  }
  std::string out;
  if (f.output.format == "csv") out = metering::RenderInvoicesCsv(*run);
  else if (f.output.format == "html") out = metering::RenderInvoicesHtml(*run);
  else if (!json_out) out = metering::RenderInvoicesTable(*run);
  const bool need_json = json_out || !f.output.json_path.empty();
  if (Status s = EmitOutput(f.output, out, need_json ? metering::RenderInvoicesJson(*run) : ""); !s.ok())
    return Fail("bill", s, kExitFailure);
  return kExitOk;
}

}  // namespace

void RegisterBill(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<BillFlags>();
  CLI::App* cmd = app.add_subcommand(
      "bill",
      "Invoices for one billing period from a usage ledger (JSON lines) and a price plan (YAML)\n"
      "  tessera bill --usage data/examples/ledger-default-week.jsonl.gz --plan data/examples/price-plan.yaml \\\n"
      "      --period 2026-11-01..2026-11-08\n"
      "Money is integer micro-units; the lines of all accounts sum to the metered total exactly\n"
      "(docs/metering.md). Idle capacity and reservations are billed only for the hours the ledger\n"
      "covers (its first record to its last), reservations only for tenants the ledger names; a\n"
      "period the ledger does not cover is marked not complete. Bad files: every problem with\n"
      "file:line, exit 2.");
  cmd->add_option("--usage", flags->usage, "Ledger file: usage samples and SLA observations, JSON lines, plain or gzip-compressed ('-': standard input)")->required();
  cmd->add_option("--plan", flags->plan, "Price plan, YAML")->required();
  cmd->add_option("--period", flags->period, "Billing period: a month YYYY-MM or days YYYY-MM-DD..YYYY-MM-DD (end exclusive; default: the month of the ledger's first hour)");
  AddOutputFlags(cmd, &flags->output,
                 "the invoices, their lines and totals (docs/metering.md); -o csv: FinOps FOCUS columns, -o html: a page",
                 {"csv", "html"});
  cmd->callback([flags, exit_code] { *exit_code = RunBill(*flags); });
}

}  // namespace tessera::cli
