#include "src/daemon/usage_codec.h"

#include <charconv>

#include "tessera/api/usage_wire.h"
#include "tessera/metering/civil_time.h"

namespace tessera::daemon {

using json = nlohmann::json;

namespace {

// The largest time a sample may carry: year 9999 (keeps every sum of the ledger inside int64).
constexpr int64_t kMaxTime = 253402300799;

// "HH:MM" of an RFC 3339 offset, in seconds; -1 when malformed.
int64_t OffsetSeconds(std::string_view hhmm) {
  if (hhmm.size() != 5 || hhmm[2] != ':') return -1;
  int h = 0, m = 0;
  if (std::from_chars(hhmm.data(), hhmm.data() + 2, h).ptr != hhmm.data() + 2 ||
      std::from_chars(hhmm.data() + 3, hhmm.data() + 5, m).ptr != hhmm.data() + 5 || h > 23 || m > 59)
    return -1;
  return h * 3600 + m * 60;
}

}  // namespace

StatusOr<std::vector<UsageItem>> DecodeUsageBatch(std::string_view node, std::string_view body,
                                                  std::string* bad_field, size_t max_samples) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<api::UsageItem> wire, api::DecodeUsageBatch(body, bad_field, max_samples));
  std::vector<UsageItem> items(wire.size());
  for (size_t i = 0; i < wire.size(); ++i) {
    api::UsageItem& w = wire[i];
    UsageItem& item = items[i];
    item.index = w.index;
    item.error = std::move(w.error);
    item.field = std::move(w.field);
    item.sample.node = std::string(node);
    if (!item.error.ok()) continue;
    const api::UsageSample& s = w.sample;
    item.sample = {.node = item.sample.node,
                   .tenant = s.tenant,
                   .workload = s.workload,
                   .gpu = s.gpu,
                   .model = s.model,
                   .partition = s.partition,
                   .seq = s.seq,
                   .start_s = s.start_s,
                   .end_s = s.end_s,
                   .gpu_milli_s_allocated = s.gpu_milli_s_allocated,
                   .gpu_milli_s_used = s.gpu_milli_s_used,
                   .memory_mib_s = s.memory_mib_s,
                   .peak_memory_mib = s.peak_memory_mib,
                   .kernel_launches = s.kernel_launches,
                   .bytes_transferred = s.bytes_transferred,
                   .nvml_used_milli = s.nvml_used_milli,
                   .nvml_memory_mib = s.nvml_memory_mib};
  }
  return items;
}

metering::SourceKey UsageSourceKey(const store::UsageSampleRecord& s) {
  return {s.tenant, s.node, s.gpu, s.model, s.partition, s.workload};
}

metering::SampleValues UsageValues(const store::UsageSampleRecord& s) {
  metering::SampleValues v;
  v.seq = s.seq;
  v.start = s.start_s;
  v.end = s.end_s;
  v.gpu_milli_s_allocated = s.gpu_milli_s_allocated;
  v.gpu_milli_s_used = s.gpu_milli_s_used;
  v.memory_mib_s = s.memory_mib_s;
  v.peak_memory_mib = s.peak_memory_mib;
  v.kernel_launches = s.kernel_launches;
  v.bytes_transferred = s.bytes_transferred;
  return v;
}

std::string LedgerErrorField(const Status& error, size_t index) {
  const std::string at = "samples[" + std::to_string(index) + "].";
  const std::string_view m = error.message();
  if (error.code() == StatusCode::kFailedPrecondition) return at + (m.starts_with("overlaps") ? "start" : "seq");
  if (error.code() == StatusCode::kAlreadyExists) return at + "seq";
  // The ledger's own bounds name their fields first ("memory_mib_s/peak_memory_mib above ...").
  const size_t end = m.find_first_of("/: ");
  const std::string_view first = m.substr(0, end);
  for (std::string_view known : {"memory_mib_s", "kernel_launches", "gpu_milli_s_allocated", "bytes_transferred"})
    if (first == known) return at + std::string(first);
  return at + "end";  // "end ... is not after start", "span of ... longer than 31 days"
}

StatusOr<int64_t> ParseUsageTime(std::string_view text, std::string_view field) {
  const std::string name(field);
  auto bad = [&](const std::string& why) {
    return InvalidArgumentError(name + ": '" + std::string(text) + "' " + why +
                                " (unix seconds or RFC 3339, e.g. 2026-11-01T00:00:00Z)");
  };
  if (text.empty()) return bad("is empty");
  if (text.find_first_not_of("0123456789") == std::string_view::npos) {
    int64_t v = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || ptr != text.data() + text.size() || v > kMaxTime) return bad("is out of range");
    return v;
  }
  if (text.size() < 20) return bad("is not a time");
  std::string_view rest = text.substr(19);
  if (!rest.empty() && rest[0] == '.') {
    const size_t digits = rest.find_first_not_of("0123456789", 1);
    if (digits == 1 || digits == std::string_view::npos) return bad("has a bad fraction of a second");
    rest = rest.substr(digits);
  }
  int64_t offset = 0;
  if (rest == "Z" || rest == "z") {
    offset = 0;
  } else if (rest.size() == 6 && (rest[0] == '+' || rest[0] == '-')) {
    offset = OffsetSeconds(rest.substr(1));
    if (offset < 0) return bad("has a bad UTC offset");
    if (rest[0] == '-') offset = -offset;
  } else {
    return bad("needs Z or a UTC offset (+HH:MM)");
  }
  std::string utc(text.substr(0, 19));
  if (utc[10] == 't' || utc[10] == ' ') utc[10] = 'T';
  StatusOr<int64_t> t = metering::ParseUtc(utc + "Z");
  if (!t.ok()) return bad("is not a time: " + std::string(t.status().message()));
  return *t - offset;
}

json UsageRecordView(const metering::SourceKey& key, const metering::HourlyRecord& r) {
  json out = {{"tenant", key.tenant},
              {"hour", metering::FormatUtc(r.hour)},
              {"hour_s", r.hour},
              {"node", key.node},
              {"gpu", key.gpu},
              {"model", key.model},
              {"partition", key.partition},
              {"workload", key.workload},
              {"seconds", r.seconds},
              {"gpu_milli_s_allocated", r.gpu_milli_s_allocated},
              {"gpu_milli_s_used", r.gpu_milli_s_used},
              {"memory_mib_s", r.memory_mib_s},
              {"peak_memory_mib", r.peak_memory_mib},
              {"kernel_launches", r.kernel_launches},
              {"bytes_transferred", r.bytes_transferred},
              {"samples", r.samples},
              {"samples_without_bytes", r.samples_without_bytes}};
  return out;
}

}  // namespace tessera::daemon
