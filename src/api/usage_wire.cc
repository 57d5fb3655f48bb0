#include "tessera/api/usage_wire.h"

#include <nlohmann/json.hpp>

#include "tessera/api/json_fields.h"

namespace tessera::api {

using json = nlohmann::json;

namespace {

// The largest time a sample may carry: year 9999 (keeps every sum of the ledger inside int64).
constexpr int64_t kMaxTime = 253402300799;
// The most device memory one sample's NVML figure may claim: 1 PiB in MiB (far above any GPU).
constexpr int64_t kMaxNvmlMemoryMib = int64_t{1} << 30;

// One sample: the values, or the first problem (naming its field through `bad_field`).
Status DecodeSample(const json& j, const std::string& at, std::string* bad_field, UsageSample* out) {
  if (!j.is_object()) {
    *bad_field = at;
    return InvalidArgumentError(at + ": expected an object, got " + JsonTypeName(j));
  }
  JsonFields f(j, at + ".", bad_field);
  // No OnlyKnown: unknown fields of a sample are ignored (see the header).
  for (const char* name : {"tenant", "workload", "gpu", "model", "partition", "seq", "start", "end",
                           "gpu_milli_s_allocated", "gpu_milli_s_used", "memory_mib_s", "peak_memory_mib",
                           "kernel_launches"}) {
    TESSERA_RETURN_IF_ERROR(f.Require(name));
  }
  const std::pair<const char*, std::string*> strings[] = {{"tenant", &out->tenant}, {"workload", &out->workload},
                                                          {"gpu", &out->gpu},       {"model", &out->model},
                                                          {"partition", &out->partition}};
  for (const auto& [name, into] : strings) {
    TESSERA_ASSIGN_OR_RETURN(*into, f.Str(name, 128));
  }
  TESSERA_ASSIGN_OR_RETURN(out->seq, f.Int("seq", 0, INT64_MAX, 0));
  TESSERA_ASSIGN_OR_RETURN(out->start_s, f.Int("start", 0, kMaxTime, 0));
  TESSERA_ASSIGN_OR_RETURN(out->end_s, f.Int("end", 0, kMaxTime, 0));
  const std::pair<const char*, int64_t*> quantities[] = {
      {"gpu_milli_s_allocated", &out->gpu_milli_s_allocated}, {"gpu_milli_s_used", &out->gpu_milli_s_used},
      {"memory_mib_s", &out->memory_mib_s}, {"peak_memory_mib", &out->peak_memory_mib},
      {"kernel_launches", &out->kernel_launches}};
  for (const auto& [name, into] : quantities) {
    TESSERA_ASSIGN_OR_RETURN(*into, f.Int(name, 0, INT64_MAX, 0));
  }
  TESSERA_ASSIGN_OR_RETURN(out->bytes_transferred, f.Int("bytes_transferred", -1, INT64_MAX, -1));
  // The NVML figures: optional, but strict when given (a wrong type or range names the field).
  if (f.Has("nvml_used_milli")) {
    TESSERA_ASSIGN_OR_RETURN(out->nvml_used_milli, f.Int("nvml_used_milli", 0, 1000, 0));
  }
  if (f.Has("nvml_memory_mib")) {
    TESSERA_ASSIGN_OR_RETURN(out->nvml_memory_mib, f.Int("nvml_memory_mib", 0, kMaxNvmlMemoryMib, 0));
  }
  if (out->end_s <= out->start_s) {
    return f.Fail("end", std::to_string(out->end_s) + " is not after start " + std::to_string(out->start_s));
  }
  const int64_t span = out->end_s - out->start_s;
  if (span > 31 * 86400) return f.Fail("end", "the span of " + std::to_string(span) + " s is longer than 31 days");
  if (out->gpu_milli_s_allocated > 1000 * span) {
    return f.Fail("gpu_milli_s_allocated", std::to_string(out->gpu_milli_s_allocated) + " is more than one GPU for " +
                                               std::to_string(span) + " s (" + std::to_string(1000 * span) + ")");
  }
  // Use may exceed the allocation (a fractional share bursts into idle GPU time, billed at the
  // burst rate), but no GPU is busier than 100 %.
  if (out->gpu_milli_s_used > 1000 * span) {
    return f.Fail("gpu_milli_s_used", std::to_string(out->gpu_milli_s_used) + " is more than one GPU busy for " +
                                          std::to_string(span) + " s (" + std::to_string(1000 * span) + ")");
  }
  return Status::Ok();
}

}  // namespace

std::string EncodeUsageSample(const UsageSample& s) {
  json j{{"tenant", s.tenant},
              {"workload", s.workload},
              {"gpu", s.gpu},
              {"model", s.model},
              {"partition", s.partition},
              {"seq", s.seq},
              {"start", s.start_s},
              {"end", s.end_s},
              {"gpu_milli_s_allocated", s.gpu_milli_s_allocated},
              {"gpu_milli_s_used", s.gpu_milli_s_used},
              {"memory_mib_s", s.memory_mib_s},
              {"peak_memory_mib", s.peak_memory_mib},
              {"kernel_launches", s.kernel_launches},
              {"bytes_transferred", s.bytes_transferred}};
  if (s.nvml_used_milli) j["nvml_used_milli"] = *s.nvml_used_milli;
  if (s.nvml_memory_mib) j["nvml_memory_mib"] = *s.nvml_memory_mib;
  return j.dump();
}

std::string EncodeUsageBatch(const std::vector<std::string>& encoded) {
  std::string body = "{\"samples\":[";
  for (size_t i = 0; i < encoded.size(); ++i) body += (i ? "," : "") + encoded[i];
  return body + "]}";
}

StatusOr<std::vector<UsageItem>> DecodeUsageBatch(std::string_view body, std::string* bad_field, size_t max_samples) {
  std::string ignored;
  if (bad_field == nullptr) bad_field = &ignored;
  bad_field->clear();
  TESSERA_ASSIGN_OR_RETURN(json j, ParseJsonObject(body));
  JsonFields f(j, "", bad_field);
  TESSERA_RETURN_IF_ERROR(f.OnlyKnown({"samples"}));
  TESSERA_RETURN_IF_ERROR(f.Require("samples"));
  TESSERA_ASSIGN_OR_RETURN(json samples, f.Array("samples"));
  if (samples.size() > max_samples) {
    *bad_field = "samples";
    return Status(StatusCode::kResourceExhausted, "samples: " + std::to_string(samples.size()) +
                                                      " samples in one request, at most " +
                                                      std::to_string(max_samples));
  }
  std::vector<UsageItem> items(samples.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    UsageItem& item = items[i];
    item.index = i;
    item.error = DecodeSample(samples[i], "samples[" + std::to_string(i) + "]", &item.field, &item.sample);
  }
  return items;
}

}  // namespace tessera::api
