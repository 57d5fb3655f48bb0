#include "tessera/sim/ledger_export.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "tessera/metering/civil_time.h"
#include "tessera/metering/ledger_file.h"

namespace tessera::sim {

std::string RenderScenarioLedger(const sched::TenantTree& tenants, const std::vector<placement::NodeSpec>& nodes,
                                 const std::vector<WorkloadJob>& jobs, sched::Seconds horizon,
                                 const GpuModelCatalog& catalog,
                                 const std::map<std::string, std::map<int64_t, double>>& guaranteed_wait_p99_by_hour) {
  std::map<uint32_t, int64_t> gpus_by_model;
  for (const placement::NodeSpec& n : nodes) {
    if (n.gpu_count > 0) gpus_by_model[n.model.value()] += n.gpu_count;
  }
  uint32_t dominant = 0;
  int64_t most = -1;
  for (const auto& [m, g] : gpus_by_model) {
    if (g > most) most = g, dominant = m;
  }
  std::string out;
  const int64_t end_of_run = kScenarioEpoch + horizon.count();
  for (const WorkloadJob& w : jobs) {
    const placement::TaskRequest& pod = w.job.pod;
    if (pod.num_gpu <= 0 || w.job.tenant == sched::kNoTenant) continue;
    uint32_t model = dominant;
    for (const auto& [m, g] : gpus_by_model) {
      if (pod.allowed_models != 0 && pod.AllowsModel(ModelBit(GpuModelId(m)))) {
        model = m;
        break;
      }
    }
    const int64_t start = kScenarioEpoch + w.job.submit.count();
    const int64_t end = std::min(start + w.duration.count(), end_of_run);
    if (end <= start || gpus_by_model.empty()) continue;
    const bool whole = pod.gpu_milli.value() >= 1000;
    const int64_t milli = whole ? 1000 : pod.gpu_milli.value();
    const int64_t mib_per_gpu = pod.num_gpu > 0 ? w.job.gpu_memory.value() / pod.num_gpu : 0;
    for (int32_t p = 0; p < w.job.pods; ++p) {
      for (int32_t g = 0; g < pod.num_gpu; ++g) {
        metering::UsageSample s;
        s.key = {tenants.name(w.job.tenant), "sim", std::to_string(g), catalog.info(GpuModelId(model)).name,
                 whole ? "whole" : "share", "job-" + std::to_string(w.job.id) + "/" + std::to_string(p)};
        int64_t seq = 0;
        for (int64_t at = start; at < end;) {
          const int64_t next = std::min(end, (metering::HourOf(at) + 1) * metering::kSecondsPerHour);
          s.values.seq = ++seq;
          s.values.start = at;
          s.values.end = next;
          s.values.gpu_milli_s_allocated = milli * (next - at);
          s.values.gpu_milli_s_used = s.values.gpu_milli_s_allocated;
          s.values.memory_mib_s = mib_per_gpu * (next - at);
          s.values.peak_memory_mib = mib_per_gpu;
          out += metering::RenderUsageLine(s);
          at = next;
        }
      }
    }
  }
  // The control plane's SLA observations: one per tenant and hour in which its Guaranteed work started.
  for (const auto& [tenant, hours] : guaranteed_wait_p99_by_hour) {
    for (const auto& [hour, p99] : hours)
      out += metering::RenderSlaLine(
          {tenant, "", std::string(kSlaGuaranteedWaitP99), std::llround(p99 * 1e6), kScenarioEpoch + hour});
  }
  return out;
}

}  // namespace tessera::sim
