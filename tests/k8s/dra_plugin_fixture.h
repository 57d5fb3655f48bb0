// The DRA plugin tests' fixture (dra_plugin_test.cc, dra_mig_test.cc): a driver and its gRPC
// server over a temporary node directory, plugin, CDI and device-node folders, a fake kubelet
// (DraKubeletClient) and claims held in memory; Claim() writes a ResourceClaim's JSON.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "tessera/integrations/k8s/dra_plugin.h"
#include "tests/k8s/node_tenants.h"

namespace tessera::k8s {

inline std::string Claim(const std::string& ns, const std::string& name, const std::string& uid,
                         const std::string& results, const std::string& config = "[]") {
  return R"({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"namespace": ")" + ns +
         R"(", "name": ")" + name + R"(", "uid": ")" + uid + R"(", "resourceVersion": "7"},
  "spec": {"devices": {"requests": []}},
  "status": {"allocation": {"devices": {"results": )" + results + R"(, "config": )" + config + R"(},
             "nodeSelector": {}}}})";
}

inline const std::string kShare0 = R"([{"request": "gpu", "driver": "gpu.tessera.io", "pool": "node-1", "device": "gpu-0",
  "shareID": "2b0f33c1-aaaa-bbbb", "consumedCapacity": {"memory": "1Gi", "compute": "300"}}])";

class DraPluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Short: a unix socket's path has at most 107 characters.
    std::string dir = (std::filesystem::temp_directory_path() / "tdra-XXXXXX").string();
    ASSERT_NE(::mkdtemp(dir.data()), nullptr);
    root_ = dir;
    options_ = {.node_dir = (root_ / "node").string(),
                .plugin_dir = (root_ / "plugins/gpu.tessera.io").string(),
                .cdi_dir = (root_ / "cdi").string(),
                .shim_path = TESSERA_SHIM_LIBRARY,
                .nvml_library = "/nonexistent/libnvidia-ml.so.1",
                .dev_dir = (root_ / "dev").string()};
    // The NVIDIA driver's device nodes, as plain files: the driver only checks that they exist.
    std::filesystem::create_directories(root_ / "dev");
    for (const char* node : {"nvidiactl", "nvidia-uvm", "nvidia0", "nvidia1"}) std::ofstream(root_ / "dev" / node);
    StartPlugin();
  }
  void TearDown() override {
    server_.reset();
    driver_.reset();
    std::filesystem::remove_all(root_);
  }
  void StartPlugin() {
    server_.reset();
    driver_.reset();
    auto driver = DraDriver::Open(options_, source_);
    ASSERT_TRUE(driver.ok()) << driver.status().ToString();
    driver_ = std::move(*driver);
    auto server = DraPluginServer::Start(
        driver_.get(), {.registry_dir = (root_ / "registry").string(), .plugin_dir = options_.plugin_dir});
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
  }
  std::vector<node::TenantStatus> Tenants() { return NodeTenants(options_.node_dir); }
  std::string Dra() const { return server_->dra_socket(); }

  std::filesystem::path root_;
  DraDriverOptions options_;
  InMemoryClaimSource claims_;
  ClaimSource* source_ = &claims_;
  std::unique_ptr<DraDriver> driver_;
  std::unique_ptr<DraPluginServer> server_;
  DraKubeletClient kubelet_;
};

}  // namespace tessera::k8s
