#include "src/daemon/workload_request.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include <nlohmann/json.hpp>

namespace tessera::daemon {

using json = nlohmann::json;

namespace {

// Where a JSON parse stopped (the byte offset of the error).
class ErrorAt final : public json::json_sax_t {
 public:
  size_t position = 0;
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(json::number_integer_t) override { return true; }
  bool number_unsigned(json::number_unsigned_t) override { return true; }
  bool number_float(json::number_float_t, const json::string_t&) override { return true; }
  bool string(json::string_t&) override { return true; }
  bool binary(json::binary_t&) override { return true; }
  bool start_object(size_t) override { return true; }
  bool key(json::string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(size_t pos, const std::string&, const json::exception&) override {
    position = pos;
    return false;
  }
};

std::string TypeName(const json& v) {
  if (v.is_number_integer()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_null()) return "null";
  if (v.is_array()) return "an array";
  return "an object";
}

class Decoder {
 public:
  Decoder(const json& j, std::string* bad_field) : j_(j), bad_field_(bad_field) {}

  Status Fail(const std::string& field, const std::string& message) {
    if (bad_field_) *bad_field_ = field;
    return InvalidArgumentError(field + ": " + message);
  }

  // The integer at `field` within [lo, hi], or `absent` when the body has no such field.
  // (Plain values, no std::optional: GCC 12 warns maybe-uninitialized on optional<string>
  // through StatusOr under -fsanitize=thread.)
  StatusOr<int64_t> Int(const std::string& field, int64_t lo, int64_t hi, int64_t absent) {
    auto it = j_.find(field);
    if (it == j_.end()) return absent;
    if (!it->is_number_integer())
      return Fail(field, "expected an integer, got " + TypeName(*it));
    const bool is_unsigned = it->is_number_unsigned();
    const uint64_t u = is_unsigned ? it->get<uint64_t>() : 0;
    if (is_unsigned && u > static_cast<uint64_t>(INT64_MAX))
      return Fail(field, it->dump() + " is out of range " + std::to_string(lo) + ".." + std::to_string(hi));
    const int64_t v = is_unsigned ? static_cast<int64_t>(u) : it->get<int64_t>();
    if (v < lo || v > hi)
      return Fail(field, std::to_string(v) + " is out of range " + std::to_string(lo) + ".." + std::to_string(hi));
    return v;
  }

  // The string at `field`, 1..max_len characters; "" when absent (an empty one is refused).
  StatusOr<std::string> Str(const std::string& field, size_t max_len) {
    auto it = j_.find(field);
    if (it == j_.end()) return std::string();
    if (!it->is_string()) return Fail(field, "expected a string, got " + TypeName(*it));
    std::string s = it->get<std::string>();
    if (s.empty()) return Fail(field, "must not be empty");
    if (s.size() > max_len) return Fail(field, "longer than " + std::to_string(max_len) + " characters");
    return s;
  }

  // The number at `field`; NaN when absent.
  StatusOr<double> Number(const std::string& field) {
    auto it = j_.find(field);
    if (it == j_.end()) return std::nan("");
    if (!it->is_number()) return Fail(field, "expected a number, got " + TypeName(*it));
    return it->get<double>();
  }

 private:
  const json& j_;
  std::string* bad_field_;
};

const std::map<std::string, partition::SharingModeKind>& ModeNames() {
  static const std::map<std::string, partition::SharingModeKind> names = {
      {"exclusive", partition::SharingModeKind::kExclusive},
      {"mig", partition::SharingModeKind::kMig},
      {"mps", partition::SharingModeKind::kMps},
      {"timeslice", partition::SharingModeKind::kTimeslice},
      {"fraction", partition::SharingModeKind::kFraction}};
  return names;
}

bool KnownMigProfile(const GpuModelCatalog& catalog, std::optional<GpuModelId> model, const std::string& name) {
  for (size_t m = 0; m < catalog.size(); ++m) {
    const GpuModelId id{static_cast<uint32_t>(m)};
    if (model && *model != id) continue;
    const auto& geometry = catalog.info(id).mig;
    if (geometry && geometry->FindProfile(name)) return true;
  }
  return false;
}

bool KnownVgpuProfile(const GpuModelCatalog& catalog, std::optional<GpuModelId> model, const std::string& name) {
  for (size_t m = 0; m < catalog.size(); ++m) {
    const GpuModelId id{static_cast<uint32_t>(m)};
    if (model && *model != id) continue;
    for (const VgpuProfile& p : catalog.info(id).vgpu)
      if (p.name == name) return true;
  }
  return false;
}

constexpr const char* kFields[] = {"tenant", "name", "gpus", "gpu_milli", "gpu_mem_mib", "mig_profile",
                                   "vgpu_profile", "mode", "isolation", "latency_slo_ms", "qos", "priority",
                                   "pods", "cpu_milli", "memory_mib", "model", "workload_class", "label"};

// The fields that say what kind of GPU share it is, checked together.
Status CheckShape(Decoder& d, const GpuModelCatalog& catalog, WorkloadRequest& r) {
  if (!r.mig_profile.empty() && !r.vgpu_profile.empty())
    return d.Fail("vgpu_profile", "give mig_profile or vgpu_profile, not both");
  if (r.gpu_milli < 1000 && r.gpus != 1)
    return d.Fail("gpu_milli", "a fraction of a GPU (" + std::to_string(r.gpu_milli) + " milli) needs gpus = 1");
  if (r.gpu_milli < 1000 && (!r.mig_profile.empty() || !r.vgpu_profile.empty()))
    return d.Fail("gpu_milli", "a MIG or vGPU profile sets the share: leave gpu_milli out");
  if (!r.mig_profile.empty() && !KnownMigProfile(catalog, r.model, r.mig_profile))
    return d.Fail("mig_profile", "'" + r.mig_profile + "' is not a MIG profile of " +
                                     (r.model ? catalog.info(*r.model).name : std::string("any known model")));
  if (!r.vgpu_profile.empty() && !KnownVgpuProfile(catalog, r.model, r.vgpu_profile))
    return d.Fail("vgpu_profile", "'" + r.vgpu_profile + "' is not a vGPU type of " +
                                      (r.model ? catalog.info(*r.model).name : std::string("any known model")));
  if (r.mode) {
    using K = partition::SharingModeKind;
    const bool fraction = r.gpu_milli < 1000;
    if (*r.mode == K::kMig && r.mig_profile.empty() && !fraction)
      return d.Fail("mode", "mode 'mig' needs mig_profile or a fraction (gpu_milli) to size the instance");
    if (*r.mode == K::kExclusive && fraction)
      return d.Fail("mode", "mode 'exclusive' takes whole GPUs: leave gpu_milli out");
    if ((*r.mode == K::kMps || *r.mode == K::kTimeslice || *r.mode == K::kFraction) && !r.mig_profile.empty())
      return d.Fail("mode", "a MIG profile runs in mode 'mig'");
  }
  if (r.gpu_milli < 1000 && r.gpu_mem_mib == 0)
    return d.Fail("gpu_mem_mib", "a fraction of a GPU needs its memory limit (MiB, > 0)");
  return Status::Ok();
}

}  // namespace

StatusOr<WorkloadRequest> DecodeWorkloadRequest(std::string_view body, const GpuModelCatalog& catalog,
                                                std::string* bad_field) {
  if (bad_field) bad_field->clear();
  const json j = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    ErrorAt at;
    json::sax_parse(body.begin(), body.end(), &at);
    return InvalidArgumentError("the body is not JSON (error at character " + std::to_string(at.position) + ", counting from 1)");
  }
  if (!j.is_object()) return InvalidArgumentError("the body must be a JSON object");
  Decoder d(j, bad_field);
  for (const auto& [key, value] : j.items()) {
    if (std::find(std::begin(kFields), std::end(kFields), key) == std::end(kFields))
      return d.Fail(key, "unknown field (known: tenant, gpus, qos, gpu_milli, gpu_mem_mib, mig_profile, "
                         "vgpu_profile, mode, isolation, latency_slo_ms, priority, pods, cpu_milli, "
                         "memory_mib, model, workload_class, label, name)");
  }
  WorkloadRequest r;
  for (const char* required : {"tenant", "gpus", "qos"})
    if (!j.contains(required)) return d.Fail(required, "missing");
  TESSERA_ASSIGN_OR_RETURN(r.tenant, d.Str("tenant", 253));
  TESSERA_ASSIGN_OR_RETURN(r.name, d.Str("name", 253));
  TESSERA_ASSIGN_OR_RETURN(const std::string qos, d.Str("qos", 32));
  StatusOr<sched::QosClass> q = sched::ParseQos(qos);
  if (!q.ok()) return d.Fail("qos", "'" + qos + "' is not Guaranteed, Burstable or BestEffort");
  r.qos = *q;
  TESSERA_ASSIGN_OR_RETURN(const int64_t gpus, d.Int("gpus", 1, 16, 1));
  r.gpus = static_cast<int32_t>(gpus);
  TESSERA_ASSIGN_OR_RETURN(const int64_t milli, d.Int("gpu_milli", 1, 1000, 1000));
  r.gpu_milli = static_cast<int32_t>(milli);
  TESSERA_ASSIGN_OR_RETURN(r.gpu_mem_mib, d.Int("gpu_mem_mib", 0, int64_t{1} << 31, 0));
  TESSERA_ASSIGN_OR_RETURN(const int64_t priority, d.Int("priority", -1000, 1000, 0));
  r.priority = static_cast<int32_t>(priority);
  TESSERA_ASSIGN_OR_RETURN(const int64_t pods, d.Int("pods", 1, 1024, 1));
  r.pods = static_cast<int32_t>(pods);
  TESSERA_ASSIGN_OR_RETURN(r.cpu_milli, d.Int("cpu_milli", 0, int64_t{1} << 31, 1000));
  TESSERA_ASSIGN_OR_RETURN(r.memory_mib, d.Int("memory_mib", 0, int64_t{1} << 31, 4096));
  TESSERA_ASSIGN_OR_RETURN(const std::string model, d.Str("model", 128));
  if (!model.empty()) {
    StatusOr<GpuModelId> id = catalog.Find(model);
    if (!id.ok()) return d.Fail("model", "unknown GPU model '" + model + "' (known: " + catalog.KnownNames() + ")");
    r.model = *id;
  }
  TESSERA_ASSIGN_OR_RETURN(r.mig_profile, d.Str("mig_profile", 32));
  TESSERA_ASSIGN_OR_RETURN(r.vgpu_profile, d.Str("vgpu_profile", 64));
  TESSERA_ASSIGN_OR_RETURN(const std::string mode, d.Str("mode", 32));
  if (!mode.empty()) {
    auto it = ModeNames().find(mode);
    if (it == ModeNames().end())
      return d.Fail("mode", "'" + mode + "' is not exclusive, mig, mps, timeslice or fraction");
    r.mode = it->second;
  }
  TESSERA_ASSIGN_OR_RETURN(const std::string isolation, d.Str("isolation", 32));
  if (isolation == "process") r.isolation = partition::Isolation::kProcess;
  else if (isolation == "hardware") r.isolation = partition::Isolation::kHardware;
  else if (!isolation.empty() && isolation != "none")
    return d.Fail("isolation", "'" + isolation + "' is not none, process or hardware");
  TESSERA_ASSIGN_OR_RETURN(const double slo, d.Number("latency_slo_ms"));
  if (!std::isnan(slo)) {
    if (!(slo > 0) || slo > 3600000) return d.Fail("latency_slo_ms", "must be > 0 and <= 3600000 (one hour)");
    r.latency_slo_ms = slo;
  }
  TESSERA_ASSIGN_OR_RETURN(r.workload_class, d.Str("workload_class", 63));
  TESSERA_ASSIGN_OR_RETURN(r.label, d.Str("label", 63));
  TESSERA_RETURN_IF_ERROR(CheckShape(d, catalog, r));
  return r;
}

}  // namespace tessera::daemon
