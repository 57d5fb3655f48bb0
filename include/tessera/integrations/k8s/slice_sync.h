// SliceSync: the DRA driver's own ResourceSlice publishing (`tessera k8s dra-driver`). It reads
// the node's GPU inventory (a function: NVML in the driver, a list in tests) and keeps the API
// server's slices of the node equal to it through a SlicePublisher: at start, whenever the
// inventory changes (a GPU put into MIG mode, a GPU gone), after a failed pass, and every
// repair_interval even without a change (a full pass: LIST and compare, which writes only what
// someone else changed or deleted). Stale slices (names no longer rendered, e.g. after a GPU went)
// are deleted by the publisher's pass.
//
// Step(now) is one decision on a clock the caller gives (tests drive it with a fake time);
// Start runs Step on a thread of its own every inventory_interval until Stop.
//
// Worked example (inventory_interval 30 s, repair_interval 600 s): t=0 Step: nothing published
// yet -> Publish: created 1, generation 1. t=30 s, same GPUs -> nullopt, no request sent. t=60 s,
// GPU 1 in MIG mode -> Publish: updated 1, created 1, generation 2. t=660 s, same GPUs: the repair
// is due -> a LIST, nothing written (unchanged 2). The API server answers 503 at t=690 s after a
// change: the error is returned, and the next Step publishes again.
//
// Errors: the inventory's ("GPU inventory: ...") and the publisher's (naming the request).
// Thread-safety: Step is not to be called while the thread of Start runs; Start and Stop from one
// thread. The publisher and the inventory function are used from that thread only, and must
// outlive the SliceSync (the destructor stops the thread).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "tessera/api/node_wire.h"
#include "tessera/core/status.h"
#include "tessera/integrations/k8s/slice_publisher.h"

namespace tessera::k8s {

struct SliceSyncOptions {
  std::chrono::milliseconds inventory_interval{30'000};  // how often Start's thread reads the GPUs
  std::chrono::milliseconds repair_interval{600'000};    // a full pass at least this often
};

class SliceSync {
 public:
  using Clock = std::chrono::steady_clock;
  using InventoryFn = std::function<StatusOr<std::vector<api::InventoryGpu>>()>;
  // What a pass did: nullopt when no request was needed (inventory unchanged, no repair due).
  using Outcome = StatusOr<std::optional<PublishResult>>;

  SliceSync(SlicePublisher& publisher, InventoryFn inventory, SliceSyncOptions options = {})
      : publisher_(publisher), inventory_(std::move(inventory)), options_(options) {}
  ~SliceSync() { Stop(); }
  SliceSync(const SliceSync&) = delete;
  SliceSync& operator=(const SliceSync&) = delete;

  Outcome Step(Clock::time_point now);

  // Steps every inventory_interval from now (the first one inventory_interval from now: call Step
  // first for the start) on a thread, giving each outcome to `report` (on that thread). A zero
  // interval starts no thread.
  void Start(std::function<void(const Outcome&)> report);
  // Ends the thread (a pass in progress finishes first); safe to call twice.
  void Stop();

 private:
  SlicePublisher& publisher_;
  InventoryFn inventory_;
  SliceSyncOptions options_;
  std::optional<Clock::time_point> last_success_;  // of a pass that asked the API server

  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tessera::k8s
