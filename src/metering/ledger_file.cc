#include "tessera/metering/ledger_file.h"

#include <nlohmann/json.hpp>

#include "tessera/core/input_bytes.h"
#include "tessera/metering/civil_time.h"

namespace tessera::metering {

namespace {

using nlohmann::json;

struct LineReader {
  const json& obj;
  std::string at;  // "file:line: "
  std::vector<std::string>& problems;
  bool ok = true;

  void Problem(const std::string& what) {
    problems.push_back(at + what);
    ok = false;
  }
  std::string Str(const char* key) {
    auto it = obj.find(key);
    if (it == obj.end()) {
      Problem(std::string(key) + ": missing");
      return "";
    }
    if (it->is_number_integer()) return std::to_string(it->get<int64_t>());  // "gpu": 0
    if (!it->is_string() || it->get_ref<const std::string&>().empty()) {
      Problem(std::string(key) + ": expected a non-empty string");
      return "";
    }
    return it->get<std::string>();
  }
  int64_t Int(const char* key, bool optional = false, int64_t dflt = 0) {
    auto it = obj.find(key);
    if (it == obj.end() || (optional && it->is_null())) {
      if (!optional) Problem(std::string(key) + ": missing");
      return dflt;
    }
    if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX / 4)) {
      Problem(std::string(key) + ": too large");
      return dflt;
    }
    if (!it->is_number_integer()) {
      Problem(std::string(key) + ": expected an integer");
      return dflt;
    }
    const int64_t v = it->get<int64_t>();
    if (v < 0) {
      Problem(std::string(key) + ": negative value " + std::to_string(v));
      return dflt;
    }
    if (v > INT64_MAX / 4) {
      Problem(std::string(key) + ": too large");
      return dflt;
    }
    return v;
  }
  int64_t Time(const char* key) {
    const std::string s = Str(key);
    if (s.empty()) return 0;
    auto t = ParseUtc(s);
    if (!t.ok()) {
      Problem(std::string(key) + ": " + t.status().message());
      return 0;
    }
    return *t;
  }
  void Keys(const std::vector<std::string>& allowed) {
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      bool known = false;
      for (const std::string& a : allowed) known = known || a == it.key();
      if (!known) Problem("unknown field '" + it.key() + "'");
    }
  }
};

const std::vector<std::string> kUsageFields = {
    "type", "tenant", "node", "gpu", "model", "partition", "workload", "seq", "start", "end",
    "gpu_milli_s_allocated", "gpu_milli_s_used", "memory_mib_s", "peak_memory_mib", "kernel_launches",
    "bytes_transferred"};

void ParseUsage(LineReader& r, const GpuModelCatalog& catalog, LedgerFile& out) {
  r.Keys(kUsageFields);
  UsageSample s;
  s.key.tenant = r.Str("tenant");
  s.key.node = r.Str("node");
  s.key.gpu = r.Str("gpu");
  s.key.model = r.Str("model");
  s.key.partition = r.Str("partition");
  s.key.workload = r.Str("workload");
  SampleValues& v = s.values;
  v.seq = r.Int("seq");
  v.start = r.Time("start");
  v.end = r.Time("end");
  v.gpu_milli_s_allocated = r.Int("gpu_milli_s_allocated");
  v.gpu_milli_s_used = r.Int("gpu_milli_s_used");
  v.memory_mib_s = r.Int("memory_mib_s", true);
  v.peak_memory_mib = r.Int("peak_memory_mib", true);
  v.kernel_launches = r.Int("kernel_launches", true);
  v.bytes_transferred = r.Int("bytes_transferred", true, -1);
  if (!s.key.model.empty()) {
    auto id = catalog.Find(s.key.model);
    if (!id.ok()) {
      r.Problem("model: unknown GPU model '" + s.key.model + "' (known: " + catalog.KnownNames() + ")");
    } else if (!s.key.partition.empty() && s.key.partition != "whole" && s.key.partition != "share") {
      const auto& mig = catalog.info(*id).mig;
      if (!mig || mig->FindProfile(s.key.partition) == nullptr) {
        std::string known;
        if (mig) {
          for (const MigProfile& p : mig->profiles) known += (known.empty() ? "" : ", ") + p.name;
        }
        r.Problem("partition: '" + s.key.partition + "' is not whole, share or a MIG profile of " + s.key.model +
                  (known.empty() ? " (it has none)" : " (" + known + ")"));
      }
    }
  }
  if (!r.ok) return;
  auto result = out.ledger.Ingest(s.key, v);
  if (!result.ok()) r.Problem(result.status().message());
}

void ParseSla(LineReader& r, LedgerFile& out) {
  r.Keys({"type", "tenant", "period", "hour", "metric", "value"});
  SlaObservation o;
  o.tenant = r.Str("tenant");
  if (r.obj.contains("hour") && r.obj.contains("period")) {
    r.Problem("hour: a line names a period or an hour, not both");
  } else if (r.obj.contains("hour")) {
    o.hour = r.Time("hour");
    if (r.ok && o.hour % kSecondsPerHour != 0) r.Problem("hour: expected the start of an hour like 2026-11-03T14:00:00Z");
  } else {
    o.period = r.Str("period");
    if (!o.period.empty() && !ParsePeriod(o.period).ok()) r.Problem("period: expected a month like 2026-11");
  }
  o.metric = r.Str("metric");
  auto it = r.obj.find("value");
  if (it == r.obj.end() || !it->is_number()) {
    r.Problem("value: expected a number");
  } else {
    const std::string text = it->dump();  // the shortest round-trip form: "420", "0.1"
    auto v = ParseDecimalMicro(text);
    if (!v.ok()) r.Problem("value: " + v.status().message());
    else o.value = *v;
  }
  if (r.ok) out.sla.push_back(o);
}

// The problem of a line that is not a JSON object. A wrong file (compressed, binary, CSV) fails at
// its first line: there the problem says what the file looks like instead and `*stop` is set, as
// its other lines would only repeat it.
std::string NotAnObject(std::string_view line, bool first_line, bool* stop) {
  const std::string looks = first_line ? DescribeBytes(line) : "";
  *stop = !looks.empty();
  if (looks.empty()) return "not a JSON object";
  return "not a JSON object; it looks like " + looks + ", so the rest was not read";
}

}  // namespace

StatusOr<LedgerFile> ParseLedgerJsonl(std::string_view text, std::string_view source,
                                      const GpuModelCatalog& catalog) {
  LedgerFile out;
  std::vector<std::string> problems;
  size_t pos = 0;
  int64_t line_no = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    ++out.lines;
    const std::string at = std::string(source) + ":" + std::to_string(line_no) + ": ";
    const json obj = json::parse(line.begin(), line.end(), nullptr, false);
    if (obj.is_discarded() || !obj.is_object()) {
      bool stop = false;
      problems.push_back(at + NotAnObject(line, out.lines == 1, &stop));
      if (stop) break;
      continue;
    }
    LineReader r{obj, at, problems};
    auto type = obj.find("type");
    const std::string t = type == obj.end() ? "usage" : type->is_string() ? type->get<std::string>() : "";
    if (t == "usage") ParseUsage(r, catalog, out);
    else if (t == "sla") ParseSla(r, out);
    else r.Problem("type: expected usage or sla");
  }
  if (!problems.empty()) {
    std::string msg = std::to_string(problems.size()) + (problems.size() == 1 ? " problem" : " problems") +
                      " in the ledger:";
    for (const std::string& p : problems) msg += "\n  " + p;
    return InvalidArgumentError(msg);
  }
  return out;
}

std::string RenderUsageLine(const UsageSample& s) {
  json j = json::object();
  j["tenant"] = s.key.tenant;
  j["node"] = s.key.node;
  j["gpu"] = s.key.gpu;
  j["model"] = s.key.model;
  j["partition"] = s.key.partition;
  j["workload"] = s.key.workload;
  j["seq"] = s.values.seq;
  j["start"] = FormatUtc(s.values.start);
  j["end"] = FormatUtc(s.values.end);
  j["gpu_milli_s_allocated"] = s.values.gpu_milli_s_allocated;
  j["gpu_milli_s_used"] = s.values.gpu_milli_s_used;
  // The optional quantities are left out when zero (the parser's default).
  if (s.values.memory_mib_s != 0) j["memory_mib_s"] = s.values.memory_mib_s;
  if (s.values.peak_memory_mib != 0) j["peak_memory_mib"] = s.values.peak_memory_mib;
  if (s.values.kernel_launches != 0) j["kernel_launches"] = s.values.kernel_launches;
  if (s.values.bytes_transferred >= 0) j["bytes_transferred"] = s.values.bytes_transferred;
  return j.dump() + "\n";
}

std::string RenderSlaLine(const SlaObservation& o) {
  json j = {{"type", "sla"}, {"tenant", o.tenant}, {"metric", o.metric}};
  if (o.hour >= 0) j["hour"] = FormatUtc(o.hour);
  else j["period"] = o.period;
  j["value"] = json::parse(FormatMicro(o.value));
  return j.dump() + "\n";
}

}  // namespace tessera::metering
