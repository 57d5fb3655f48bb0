// SliceSync (tessera/integrations/k8s/slice_sync.h).
#include "tessera/integrations/k8s/slice_sync.h"

#include <string>
#include <utility>

namespace tessera::k8s {

SliceSync::Outcome SliceSync::Step(Clock::time_point now) {
  StatusOr<std::vector<api::InventoryGpu>> gpus = inventory_();
  if (!gpus.ok()) return Status(gpus.status().code(), "GPU inventory: " + std::string(gpus.status().message()));
  const bool repair = !last_success_ || now - *last_success_ >= options_.repair_interval;
  std::optional<PublishResult> done;
  if (repair) {
    TESSERA_ASSIGN_OR_RETURN(PublishResult r, publisher_.Publish(*gpus));
    done = r;
  } else {
    TESSERA_ASSIGN_OR_RETURN(done, publisher_.PublishIfChanged(*gpus));
  }
  if (done) last_success_ = now;
  return done;
}

void SliceSync::Start(std::function<void(const Outcome&)> report) {
  if (options_.inventory_interval.count() <= 0 || thread_.joinable()) return;
  {
    std::lock_guard lock(mu_);
    stop_ = false;
  }
  thread_ = std::thread([this, report = std::move(report)] {
    std::unique_lock lock(mu_);
    while (!wake_.wait_for(lock, options_.inventory_interval, [this] { return stop_; })) {
      lock.unlock();
      Outcome outcome = Step(Clock::now());
      if (report) report(outcome);
      lock.lock();
    }
  });
}

void SliceSync::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace tessera::k8s
