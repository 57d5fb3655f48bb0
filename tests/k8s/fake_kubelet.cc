// tessera_k8s_fake_kubelet: the kubelet's side of the DRA plugin's gRPC, for the ctest that runs
// the real `tessera k8s dra-driver` (tests/k8s/dra_driver_cli_test.sh).
//
//   tessera_k8s_fake_kubelet REGISTRY_SOCKET NAMESPACE UID NAME
//
// GetInfo on the registration socket (checks type, name, v1.DRAPlugin), NotifyRegistrationStatus,
// then on the endpoint it named: NodePrepareResources (prints "prepared UID CDI-ID..."), again
// (must be the same answer), NodeUnprepareResources. Exit 0 when all went as the kubelet expects,
// 1 with the reason otherwise.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tessera/integrations/k8s/dra_plugin.h"

using tessera::k8s::ClaimRef;
using tessera::k8s::DraKubeletClient;

int Fail(const std::string& why) {
  std::fprintf(stderr, "fake kubelet: %s\n", why.c_str());
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 5) return Fail("usage: tessera_k8s_fake_kubelet REGISTRY_SOCKET NAMESPACE UID NAME");
  DraKubeletClient kubelet;
  auto info = kubelet.GetInfo(argv[1]);
  if (!info.ok()) return Fail(info.status().ToString());
  if (info->type != "DRAPlugin" || info->name != "gpu.tessera.io" || info->supported_versions.empty() ||
      info->supported_versions[0] != "v1.DRAPlugin") {
    return Fail("unexpected PluginInfo: " + info->type + " " + info->name);
  }
  if (auto s = kubelet.NotifyRegistrationStatus(argv[1], true, ""); !s.ok()) return Fail(s.ToString());
  const ClaimRef claim{.ns = argv[2], .uid = argv[3], .name = argv[4]};
  auto first = kubelet.Prepare(info->endpoint, {claim});
  if (!first.ok()) return Fail(first.status().ToString());
  if (!first->count(claim.uid)) return Fail("no answer for " + claim.uid);
  const auto& r = first->at(claim.uid);
  if (!r.error.empty()) return Fail("prepare: " + r.error);
  if (r.devices.empty()) return Fail("prepare: no devices");
  std::printf("prepared %s", claim.uid.c_str());
  for (const auto& d : r.devices) {
    for (const auto& id : d.cdi_ids) std::printf(" %s", id.c_str());
  }
  std::printf("\n");
  auto second = kubelet.Prepare(info->endpoint, {claim});
  if (!second.ok() || second->at(claim.uid).devices.size() != r.devices.size() ||
      second->at(claim.uid).devices[0].cdi_ids != r.devices[0].cdi_ids) {
    return Fail("a second prepare gave another answer");
  }
  if (std::getenv("FAKE_KUBELET_KEEP") != nullptr) return 0;  // leave it prepared (restart check)
  auto gone = kubelet.Unprepare(info->endpoint, {claim});
  if (!gone.ok()) return Fail(gone.status().ToString());
  if (!gone->at(claim.uid).empty()) return Fail("unprepare: " + gone->at(claim.uid));
  std::printf("unprepared %s\n", claim.uid.c_str());
  return 0;
}
