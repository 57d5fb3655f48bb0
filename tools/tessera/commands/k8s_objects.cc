// tessera k8s slices [--fake-gpus MODEL:COUNT[:mig],...] [--nvml LIB] [--node-name N]
//                    [--generation G] [--device-classes] [-o json|yaml]
//                    [--publish [--server URL] [--token-file F] [--ca-file F]]
// Prints this node's ResourceSlices (resource.k8s.io/v1, driver gpu.tessera.io), or the three
// DeviceClasses, as a JSON List or YAML documents; --publish writes the slices to the API server
// once (create, update, delete stale) instead. Parsing and printing only: the objects are
// tessera/integrations/k8s/resource_slices.h's, the publishing slice_publisher.h's.
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "tessera/core/gpu_model.h"
#include "tessera/enforce/nvml.h"
#include "tessera/integrations/k8s/kube_client.h"
#include "tessera/integrations/k8s/resource_slices.h"
#include "tessera/integrations/k8s/slice_publisher.h"
#include "tessera/node/inventory.h"
#include "tools/tessera/commands/commands.h"
#include "tools/tessera/commands/common.h"
#include "tools/tessera/commands/k8s_connect.h"

namespace tessera::cli {
namespace {

constexpr char kCommand[] = "k8s slices";

struct SlicesFlags {
  std::string fake_gpus, nvml = "libnvidia-ml.so.1", node_name, output = "yaml", server, token_file, ca_file;
  int64_t generation = 1;
  bool device_classes = false, publish = false;
};

void EmitYaml(YAML::Emitter& out, const nlohmann::json& j) {
  if (j.is_object()) {
    out << YAML::BeginMap;
    for (const auto& [key, value] : j.items()) {
      out << YAML::Key << key << YAML::Value;
      EmitYaml(out, value);
    }
    out << YAML::EndMap;
  } else if (j.is_array()) {
    out << YAML::BeginSeq;
    for (const auto& value : j) EmitYaml(out, value);
    out << YAML::EndSeq;
  } else if (j.is_string()) {
    // Quoted: "1" and "true" stay strings (quantities and versions are strings in the API).
    out << YAML::DoubleQuoted << j.get<std::string>();
  } else if (j.is_boolean()) {
    out << (j.get<bool>() ? "true" : "false");
  } else if (j.is_null()) {
    out << YAML::Null;
  } else {
    out << j.dump();
  }
}

std::string ToYaml(const std::vector<nlohmann::json>& objects) {
  std::string text;
  for (const nlohmann::json& o : objects) {
    YAML::Emitter out;
    EmitYaml(out, o);
    text += "---\n" + std::string(out.c_str()) + "\n";
  }
  return text;
}

StatusOr<std::vector<api::InventoryGpu>> ReadGpus(SlicesFlags& f, const GpuModelCatalog& catalog) {
  if (!f.fake_gpus.empty()) {
    TESSERA_ASSIGN_OR_RETURN(f.nvml, UseFakeGpus(f.fake_gpus));
  }
  enforce::DlopenNvml nvml({.library_path = f.nvml});
  if (Status st = nvml.Init(); !st.ok()) return UnavailableError("NVML: " + std::string(st.message()));
  StatusOr<node::Inventory> inventory = node::DiscoverInventory(nvml, catalog);
  (void)nvml.Shutdown();  // read-only use
  if (!inventory.ok()) return inventory.status();
  return inventory->gpus;
}

int Publish(const SlicesFlags& f, const std::vector<api::InventoryGpu>& gpus, const GpuModelCatalog& catalog,
            const k8s::SliceOptions& options) {
  StatusOr<std::unique_ptr<k8s::KubeTransport>> transport =
      ConnectKube({.server = f.server, .token_file = f.token_file, .ca_file = f.ca_file});
  if (!transport.ok()) return Fail(kCommand, std::string(transport.status().message()), kExitBadInput);
  k8s::KubeClient kube(**transport);
  k8s::SlicePublisher publisher(kube, catalog, {.slices = options});
  StatusOr<k8s::PublishResult> r = publisher.Publish(gpus);
  if (!r.ok()) return Fail(kCommand, r.status(), kExitFailure);
  std::cout << "node " << options.node_name << ": generation " << r->generation << ", " << r->created << " created, "
            << r->updated << " updated, " << r->deleted << " deleted, " << r->unchanged << " unchanged\n";
  return kExitOk;
}

int RunSlices(SlicesFlags f) {
  const GpuModelCatalog& catalog = GpuModelCatalog::Builtin();
  std::vector<nlohmann::json> objects;
  if (f.device_classes) {
    objects = k8s::RenderDeviceClasses();
  } else {
    if (f.node_name.empty()) {
      char host[256] = {};
      if (::gethostname(host, sizeof(host) - 1) == 0) f.node_name = host;
    }
    StatusOr<std::vector<api::InventoryGpu>> gpus = ReadGpus(f, catalog);
    if (!gpus.ok())
      return Fail(kCommand, gpus.status(),
                  gpus.status().code() == StatusCode::kInvalidArgument || gpus.status().code() == StatusCode::kNotFound
                      ? kExitBadInput
                      : kExitFailure);
    const k8s::SliceOptions options{.node_name = f.node_name, .generation = f.generation};
    if (f.publish) return Publish(f, *gpus, catalog, options);
    StatusOr<std::vector<nlohmann::json>> slices = k8s::RenderResourceSlices(*gpus, catalog, options);
    if (!slices.ok()) return Fail(kCommand, slices.status(), kExitBadInput);
    objects = std::move(*slices);
  }
  if (f.output == "json") {
    std::cout << nlohmann::json{{"apiVersion", "v1"}, {"kind", "List"}, {"items", objects}}.dump(2) << "\n";
  } else {
    std::cout << ToYaml(objects);
  }
  return kExitOk;
}

}  // namespace

void RegisterK8sObjects(CLI::App& k8s, int* exit_code) {
  auto f = std::make_shared<SlicesFlags>();
  CLI::App* cmd = k8s.add_subcommand(
      "slices",
      "Print this node's GPUs as resource.k8s.io/v1 ResourceSlices of driver gpu.tessera.io (or the DeviceClasses), "
      "or publish them to the API server.\n"
      "  Each GPU is a device with capacities memory (binary quantity, e.g. 40Gi) and compute (1 = the whole GPU; "
      "0.3 GPU is 300m); a GPU in MIG mode is one device per MIG profile and placement.\n"
      "  tessera k8s slices --fake-gpus A100-40GB:2:mig --node-name n1 -o json");
  cmd->add_option("--fake-gpus", f->fake_gpus,
                  "Use the in-tree fake NVML with these GPUs: MODEL:COUNT[:mig],... (e.g. A100-40GB:2:mig)");
  cmd->add_option("--nvml", f->nvml, "NVML library to load (default libnvidia-ml.so.1, the driver's)");
  cmd->add_option("--node-name", f->node_name,
                  "spec.nodeName and the pool's name: the Kubernetes node (default: the host name)");
  cmd->add_option("--generation", f->generation, "pool.generation of the printed slices (default 1; --publish "
                                                 "chooses its own)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--device-classes", f->device_classes,
                "Print the DeviceClasses whole/share/mig.gpu.tessera.io instead of the slices (no GPUs read)");
  cmd->add_option("-o,--output", f->output, "yaml (documents separated by ---) or json (a v1 List); default yaml")
      ->check(CLI::IsMember({"yaml", "json"}));
  cmd->add_flag("--publish", f->publish,
                "Write the slices to the API server once (create, update, delete stale) and print what changed");
  cmd->add_option("--server", f->server,
                  "API server URL for --publish, http(s)://HOST[:PORT] (default: in-cluster, from "
                  "KUBERNETES_SERVICE_HOST/PORT and the pod's service account)");
  cmd->add_option("--token-file", f->token_file, "Bearer token for --publish (default: the service account's)");
  cmd->add_option("--ca-file", f->ca_file, "CA bundle (PEM) for an https --server (default: the service account's)");
  cmd->callback([f, exit_code] { *exit_code = RunSlices(*f); });
}

}  // namespace tessera::cli
