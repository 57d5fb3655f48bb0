// The DRA driver's Kubernetes objects: ResourceSlices and DeviceClasses checked against the
// published OpenAPI v3 schema of resource.k8s.io/v1 (tests/k8s/schema/), the slice limits of
// that API (counter sets and devices per slice), the MIG geometry as counters, and the objects
// in deploy/k8s/ (the DeviceClasses there are the rendered ones; the example claim template is
// valid).
#include "tessera/integrations/k8s/resource_slices.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "tests/k8s/schema_check.h"

namespace tessera::k8s {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kSlice[] = "io.k8s.api.resource.v1.ResourceSlice";
constexpr char kDeviceClass[] = "io.k8s.api.resource.v1.DeviceClass";
constexpr char kClaimTemplate[] = "io.k8s.api.resource.v1.ResourceClaimTemplate";

const testing::SchemaSet& Schemas() {
  static const testing::SchemaSet s =
      testing::SchemaSet::Load(std::string(TESSERA_SOURCE_DIR) + "/tests/k8s/schema/resource.k8s.io_v1.json");
  return s;
}

std::vector<api::InventoryGpu> Gpus(const std::string& model, int count, bool mig, int64_t memory_mib, int first = 0) {
  std::vector<api::InventoryGpu> out;
  for (int i = 0; i < count; ++i) {
    out.push_back({.index = first + i, .uuid = "GPU-" + std::to_string(first + i) + "-fake", .model = model,
                   .memory_mib = memory_mib, .mig_enabled = mig});
  }
  return out;
}

std::vector<json> Render(const std::vector<api::InventoryGpu>& gpus, const std::string& node = "n1") {
  StatusOr<std::vector<json>> slices = RenderResourceSlices(gpus, GpuModelCatalog::Builtin(), {.node_name = node});
  EXPECT_TRUE(slices.ok()) << slices.status().ToString();
  return slices.ok() ? *slices : std::vector<json>{};
}

std::vector<json> AllDevices(const std::vector<json>& slices) {
  std::vector<json> out;
  for (const json& s : slices) {
    if (s["spec"].contains("devices")) {
      for (const json& d : s["spec"]["devices"]) out.push_back(d);
    }
  }
  return out;
}

TEST(K8sSchema, TheStoredSchemaLoadsAndEveryRefResolves) {
  ASSERT_GE(Schemas().size(), 30u);
  for (const std::string& ref : Schemas().Refs()) {
    EXPECT_TRUE(Schemas().Has(ref.substr(std::string("#/components/schemas/").size()))) << ref;
  }
}

TEST(K8sSchema, TheCheckerRefusesMisspeltMissingAndMistypedFields) {
  json slice = Render(Gpus("A100-40GB", 1, false, 40537))[0];
  ASSERT_THAT(Schemas().Check(slice, kSlice), IsEmpty());

  json misspelt = slice;
  json& device = misspelt["spec"]["devices"][0];
  device["allowMultipleAllocation"] = device["allowMultipleAllocations"];
  device.erase("allowMultipleAllocations");
  EXPECT_THAT(Schemas().Check(misspelt, kSlice),
              ElementsAre("spec.devices[0].allowMultipleAllocation: unknown field"));

  json policy = slice;
  policy["spec"]["devices"][0]["capacity"]["compute"]["requestPolicy"]["validRange"]["mim"] = "10m";
  EXPECT_THAT(Schemas().Check(policy, kSlice),
              ElementsAre("spec.devices[0].capacity.compute.requestPolicy.validRange.mim: unknown field"));

  json missing = slice;
  missing["spec"]["pool"].erase("resourceSliceCount");
  EXPECT_THAT(Schemas().Check(missing, kSlice), ElementsAre("spec.pool.resourceSliceCount: required field missing"));

  json mistyped = slice;
  mistyped["spec"]["pool"]["generation"] = "1";
  EXPECT_THAT(Schemas().Check(mistyped, kSlice), ElementsAre(HasSubstr("spec.pool.generation: expected integer")));

  json attribute = slice;
  attribute["spec"]["devices"][0]["attributes"]["model"] = {{"str", "A100"}};
  EXPECT_THAT(Schemas().Check(attribute, kSlice), ElementsAre("spec.devices[0].attributes.model.str: unknown field"));

  json kind = slice;
  kind["apiVersion"] = "resource.k8s.io/v1beta1";
  EXPECT_THAT(Schemas().Check(kind, kSlice), ElementsAre(HasSubstr("apiVersion/kind resource.k8s.io/v1beta1")));

  json quantity = slice;
  quantity["spec"]["devices"][0]["capacity"]["memory"]["value"] = true;
  EXPECT_THAT(Schemas().Check(quantity, kSlice), ElementsAre(HasSubstr("matches 0 of oneOf")));
}

TEST(K8sResourceSlices, EveryRenderedSliceIsValidAgainstThePublishedSchema) {
  std::vector<std::vector<api::InventoryGpu>> nodes = {
      {},
      Gpus("A100-40GB", 2, false, 40537),
      Gpus("A100-40GB", 2, true, 40537),
      Gpus("H100-80GB", 8, true, 81559),
      Gpus("A30-24GB", 16, true, 24576),
      Gpus("T4", 4, false, 15360),
  };
  auto mixed = Gpus("H100-80GB", 1, false, 81559);
  for (auto& g : Gpus("H100-80GB", 3, true, 81559, 1)) mixed.push_back(g);
  nodes.push_back(mixed);
  for (const auto& gpus : nodes) {
    for (const json& slice : Render(gpus)) {
      EXPECT_THAT(Schemas().Check(slice, kSlice), IsEmpty()) << slice.dump().substr(0, 300);
    }
  }
}

TEST(K8sResourceSlices, AWholeGpuIsAShareableDeviceWithMemoryAndComputeCapacities) {
  std::vector<json> slices = Render(Gpus("A100-40GB", 2, false, 40960));
  ASSERT_EQ(slices.size(), 1u);
  const json& s = slices[0];
  EXPECT_EQ(s["metadata"]["name"], "n1-gpu.tessera.io-0");
  EXPECT_EQ(s["spec"]["driver"], "gpu.tessera.io");
  EXPECT_EQ(s["spec"]["nodeName"], "n1");
  EXPECT_EQ(s["spec"]["pool"], (json{{"name", "n1"}, {"generation", 1}, {"resourceSliceCount", 1}}));
  ASSERT_EQ(s["spec"]["devices"].size(), 2u);
  const json& d = s["spec"]["devices"][1];
  EXPECT_EQ(d["name"], "gpu-1");
  EXPECT_EQ(d["allowMultipleAllocations"], true);
  EXPECT_EQ(d["attributes"]["type"], json({{"string", "gpu"}}));
  EXPECT_EQ(d["attributes"]["model"], json({{"string", "A100-40GB"}}));
  EXPECT_EQ(d["attributes"]["uuid"], json({{"string", "GPU-1-fake"}}));
  EXPECT_EQ(d["attributes"]["migCapable"], json({{"bool", true}}));
  EXPECT_EQ(d["attributes"]["index"], json({{"int", 1}}));
  EXPECT_EQ(d["attributes"]["driverVersion"], json({{"version", "0.1.0"}}));
  EXPECT_EQ(d["capacity"]["memory"],
            json::parse(R"({"value": "40Gi", "requestPolicy": {"default": "40Gi", "validRange": {"min": "256Mi", "max": "40Gi"}}})"));
  EXPECT_EQ(d["capacity"]["compute"],
            json::parse(R"({"value": "1", "requestPolicy": {"default": "1", "validRange": {"min": "10m", "max": "1", "step": "10m"}}})"));
  EXPECT_FALSE(s["spec"].contains("sharedCounters"));
  EXPECT_EQ(s["metadata"]["annotations"][kSpecHashAnnotation], SliceSpecHash(s["spec"]));
}

TEST(K8sResourceSlices, MigProfilesArePartitionableDevicesOverSharedCounters) {
  std::vector<json> slices = Render(Gpus("A100-40GB", 2, true, 40537));
  ASSERT_EQ(slices.size(), 2u);
  // resource.k8s.io/v1: a slice holds devices or sharedCounters, not both.
  ASSERT_TRUE(slices[0]["spec"].contains("sharedCounters"));
  EXPECT_FALSE(slices[0]["spec"].contains("devices"));
  EXPECT_FALSE(slices[1]["spec"].contains("sharedCounters"));
  const json& set = slices[0]["spec"]["sharedCounters"][1];
  EXPECT_EQ(set["name"], "gpu-1");
  EXPECT_EQ(set["counters"].size(), 10u);  // 8 memory slices, compute-slices, media-extensions
  EXPECT_EQ(set["counters"]["compute-slices"]["value"], "7");
  EXPECT_EQ(set["counters"]["memory-slice-7"]["value"], "1");

  std::vector<json> devices = AllDevices(slices);
  EXPECT_EQ(devices.size(), 50u);  // 25 placements per A100 (7+7+4+3+2+1+1)
  const json* three_g = nullptr;
  for (const json& d : devices) {
    if (d["name"] == "gpu-1-mig-3g-20gb-4") three_g = &d;
    EXPECT_FALSE(d.contains("allowMultipleAllocations")) << d["name"];  // a MIG instance is exclusive
  }
  ASSERT_NE(three_g, nullptr);
  EXPECT_EQ((*three_g)["attributes"]["type"], json({{"string", "mig"}}));
  EXPECT_EQ((*three_g)["attributes"]["profile"], json({{"string", "3g.20gb"}}));
  EXPECT_EQ((*three_g)["attributes"]["parentUUID"], json({{"string", "GPU-1-fake"}}));
  EXPECT_EQ((*three_g)["capacity"]["memory"]["value"], "19968Mi");
  EXPECT_EQ((*three_g)["consumesCounters"],
            json::parse(R"([{"counterSet": "gpu-1", "counters": {"memory-slice-4": {"value": "1"},
              "memory-slice-5": {"value": "1"}, "memory-slice-6": {"value": "1"}, "memory-slice-7": {"value": "1"},
              "compute-slices": {"value": "3"}}}])"));
  // Every consumption names a counter set of the pool and counters it has, within its value.
  std::map<std::string, json> sets;
  for (const json& s : slices) {
    if (s["spec"].contains("sharedCounters")) {
      for (const json& cs : s["spec"]["sharedCounters"]) sets[cs["name"]] = cs["counters"];
    }
  }
  for (const json& d : devices) {
    for (const json& c : d["consumesCounters"]) {
      ASSERT_TRUE(sets.count(c["counterSet"])) << d["name"];
      for (const auto& [counter, value] : c["counters"].items()) {
        ASSERT_TRUE(sets[c["counterSet"]].contains(counter)) << d["name"] << " " << counter;
        EXPECT_LE(std::stoi(value["value"].get<std::string>()),
                  std::stoi(sets[c["counterSet"]][counter]["value"].get<std::string>()));
      }
    }
  }
}

TEST(K8sResourceSlices, ABigMigNodeIsSplitWithinTheApiLimitsAndStaysOnePool) {
  std::vector<json> slices = Render(Gpus("H100-80GB", 16, true, 81559));
  // 16 counter sets -> 2 slices of 8; 400 devices -> 7 slices of at most 64.
  ASSERT_EQ(slices.size(), 9u);
  std::set<std::string> slice_names, device_names;
  for (size_t k = 0; k < slices.size(); ++k) {
    const json& spec = slices[k]["spec"];
    EXPECT_EQ(slices[k]["metadata"]["name"], "n1-gpu.tessera.io-" + std::to_string(k));
    slice_names.insert(slices[k]["metadata"]["name"]);
    EXPECT_EQ(spec["pool"]["resourceSliceCount"], 9);
    EXPECT_EQ(spec["pool"]["generation"], 1);
    if (spec.contains("sharedCounters")) {
      EXPECT_LE(spec["sharedCounters"].size(), 8u);
    }
    if (spec.contains("devices")) {
      EXPECT_LE(spec["devices"].size(), 64u);
      for (const json& d : spec["devices"]) {
        const std::string name = d["name"];
        EXPECT_TRUE(device_names.insert(name).second) << "duplicate " << name;
        EXPECT_LE(name.size(), 63u);
      }
    }
  }
  EXPECT_EQ(device_names.size(), 400u);
}

TEST(K8sResourceSlices, ANodeWithoutGpusPublishesAnEmptyPool) {
  std::vector<json> slices = Render({});
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_EQ(slices[0]["spec"]["devices"], json::array());
  EXPECT_EQ(slices[0]["spec"]["pool"]["resourceSliceCount"], 1);
}

TEST(K8sResourceSlices, TheNodeOwnsItsSlicesWhenItsUidIsKnown) {
  StatusOr<std::vector<json>> slices = RenderResourceSlices(Gpus("T4", 1, false, 15360), GpuModelCatalog::Builtin(),
                                                            {.node_name = "n1", .generation = 7, .node_uid = "u-1"});
  ASSERT_TRUE(slices.ok());
  EXPECT_EQ((*slices)[0]["metadata"]["ownerReferences"],
            json::parse(R"([{"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "u-1", "controller": true}])"));
  EXPECT_EQ((*slices)[0]["spec"]["pool"]["generation"], 7);
  EXPECT_THAT(Schemas().Check((*slices)[0], kSlice), IsEmpty());
}

TEST(K8sResourceSlices, BadInputsAreErrorsNamingTheGpuOrOption) {
  const GpuModelCatalog& c = GpuModelCatalog::Builtin();
  StatusOr<std::vector<json>> r = RenderResourceSlices(Gpus("H999", 1, false, 1000), c, {.node_name = "n1"});
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("GPU 0 (H999)"));
  r = RenderResourceSlices(Gpus("T4", 1, true, 15360), c, {.node_name = "n1"});
  EXPECT_THAT(r.status().message(), HasSubstr("MIG mode is on but the model has no MIG"));
  r = RenderResourceSlices(Gpus("T4", 1, false, 0), c, {.node_name = "n1"});
  EXPECT_THAT(r.status().message(), HasSubstr("memory_mib"));
  r = RenderResourceSlices({}, c, {.node_name = "Node_1"});
  EXPECT_THAT(r.status().message(), HasSubstr("node name 'Node_1'"));
  r = RenderResourceSlices({}, c, {.node_name = "n1", .min_compute_milli = 7});
  EXPECT_THAT(r.status().message(), HasSubstr("min_compute_milli"));
}

TEST(K8sResourceSlices, QuantitiesAreCanonical) {
  EXPECT_EQ(MebibyteQuantity(40960), "40Gi");
  EXPECT_EQ(MebibyteQuantity(81559), "81559Mi");
  EXPECT_EQ(MebibyteQuantity(1048576), "1Ti");
  EXPECT_EQ(MebibyteQuantity(256), "256Mi");
  EXPECT_EQ(MebibyteQuantity(0), "0");
  EXPECT_EQ(MilliQuantity(300), "300m");
  EXPECT_EQ(MilliQuantity(1000), "1");
  EXPECT_EQ(MilliQuantity(2500), "2500m");
  EXPECT_EQ(ProfileLabel("1g.10gb+me"), "1g-10gb-me");
}

TEST(K8sResourceSlices, TheSpecHashIgnoresTheGenerationOnly) {
  json spec = Render(Gpus("T4", 1, false, 15360))[0]["spec"];
  json later = spec;
  later["pool"]["generation"] = 9;
  EXPECT_EQ(SliceSpecHash(spec), SliceSpecHash(later));
  later["devices"][0]["attributes"]["model"] = {{"string", "T4x"}};
  EXPECT_NE(SliceSpecHash(spec), SliceSpecHash(later));
}

TEST(K8sDeviceClasses, TheThreeClassesAreValidAndSelectTheirDevices) {
  std::vector<json> classes = RenderDeviceClasses();
  ASSERT_EQ(classes.size(), 3u);
  for (const json& c : classes) EXPECT_THAT(Schemas().Check(c, kDeviceClass), IsEmpty()) << c.dump();
  EXPECT_EQ(classes[0]["metadata"]["name"], "whole.gpu.tessera.io");
  EXPECT_EQ(classes[1]["metadata"]["name"], "share.gpu.tessera.io");
  EXPECT_EQ(classes[2]["metadata"]["name"], "mig.gpu.tessera.io");
  EXPECT_EQ(classes[2]["spec"]["selectors"][0]["cel"]["expression"],
            "device.driver == \"gpu.tessera.io\" && device.attributes[\"gpu.tessera.io\"].type == \"mig\"");
  EXPECT_EQ(classes[1]["spec"]["config"][0]["opaque"]["parameters"]["mode"], "share");
  EXPECT_EQ(classes[1]["spec"]["config"][0]["opaque"]["driver"], "gpu.tessera.io");
}

// YAML (yaml-cpp) as JSON: plain scalars become booleans, integers or null where they read so,
// quoted ones stay strings (as the API server's YAML decoder reads them).
json YamlToJson(const YAML::Node& n) {
  if (n.IsMap()) {
    json o = json::object();
    for (const auto& kv : n) o[kv.first.as<std::string>()] = YamlToJson(kv.second);
    return o;
  }
  if (n.IsSequence()) {
    json a = json::array();
    for (const auto& v : n) a.push_back(YamlToJson(v));
    return a;
  }
  if (n.IsNull()) return nullptr;
  const std::string s = n.as<std::string>();
  if (n.Tag() == "!") return s;  // quoted
  if (s == "true" || s == "false") return s == "true";
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (!s.empty() && *end == '\0') return v;
  return s;
}

std::vector<json> LoadYamlDocs(const std::string& relative) {
  std::vector<json> out;
  for (const YAML::Node& doc : YAML::LoadAllFromFile(std::string(TESSERA_SOURCE_DIR) + "/" + relative)) {
    if (doc.IsMap()) out.push_back(YamlToJson(doc));
  }
  return out;
}

TEST(K8sDeploy, TheDeviceClassesInDeployAreTheRenderedOnes) {
  std::vector<json> docs = LoadYamlDocs("deploy/k8s/deviceclasses.yaml");
  EXPECT_EQ(docs, RenderDeviceClasses());
}

TEST(K8sDeploy, TheExampleClaimTemplateIsValidAndAsksForAThirdOfAGpu) {
  int templates = 0;
  for (const json& doc : LoadYamlDocs("deploy/k8s/example-share.yaml")) {
    if (doc["kind"] != "ResourceClaimTemplate") continue;
    ++templates;
    EXPECT_THAT(Schemas().Check(doc, kClaimTemplate), IsEmpty()) << doc.dump();
    const json& exactly = doc["spec"]["spec"]["devices"]["requests"][0]["exactly"];
    EXPECT_EQ(exactly["deviceClassName"], "share.gpu.tessera.io");
    EXPECT_EQ(exactly["capacity"]["requests"], json::parse(R"({"compute": "300m", "memory": "10Gi"})"));
  }
  EXPECT_EQ(templates, 1);
}

}  // namespace
}  // namespace tessera::k8s
