// Keeps the API server's ResourceSlices of one node equal to the ones rendered from its GPU
// inventory (RenderResourceSlices): the DRA driver calls Publish at start, whenever the inventory
// changes (PublishIfChanged), and now and then to repair what someone else changed.
//
// One pass: LIST the node's slices of gpu.tessera.io; if their names and content hashes (the
// gpu.tessera.io/spec-hash annotation) are the rendered ones, at one generation, nothing is
// written. Otherwise the pool's generation becomes (highest generation seen) + 1 and every
// rendered slice is written: UPDATE (PUT with the resourceVersion listed) or CREATE; then the
// slices that are no longer rendered are deleted. A 409 Conflict on update (someone wrote the
// slice since the LIST) re-reads the slice and tries again with its resourceVersion, up to
// max_conflict_retries times; a CREATE that finds the slice already there updates it; an UPDATE
// that finds it gone creates it.
//
// Example: node n1, two A100-40GB, nothing published -> created 1, generation 1. The second GPU
// is put in MIG mode -> a counter slice and a device slice at generation 2: updated 1, created 1.
// Published again with no change -> unchanged 2, nothing written.
//
// Errors are the client's, naming the request ("PUT /apis/resource.k8s.io/v1/resourceslices/
// n1-gpu.tessera.io-0: HTTP 500: ..."); a pass that fails part way leaves slices at mixed
// generations, which consumers ignore until the next pass completes the pool.
// Thread-safety: one publisher per thread (as its client).
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "tessera/api/node_wire.h"
#include "tessera/core/gpu_model.h"
#include "tessera/core/status.h"
#include "tessera/integrations/k8s/kube_client.h"
#include "tessera/integrations/k8s/resource_slices.h"

namespace tessera::k8s {

struct PublishResult {
  int created = 0;
  int updated = 0;
  int deleted = 0;
  int unchanged = 0;
  int conflicts = 0;        // 409s met (and retried)
  int64_t generation = 0;   // the pool's generation after the pass
  friend bool operator==(const PublishResult&, const PublishResult&) = default;
};

struct PublisherOptions {
  SliceOptions slices;           // node_name required; generation is the publisher's to choose
  int max_conflict_retries = 5;  // per slice and pass
};

class SlicePublisher {
 public:
  SlicePublisher(KubeClient& client, const GpuModelCatalog& catalog, PublisherOptions options)
      : client_(client), catalog_(catalog), options_(std::move(options)) {}

  // A pass (above); on success `gpus` are the last inventory published.
  StatusOr<PublishResult> Publish(const std::vector<api::InventoryGpu>& gpus);
  // Publish when `gpus` differ from the last inventory published with success; nullopt otherwise.
  StatusOr<std::optional<PublishResult>> PublishIfChanged(const std::vector<api::InventoryGpu>& gpus);

 private:
  // Writes one rendered slice: update (with conflict retries) or create.
  Status Write(nlohmann::json slice, const nlohmann::json* existing, PublishResult& result);

  KubeClient& client_;
  const GpuModelCatalog& catalog_;
  PublisherOptions options_;
  std::optional<std::vector<api::InventoryGpu>> last_published_;
};

}  // namespace tessera::k8s
