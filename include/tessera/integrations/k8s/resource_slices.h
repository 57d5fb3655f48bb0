// The Kubernetes objects of the DRA driver gpu.tessera.io (resource.k8s.io/v1, docs/kubernetes.md):
// a node's GPUs as ResourceSlices, and the three DeviceClasses. Called by `tessera k8s slices`
// (printing) and by the SlicePublisher (keeping the API server's copy equal to these). Pure: no
// I/O; thread-safe. The objects are nlohmann::json documents, as the API server reads them (the
// tests check them against the published OpenAPI v3 schema of resource.k8s.io/v1).
//
// The pool is the node (pool.name = node name): one ResourceSlice a piece of it, all with the same
// pool.generation and pool.resourceSliceCount. A GPU becomes:
//   - not in MIG mode: one device "gpu-<index>", type "gpu", allowMultipleAllocations: true, with
//     the capacities `memory` (the GPU's MiB as a binary quantity) and `compute` (1 = the whole
//     GPU, so 0.3 GPU is "300m": a milli-GPU is Kubernetes' milli). Each has a requestPolicy:
//     default = the whole capacity (a claim that asks for no share gets the whole GPU, which
//     leaves nothing for another claim), validRange {min 10m, max 1, step 10m} for compute and
//     {min 256Mi, max the GPU's memory} for memory. The share the scheduler gives a claim
//     (status.allocation.devices.results[].consumedCapacity) is the limit the shim enforces.
//   - in MIG mode: a counter set "gpu-<index>" (sharedCounters) with one counter a memory slice
//     ("memory-slice-0".."memory-slice-7", value 1), "compute-slices" (7, or 4 on A30) and
//     "media-extensions" (1), and one device per MIG profile and valid placement,
//     "gpu-<index>-mig-<profile>-<start>" (type "mig"; names.h MigDeviceName, which the kubelet
//     plugin parses back), consuming the memory slices its placement covers, its compute slices
//     and, for "+me" profiles, the media extension. Two devices whose placements overlap cannot
//     both be allocated: the scheduler does the MIG geometry.
// resource.k8s.io/v1 allows devices or sharedCounters in a slice, not both, at most 8 counter
// sets a slice and 64 devices a slice when devices consume counters: the counter sets go into the
// first slices, 8 at a time, then the devices, 64 at a time. Slices are named
// "<node>-gpu.tessera.io-<k>", k = 0..count-1.
//
// Worked example: node "n1" with one A100-40GB (MIG off) and one A100-40GB in MIG mode gives two
// slices: n1-gpu.tessera.io-0 with sharedCounters [{name: "gpu-1", counters: {memory-slice-0: 1,
// ..., memory-slice-7: 1, compute-slices: 7, media-extensions: 1}}], and n1-gpu.tessera.io-1 with
// devices [gpu-0 (memory 40Gi, compute 1), gpu-1-mig-1g-5gb-0 ... gpu-1-mig-7g-40gb-0]; the device
// gpu-1-mig-3g-20gb-4 consumes {memory-slice-4..7: 1, compute-slices: 3} of "gpu-1". Both slices
// carry pool {name: "n1", generation: G, resourceSliceCount: 2}.
//
// The DeviceClasses select on device.driver and the "type" attribute, and pass the sharing mode
// to the kubelet plugin as opaque class configuration ({"apiVersion": "gpu.tessera.io/v1",
// "kind": "GpuSharing", "mode": "whole" | "share" | "mig"}):
//   whole.gpu.tessera.io: device.driver == "gpu.tessera.io" && device.attributes["gpu.tessera.io"].type == "gpu"
//   share.gpu.tessera.io: the same devices; a claim asks capacity.requests {compute: 300m, memory: 10Gi}
//   mig.gpu.tessera.io:   ... .type == "mig"
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/api/node_wire.h"
#include "tessera/core/gpu_model.h"
#include "tessera/core/status.h"
#include "tessera/integrations/k8s/names.h"

namespace tessera::k8s {

struct SliceOptions {
  std::string node_name;               // required: spec.nodeName and pool.name (a DNS subdomain)
  int64_t generation = 1;              // pool.generation, >= 0
  std::string node_uid;                // the Node's metadata.uid: when set, the slices are owned by the
                                       // Node (garbage-collected with it)
  std::string driver_version = "0.1.0";  // the "driverVersion" attribute (semver)
  int64_t min_compute_milli = 10;      // compute validRange min and step, 1..1000 (10: 1 %)
  int64_t min_memory_mib = 256;        // memory validRange min, >= 1
};

// Limits of resource.k8s.io/v1 (ResourceSliceSpec, Device).
inline constexpr int kMaxCounterSetsPerSlice = 8;
inline constexpr int kMaxDevicesPerSlice = 64;  // when devices consume counters (128 otherwise)

// The annotation that carries the hash of a slice's content (its spec but pool.generation): the
// publisher compares it, not the spec the server gives back (which it may normalise).
inline constexpr char kSpecHashAnnotation[] = "gpu.tessera.io/spec-hash";

// The node's ResourceSlices (see above). A node without GPUs has one slice with no devices (so
// the pool exists and says so). INVALID_ARGUMENT naming the GPU for a model the catalog does not
// know, MIG mode on a model without MIG, or memory <= 0; and for an empty or invalid node name or
// a bad option.
StatusOr<std::vector<nlohmann::json>> RenderResourceSlices(const std::vector<api::InventoryGpu>& gpus,
                                                           const GpuModelCatalog& catalog,
                                                           const SliceOptions& options);

// The DeviceClass of `kind` (see above), and the three in the order whole, share, mig.
nlohmann::json RenderDeviceClass(DeviceClassKind kind);
std::vector<nlohmann::json> RenderDeviceClasses();

// A count of MiB as a canonical binary Kubernetes quantity: 40960 -> "40Gi", 81559 -> "81559Mi",
// 0 -> "0". Canonical, so the API server gives back the same text.
std::string MebibyteQuantity(int64_t mib);
// Milli-units as a canonical decimal quantity: 1000 -> "1", 300 -> "300m", 2500 -> "2500m".
std::string MilliQuantity(int64_t milli);

// The hash (16 hex digits, FNV-1a 64) of a slice's spec with pool.generation left out.
std::string SliceSpecHash(const nlohmann::json& spec);

}  // namespace tessera::k8s
