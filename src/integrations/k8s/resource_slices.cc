#include "tessera/integrations/k8s/resource_slices.h"

#include <cctype>
#include <cstdio>

namespace tessera::k8s {
namespace {

using nlohmann::json;

constexpr char kApiVersion[] = "resource.k8s.io/v1";

// RFC 1123 subdomain: lower-case alphanumerics, '-' and '.', each label starting and ending
// alphanumeric, at most 253 characters.
bool IsDnsSubdomain(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  size_t label_start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == '.') {
      if (i == label_start) return false;
      if (s[label_start] == '-' || s[i - 1] == '-') return false;
      label_start = i + 1;
      continue;
    }
    const char c = s[i];
    if (!(std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '-'))
      return false;
  }
  return true;
}

json StringAttr(const std::string& v) { return {{"string", v}}; }
json IntAttr(int64_t v) { return {{"int", v}}; }
json BoolAttr(bool v) { return {{"bool", v}}; }

// The whole-GPU device (MIG off): shareable, with both capacities' request policies.
json GpuDevice(const api::InventoryGpu& gpu, const GpuModelInfo& info, const SliceOptions& o) {
  json attrs = {{"type", StringAttr("gpu")},
                {"index", IntAttr(gpu.index)},
                {"model", StringAttr(info.name)},
                {"migCapable", BoolAttr(info.mig.has_value())},
                {"migEnabled", BoolAttr(false)},
                {"driverVersion", {{"version", o.driver_version}}}};
  if (!gpu.uuid.empty()) attrs["uuid"] = StringAttr(gpu.uuid);
  if (info.sm_count > 0) attrs["multiprocessors"] = IntAttr(info.sm_count);
  const std::string memory = MebibyteQuantity(gpu.memory_mib);
  json capacity = {
      {"memory",
       {{"value", memory},
        {"requestPolicy",
         {{"default", memory}, {"validRange", {{"min", MebibyteQuantity(o.min_memory_mib)}, {"max", memory}}}}}}},
      {"compute",
       {{"value", MilliQuantity(1000)},
        {"requestPolicy",
         {{"default", MilliQuantity(1000)},
          {"validRange",
           {{"min", MilliQuantity(o.min_compute_milli)},
            {"max", MilliQuantity(1000)},
            {"step", MilliQuantity(o.min_compute_milli)}}}}}}}};
  return {{"name", "gpu-" + std::to_string(gpu.index)},
          {"attributes", std::move(attrs)},
          {"capacity", std::move(capacity)},
          {"allowMultipleAllocations", true}};
}

std::string CounterSetName(const api::InventoryGpu& gpu) { return "gpu-" + std::to_string(gpu.index); }

json MigCounterSet(const api::InventoryGpu& gpu, const MigGeometry& mig) {
  json counters = json::object();
  for (int s = 0; s < mig.memory_slices; ++s) counters["memory-slice-" + std::to_string(s)] = {{"value", "1"}};
  counters["compute-slices"] = {{"value", std::to_string(mig.compute_slices)}};
  counters["media-extensions"] = {{"value", "1"}};
  return {{"name", CounterSetName(gpu)}, {"counters", std::move(counters)}};
}

// One device per MIG profile and placement start.
void AddMigDevices(const api::InventoryGpu& gpu, const GpuModelInfo& info, const SliceOptions& o,
                   std::vector<json>& devices) {
  for (const MigProfile& p : info.mig->profiles) {
    for (int start : p.starts) {
      json consumed = json::object();
      for (int s = start; s < start + p.size; ++s) consumed["memory-slice-" + std::to_string(s)] = {{"value", "1"}};
      consumed["compute-slices"] = {{"value", std::to_string(p.compute_slices)}};
      if (p.media_extensions) consumed["media-extensions"] = {{"value", "1"}};
      json attrs = {{"type", StringAttr("mig")},
                    {"profile", StringAttr(p.name)},
                    {"index", IntAttr(gpu.index)},
                    {"placementStart", IntAttr(start)},
                    {"model", StringAttr(info.name)},
                    {"driverVersion", {{"version", o.driver_version}}}};
      if (!gpu.uuid.empty()) attrs["parentUUID"] = StringAttr(gpu.uuid);
      json capacity = {{"memory", {{"value", MebibyteQuantity(p.memory.value())}}},
                       {"computeSlices", {{"value", std::to_string(p.compute_slices)}}},
                       {"memorySlices", {{"value", std::to_string(p.size)}}}};
      if (p.multiprocessors > 0) capacity["multiprocessors"] = {{"value", std::to_string(p.multiprocessors)}};
      devices.push_back({{"name", MigDeviceName(gpu.index, p.name, start)},
                         {"attributes", std::move(attrs)},
                         {"capacity", std::move(capacity)},
                         {"consumesCounters", json::array({{{"counterSet", CounterSetName(gpu)},
                                                            {"counters", std::move(consumed)}}})}});
    }
  }
}

Status CheckOptions(const SliceOptions& o) {
  if (!IsDnsSubdomain(o.node_name))
    return InvalidArgumentError("node name '" + o.node_name +
                                "': must be a DNS subdomain (lower-case letters, digits, '-' and '.')");
  if (o.generation < 0) return InvalidArgumentError("generation: must be >= 0");
  if (o.min_compute_milli < 1 || o.min_compute_milli > 1000 || 1000 % o.min_compute_milli != 0)
    return InvalidArgumentError("min_compute_milli: must divide 1000 (1..1000)");
  if (o.min_memory_mib < 1) return InvalidArgumentError("min_memory_mib: must be >= 1");
  if (o.driver_version.empty()) return InvalidArgumentError("driver_version: must not be empty");
  return Status::Ok();
}

json SliceObject(const SliceOptions& o, int k, int count, json body) {
  json spec = {{"driver", std::string(kDriverName)},
               {"nodeName", o.node_name},
               {"pool", {{"name", o.node_name}, {"generation", o.generation}, {"resourceSliceCount", count}}}};
  for (auto& [key, value] : body.items()) spec[key] = value;
  json metadata = {{"name", o.node_name + "-" + std::string(kDriverName) + "-" + std::to_string(k)},
                   {"labels", {{"app.kubernetes.io/managed-by", "tessera"}}},
                   {"annotations", {{kSpecHashAnnotation, SliceSpecHash(spec)}}}};
  if (!o.node_uid.empty()) {
    metadata["ownerReferences"] = json::array(
        {{{"apiVersion", "v1"}, {"kind", "Node"}, {"name", o.node_name}, {"uid", o.node_uid}, {"controller", true}}});
  }
  return {{"apiVersion", kApiVersion}, {"kind", "ResourceSlice"}, {"metadata", std::move(metadata)},
          {"spec", std::move(spec)}};
}

}  // namespace

std::string MebibyteQuantity(int64_t mib) {
  if (mib == 0) return "0";
  static constexpr const char* kSuffix[] = {"Mi", "Gi", "Ti", "Pi", "Ei"};
  int unit = 0;
  while (unit < 4 && mib % 1024 == 0) {
    mib /= 1024;
    ++unit;
  }
  return std::to_string(mib) + kSuffix[unit];
}

std::string MilliQuantity(int64_t milli) {
  if (milli % 1000 == 0) return std::to_string(milli / 1000);
  return std::to_string(milli) + "m";
}

std::string SliceSpecHash(const json& spec) {
  json copy = spec;
  if (copy.contains("pool") && copy["pool"].is_object()) copy["pool"].erase("generation");
  const std::string text = copy.dump();
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

StatusOr<std::vector<json>> RenderResourceSlices(const std::vector<api::InventoryGpu>& gpus,
                                                 const GpuModelCatalog& catalog, const SliceOptions& options) {
  TESSERA_RETURN_IF_ERROR(CheckOptions(options));
  std::vector<json> counter_sets, devices;
  for (const api::InventoryGpu& gpu : gpus) {
    const std::string at = "GPU " + std::to_string(gpu.index) + " (" + gpu.model + "): ";
    StatusOr<GpuModelId> model = catalog.Find(gpu.model);
    if (!model.ok()) return InvalidArgumentError(at + "the GPU model catalog does not know this model");
    const GpuModelInfo& info = catalog.info(*model);
    if (gpu.memory_mib <= 0) return InvalidArgumentError(at + "memory_mib: must be > 0");
    if (gpu.mig_enabled) {
      if (!info.mig) return InvalidArgumentError(at + "MIG mode is on but the model has no MIG");
      counter_sets.push_back(MigCounterSet(gpu, *info.mig));
      AddMigDevices(gpu, info, options, devices);
    } else {
      devices.push_back(GpuDevice(gpu, info, options));
    }
  }
  std::vector<json> bodies;
  for (size_t i = 0; i < counter_sets.size(); i += kMaxCounterSetsPerSlice) {
    json sets = json::array();
    for (size_t j = i; j < counter_sets.size() && j < i + kMaxCounterSetsPerSlice; ++j) sets.push_back(counter_sets[j]);
    bodies.push_back({{"sharedCounters", std::move(sets)}});
  }
  for (size_t i = 0; i < devices.size(); i += kMaxDevicesPerSlice) {
    json list = json::array();
    for (size_t j = i; j < devices.size() && j < i + kMaxDevicesPerSlice; ++j) list.push_back(devices[j]);
    bodies.push_back({{"devices", std::move(list)}});
  }
  if (bodies.empty()) bodies.push_back({{"devices", json::array()}});
  std::vector<json> out;
  const int count = static_cast<int>(bodies.size());
  for (int k = 0; k < count; ++k) out.push_back(SliceObject(options, k, count, std::move(bodies[k])));
  return out;
}

json RenderDeviceClass(DeviceClassKind kind) {
  const std::string driver(kDriverName);
  const std::string type = kind == DeviceClassKind::kMig ? "mig" : "gpu";
  const std::string mode = kind == DeviceClassKind::kWhole ? "whole" : kind == DeviceClassKind::kShare ? "share" : "mig";
  const std::string expression = "device.driver == \"" + driver + "\" && device.attributes[\"" + driver +
                                 "\"].type == \"" + type + "\"";
  return {{"apiVersion", kApiVersion},
          {"kind", "DeviceClass"},
          {"metadata", {{"name", std::string(DeviceClassName(kind))}, {"labels", {{"app.kubernetes.io/managed-by", "tessera"}}}}},
          {"spec",
           {{"selectors", json::array({{{"cel", {{"expression", expression}}}}})},
            {"config",
             json::array({{{"opaque",
                            {{"driver", driver},
                             {"parameters", {{"apiVersion", driver + "/v1"}, {"kind", "GpuSharing"}, {"mode", mode}}}}}}})}}}};
}

std::vector<json> RenderDeviceClasses() {
  return {RenderDeviceClass(DeviceClassKind::kWhole), RenderDeviceClass(DeviceClassKind::kShare),
          RenderDeviceClass(DeviceClassKind::kMig)};
}

}  // namespace tessera::k8s
