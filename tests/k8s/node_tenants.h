// The tenants of a node directory as the k8s plugin tests check them: one TenantStatus per GPU a
// tenant is on (a tenant of two GPUs appears twice), GPUs ascending.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tessera/node/node_dir.h"

namespace tessera::k8s {

inline std::vector<node::TenantStatus> NodeTenants(const std::string& node_dir) {
  auto status = node::NodeDir(node_dir).ReadStatus();
  EXPECT_TRUE(status.ok()) << status.status().ToString();
  std::vector<node::TenantStatus> out;
  if (!status.ok()) return out;
  for (const auto& gpu : status->gpus) out.insert(out.end(), gpu.tenants.begin(), gpu.tenants.end());
  return out;
}

}  // namespace tessera::k8s
