// The metering sections of the scenario's HTML report (`tessera simulate --scenario
// dedicated-vs-shared --html OUT`): what the scenario's usage ledger (sim/ledger_export.h) bills,
// which tenants' usage the anomaly detector flags, and the demand forecast with its interval.
//
// Three sections, each an <h2> with an id the tests look for:
//   * id="invoices": the invoice table per tenant for the ledger's month under the price plan
//     (metering/invoice.h, the same run as `tessera bill`): account, organisation / team, the
//     charges by resource and the total; a partial month says which hours were observed;
//   * id="anomalies": per tenant, the GPUs allocated per hour (gpu_milli_s_allocated / 3.6e6)
//     run through the online detector (metering/anomaly.h) with hourly settings (warm-up 48
//     rows = 2 days, one alarm per tenant per 24 rows, the rest the defaults); a timeline (chart
//     "anomalies": one line per tenant over the hours since the ledger's first, a vermillion mark
//     per flag whose legend value is the tenant, the value and the reason) and a table of flags;
//   * id="forecast": the cluster's demand (GPUs allocated per hour, all models) and the
//     forecaster's next `horizon_hours` (metering/forecast.h) with its 90 % interval as a band
//     (chart "forecast").
// The charts are sim/report_charts.h's (uPlot, the dashboard's palette, time axes in hours with
// units); the caller passes `charts` to RenderChartAssets with the page's other charts. A build
// without uPlot draws the same two as static SVG (a lane per tenant with a mark per flag; the
// history, the forecast and a polygon class="interval" for the band).
//
// Worked example (tests/sim/metering_report_test.cc): a ledger of 2 tenants over 168 hours from
// 2026-11-01, tenant a on 4 whole G2 GPUs every hour except hour 100 (40 GPUs), tenant b on 1;
// plan G2 gpu_hour 2.00. The invoice table has a = (167 x 4 + 40) x 2.00 = 1416.00 and
// b = 168 x 2.00 = 336.00; the detector's first verdict is at hour 48, and its one flag is a at
// hour 100, 2026-11-05T04:00:00Z, "above expected 4 GPUs (robust z ...)"; the forecast chart shows
// the 168 hours of history and the 48 forecast hours with their band.
//
// Called by the CLI, which reads the price plan file and passes its text. Pure: no I/O.
// Thread-safety: a pure function of its inputs.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/gpu_model.h"
#include "tessera/core/status.h"
#include "tessera/metering/anomaly.h"
#include "tessera/sim/report_charts.h"

namespace tessera::sim {

// The hourly settings the report runs the detector with (see above).
metering::AnomalyOptions HourlyAnomalyOptions();

struct MeteringSections {
  std::string html;               // the three sections (no <html>/<body>), charts as RenderChart places
  std::vector<ChartSpec> charts;  // "anomalies", "forecast" (none for an empty ledger)
};

// The three sections. INVALID_ARGUMENT naming `plan_source` or the ledger line for a plan or
// ledger that does not parse or does not price the ledger's models.
StatusOr<MeteringSections> RenderMeteringSections(std::string_view ledger_jsonl, std::string_view plan_yaml,
                                                  std::string_view plan_source, const GpuModelCatalog& catalog,
                                                  int horizon_hours = 48);

}  // namespace tessera::sim
