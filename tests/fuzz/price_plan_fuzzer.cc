// libFuzzer target for the price plan parser (metering/price_plan.h): arbitrary bytes must give a
// PricePlan or an INVALID_ARGUMENT listing problems, never a crash, a hang or an exception. A
// parsed plan must hold the parser's promises (no negative price, contiguous tiers, one open last
// tier), and invoicing it over a small fixed ledger must reconcile to the micro-unit.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "tessera/core/gpu_model.h"
#include "tessera/metering/invoice.h"
#include "tessera/metering/price_plan.h"

using namespace tessera::metering;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto& catalog = tessera::GpuModelCatalog::Builtin();
  auto plan = ParsePricePlanYaml(text, "fuzz.yaml", catalog);
  if (!plan.ok()) {
    if (plan.status().message().empty()) std::abort();
    return 0;
  }
  for (const auto& [model, p] : plan->prices) {
    for (auto price : {p.gpu_hour, p.milli_gpu_hour, p.memory_gib_hour}) {
      if (price && *price < 0) std::abort();
    }
    int64_t from = 0;
    for (size_t i = 0; i < p.tiers.size(); ++i) {
      if (p.tiers[i].from_gpu_hours != from || p.tiers[i].gpu_hour < 0) std::abort();
      if ((p.tiers[i].to_gpu_hours < 0) != (i + 1 == p.tiers.size())) std::abort();
      from = p.tiers[i].to_gpu_hours;
    }
  }
  // A fixed ledger: one share and one whole GPU of every priced model, one hour.
  Ledger ledger;
  int64_t seq = 0;
  for (const auto& [model, p] : plan->prices) {
    if (!p.gpu_hour) continue;
    SampleValues v;
    v.seq = ++seq;
    v.start = 1793491200;
    v.end = v.start + 1800;
    v.gpu_milli_s_allocated = 333 * 1800;
    v.memory_mib_s = 1024 * 1800;
    if (!ledger.Ingest({"a", "n", "0", model, "share", "w"}, v).ok()) std::abort();
    v.gpu_milli_s_allocated = 1000 * 1800;
    if (!ledger.Ingest({"b", "n", "1", model, "whole", "w"}, v).ok()) std::abort();
  }
  auto run = ComputeInvoices(ledger.sources(), ledger.Records(), {}, *plan, *ParsePeriod("2026-11"), catalog);
  if (!run.ok()) return 0;  // e.g. a price the usage needs is missing
  Micro sum = 0;
  for (const Invoice& inv : run->invoices) {
    Micro lines = 0;
    for (const InvoiceLine& l : inv.lines) lines += l.amount_micro;
    if (lines != inv.total_micro) std::abort();
    sum += lines;
  }
  if (sum != run->metered_total_micro) std::abort();
  return 0;
}
