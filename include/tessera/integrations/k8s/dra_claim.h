// A ResourceClaim as the DRA kubelet plugin needs it (resource.k8s.io/v1): who it belongs to
// (metadata), and what the scheduler allocated (status.allocation.devices: results and opaque
// config). The plugin gets claim references (namespace, uid, name) from the kubelet and reads the
// claim itself through a ClaimSource: the API server in a cluster (KubeClaimSource), files or
// memory in tests.
//
// Parsing is strict about what the plugin uses and lenient about the rest, as Kubernetes is:
// unknown fields of the ResourceClaim are ignored; a missing or mistyped field the plugin needs is
// INVALID_ARGUMENT naming it ("status.allocation.devices.results[1].device: missing"). The
// opaque parameters of driver gpu.tessera.io are tessera's own type and are checked strictly
// (an unknown field is an error naming it).
//
// Worked example: a claim allocated one share of gpu-0
//   {"metadata": {"namespace": "team-a", "name": "infer", "uid": "7f...",},
//    "status": {"allocation": {"devices": {
//       "results": [{"request": "gpu", "driver": "gpu.tessera.io", "pool": "node-1",
//                    "device": "gpu-0", "shareID": "2b...",
//                    "consumedCapacity": {"memory": "10Gi", "compute": "300"}}],
//       "config": [{"source": "FromClaim", "requests": ["gpu"],
//                   "opaque": {"driver": "gpu.tessera.io",
//                              "parameters": {"apiVersion": "gpu.tessera.io/v1alpha1",
//                                             "kind": "GpuShareConfig", "priority": 2}}}]}}}}
// parses to AllocatedClaim{ns "team-a", name "infer", devices [{request "gpu", device "gpu-0",
// gpu 0, shared, memory 10737418240 bytes, compute 300 milli, config.priority 2}]}; with
// "reservedFor": [{"resource": "pods", "name": "infer-0", "uid": "c4..."}] in status, pod_uids
// ["c4..."]. A MIG device "gpu-1-mig-3g-40gb-4" (names.h ParseMigDeviceName) parses to gpu 1,
// mig_profile_label "3g-40gb", mig_start 4, not shared (a MIG device is allocated whole; one with
// consumedCapacity is INVALID_ARGUMENT naming the field). A result of
// another driver is kept with its driver name (the plugin skips it) and not checked further.
//
// Thread-safety: the functions are pure; InMemoryClaimSource is safe from several threads,
// FileClaimSource reads files only.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/status.h"

namespace tessera::k8s {

// What the kubelet names in NodePrepareResources / NodeUnprepareResources.
struct ClaimRef {
  std::string ns;    // the claim's namespace
  std::string uid;   // metadata.uid: the key of the kubelet's answer
  std::string name;
};

// The opaque parameters of driver gpu.tessera.io (apiVersion gpu.tessera.io/v1alpha1, kind
// GpuShareConfig), from a DeviceClass (source FromClass) or the claim (FromClaim; later entries
// win, as the API says for config order).
struct GpuShareConfig {
  std::string tenant;   // who is billed (metering account); "" = the claim's namespace
  int priority = 0;     // the priority time-slice policy's priority, 0..1000
  bool scrub = false;   // zero device memory before every free (docs/enforcement.md)
};

struct AllocatedDevice {
  std::string request;   // results[].request ("gpu", or "gpu/sub" for a firstAvailable choice)
  std::string driver;    // results[].driver
  std::string pool;
  std::string device;
  std::string share_id;  // results[].shareID ("" for an exclusive allocation)
  // Only for results of gpu.tessera.io:
  int gpu = -1;          // node GPU index, from the device name ("gpu-3" -> 3, "gpu-3-mig-..." -> 3)
  // A MIG device ("gpu-<N>-mig-<profile label>-<start>"): the profile's label and the placement's
  // first memory slice; mig_start -1 for a whole GPU or a share.
  std::string mig_profile_label;
  int mig_start = -1;
  bool shared = false;   // consumedCapacity present: a share; absent: the whole GPU
  uint64_t memory_bytes = 0;  // consumedCapacity.memory
  int64_t compute_milli = 0;  // consumedCapacity.compute (milli-GPU, 1..1000)
  GpuShareConfig config;
};

struct AllocatedClaim {
  std::string ns, name, uid;
  std::vector<AllocatedDevice> devices;  // every driver's results, in the claim's order
  // status.reservedFor's pods (resource "pods" of the core group): the metadata.uid of each pod
  // the claim is reserved for. The NVML backstop (dra_backstop.h) knows a container's processes
  // by their pod; empty when nothing is reserved yet. Consumers of other kinds are skipped.
  std::vector<std::string> pod_uids;
};

// The ResourceClaim JSON (resource.k8s.io/v1) as the API server returns it.
StatusOr<AllocatedClaim> ParseResourceClaim(std::string_view json);

// A Kubernetes quantity ("10Gi", "512Mi", "1G", "300", "1.5Gi") as a whole number; INVALID_ARGUMENT
// for a fraction of a unit ("0.5", "100m"), a negative value, or one past 2^63.
StatusOr<uint64_t> ParseQuantity(std::string_view text);

// The node GPU index of one of tessera's GPU device names: "gpu-<N>", N in 0..15. INVALID_ARGUMENT
// otherwise (a MIG device's name is parsed by ParseMigDeviceName, names.h).
StatusOr<int> GpuIndexOfDevice(std::string_view device);

// Where the plugin reads a claim: the JSON text of ResourceClaim namespace/name. NOT_FOUND when
// there is none. The messages do not repeat the claim's name (the driver puts it in front).
class ClaimSource {
 public:
  virtual ~ClaimSource() = default;
  virtual StatusOr<std::string> ResourceClaimJson(const std::string& ns, const std::string& name) = 0;
};

// Claims held in memory (tests, benchmarks).
class InMemoryClaimSource : public ClaimSource {
 public:
  void Put(const std::string& ns, const std::string& name, std::string json);
  void Remove(const std::string& ns, const std::string& name);
  StatusOr<std::string> ResourceClaimJson(const std::string& ns, const std::string& name) override;

 private:
  std::mutex mu_;
  std::map<std::string, std::string> claims_;  // "ns/name" -> JSON
};

class KubeClient;

// Claims from the API server (`tessera k8s dra-driver` in a cluster): GET
// /apis/resource.k8s.io/v1/namespaces/<ns>/resourceclaims/<name> through `client`, which must
// outlive the source and is used by one call at a time (a mutex: the client is one connection).
// A namespace or name that is not a DNS name (RFC 1123 labels and dots) is INVALID_ARGUMENT
// before any request; a 404 is NOT_FOUND with the request and the server's message
// ("GET /apis/resource.k8s.io/v1/namespaces/team-a/resourceclaims/x: HTTP 404: resourceclaims
// \"x\" not found"); other failures are KubeClient's.
class KubeClaimSource : public ClaimSource {
 public:
  explicit KubeClaimSource(KubeClient& client) : client_(client) {}
  StatusOr<std::string> ResourceClaimJson(const std::string& ns, const std::string& name) override;

 private:
  std::mutex mu_;
  KubeClient& client_;
};

// Claims as files <dir>/<namespace>/<name>.json (`tessera k8s dra-driver --claims-dir`, for a
// node without an API server: the standalone tests).
class FileClaimSource : public ClaimSource {
 public:
  explicit FileClaimSource(std::string dir) : dir_(std::move(dir)) {}
  StatusOr<std::string> ResourceClaimJson(const std::string& ns, const std::string& name) override;

 private:
  std::string dir_;
};

}  // namespace tessera::k8s
