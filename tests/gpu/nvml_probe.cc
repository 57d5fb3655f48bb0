// tessera_nvml_probe: prints, as JSON on stdout, what tessera's NVML adapter reads from a
// node's GPUs: name, UUID, memory, MIG mode and, for every GPU-instance profile index, the
// profile the driver reports and its possible placements; also the GPU instances and
// processes that exist. It is how the adapter's ABI declarations are checked against a real
// driver (tests/gpu/run.sh compares its output with nvidia-smi's listings).
//
// READ-ONLY: it never creates or destroys an instance and never changes the MIG mode (the
// adapter has no call to change it). Keep it so: it runs on machines shared with others.
//
//   tessera_nvml_probe [--library PATH]      (default: libnvidia-ml.so.1 via the linker)
//
// Exit codes: 0 NVML answered (errors of single queries are recorded in the JSON),
// 1 NVML could not be loaded or initialised, 2 bad arguments.
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/status.h"
#include "tessera/enforce/nvml.h"

namespace tessera::enforce {
namespace {

std::string Quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

// A tiny JSON object writer: fields in insertion order, values already encoded.
class Object {
 public:
  Object& Add(std::string_view key, std::string encoded) {
    fields_.push_back(Quote(key) + ": " + std::move(encoded));
    return *this;
  }
  Object& Str(std::string_view key, std::string_view value) { return Add(key, Quote(value)); }
  Object& Num(std::string_view key, long long value) { return Add(key, std::to_string(value)); }
  Object& Bool(std::string_view key, bool value) { return Add(key, value ? "true" : "false"); }
  Object& Error(const Status& status) { return Str("error", status.ToString()); }
  std::string Encode(const std::string& indent = "") const {
    if (fields_.empty()) return "{}";
    std::string out = "{\n";
    for (size_t i = 0; i < fields_.size(); ++i) {
      out += indent + "  " + Indent(fields_[i], indent + "  ");
      out += i + 1 < fields_.size() ? ",\n" : "\n";
    }
    return out + indent + "}";
  }

 private:
  static std::string Indent(const std::string& s, const std::string& indent) {
    std::string out;
    for (char c : s) {
      out += c;
      if (c == '\n') out += indent;
    }
    return out;
  }
  std::vector<std::string> fields_;
};

std::string Array(const std::vector<std::string>& encoded) {
  std::string out = "[";
  for (size_t i = 0; i < encoded.size(); ++i) {
    out += (i == 0 ? "\n  " : ",\n  ");
    for (char c : encoded[i]) {
      out += c;
      if (c == '\n') out += "  ";
    }
  }
  return out + (encoded.empty() ? "]" : "\n]");
}

std::string ProbeGpu(const NvmlApi& nvml, uint32_t gpu) {
  Object o;
  o.Num("index", gpu);
  if (auto name = nvml.DeviceName(gpu); name.ok()) {
    o.Str("name", *name);
  } else {
    o.Add("name", Object().Error(name.status()).Encode());
  }
  if (auto uuid = nvml.DeviceUuid(gpu); uuid.ok()) {
    o.Str("uuid", *uuid);
  } else {
    o.Add("uuid", Object().Error(uuid.status()).Encode());
  }
  if (auto mem = nvml.Memory(gpu); mem.ok()) {
    o.Add("memory_mib", Object()
                            .Num("total", mem->total.value())
                            .Num("used", mem->used.value())
                            .Num("free", mem->free.value())
                            .Encode());
  } else {
    o.Add("memory_mib", Object().Error(mem.status()).Encode());
  }
  if (auto mig = nvml.GetMigMode(gpu); mig.ok()) {
    o.Add("mig_mode", Object()
                          .Str("current", mig->current_enabled ? "enabled" : "disabled")
                          .Str("pending", mig->pending_enabled ? "enabled" : "disabled")
                          .Encode());
  } else {
    o.Add("mig_mode", Object().Error(mig.status()).Encode());
  }

  std::vector<std::string> profiles;
  for (uint32_t index = 0; index < kGpuInstanceProfileIndexCount; ++index) {
    Object p;
    p.Num("profile_index", index);
    StatusOr<GpuInstanceProfile> info = nvml.GpuInstanceProfileInfo(gpu, index);
    if (!info.ok()) {
      p.Error(info.status());
      profiles.push_back(p.Encode());
      continue;
    }
    p.Num("id", info->id)
        .Str("name", info->name)
        .Num("slice_count", info->slice_count)
        .Num("instance_count", info->instance_count)
        .Num("multiprocessor_count", info->multiprocessor_count)
        .Num("memory_mib", info->memory.value());
    if (auto placements = nvml.GpuInstancePossiblePlacements(gpu, info->id); placements.ok()) {
      std::vector<std::string> list;
      for (const GpuInstancePlacement& pl : *placements) {
        list.push_back("{\"start\": " + std::to_string(pl.start) +
                       ", \"size\": " + std::to_string(pl.size) + "}");
      }
      p.Add("placements", Array(list));
    } else {
      p.Add("placements", Object().Error(placements.status()).Encode());
    }
    profiles.push_back(p.Encode());
  }
  o.Add("gpu_instance_profiles", Array(profiles));

  if (auto gis = nvml.GpuInstances(gpu); gis.ok()) {
    std::vector<std::string> list;
    for (const GpuInstance& gi : *gis) {
      list.push_back(Object()
                         .Num("id", gi.id)
                         .Num("profile_id", gi.profile_id)
                         .Num("start", gi.placement.start)
                         .Num("size", gi.placement.size)
                         .Encode());
    }
    o.Add("gpu_instances", Array(list));
  } else {
    o.Add("gpu_instances", Object().Error(gis.status()).Encode());
  }

  if (auto procs = nvml.RunningProcesses(gpu); procs.ok()) {
    std::vector<std::string> list;
    for (const GpuProcess& p : *procs) {
      Object e;
      e.Num("pid", p.pid);
      if (p.used_memory) e.Num("used_mib", p.used_memory->value());
      if (p.gpu_instance_id) e.Num("gpu_instance_id", *p.gpu_instance_id);
      if (p.compute_instance_id) e.Num("compute_instance_id", *p.compute_instance_id);
      list.push_back(e.Encode());
    }
    o.Add("processes", Array(list));
  } else {
    o.Add("processes", Object().Error(procs.status()).Encode());
  }

  if (auto util = nvml.UtilizationRates(gpu); util.ok()) {
    o.Add("utilization_percent",
          Object().Num("gpu", util->gpu_percent).Num("memory", util->memory_percent).Encode());
  } else {
    o.Add("utilization_percent", Object().Error(util.status()).Encode());
  }
  return o.Encode();
}

int Main(int argc, char** argv) {
  NvmlOptions options;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--library" && i + 1 < argc) {
      options.library_path = argv[++i];
    } else if (arg == "--help" || arg == "-h") {
      std::printf("usage: tessera_nvml_probe [--library PATH]\n");
      return 0;
    } else {
      std::fprintf(stderr, "tessera_nvml_probe: unknown argument '%s' (try --help)\n", argv[i]);
      return 2;
    }
  }
  Object top;
  top.Str("library", options.library_path);
  DlopenNvml nvml(options);
  if (Status s = nvml.Init(); !s.ok()) {
    top.Error(s);
    std::printf("%s\n", top.Encode().c_str());
    return 1;
  }
  StatusOr<uint32_t> count = nvml.DeviceCount();
  if (!count.ok()) {
    top.Error(count.status());
    std::printf("%s\n", top.Encode().c_str());
    return 1;
  }
  top.Num("device_count", *count);
  std::vector<std::string> gpus;
  for (uint32_t gpu = 0; gpu < *count; ++gpu) gpus.push_back(ProbeGpu(nvml, gpu));
  top.Add("gpus", Array(gpus));
  if (Status s = nvml.Shutdown(); !s.ok()) top.Str("shutdown_error", s.ToString());
  std::printf("%s\n", top.Encode().c_str());
  return 0;
}

}  // namespace
}  // namespace tessera::enforce

int main(int argc, char** argv) { return tessera::enforce::Main(argc, argv); }
