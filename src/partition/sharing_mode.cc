#include "tessera/partition/sharing_mode.h"

#include <algorithm>

namespace tessera::partition {
namespace {

std::string MiBText(MiB m) { return std::to_string(m.value()) + "MiB"; }

// The smallest MIG profile (memory slices, then compute slices) that covers the request.
const MigProfile* SmallestMigProfile(const GpuModelInfo& model, const ModeRequest& r) {
  if (!model.mig) return nullptr;
  const MigGeometry& g = *model.mig;
  const MigProfile* best = nullptr;
  for (const MigProfile& p : g.profiles) {
    if (p.media_extensions || p.name.find("+me") != std::string::npos) continue;
    if (p.memory < r.memory) continue;
    // p gives p.compute_slices / g.compute_slices of the GPU's SMs.
    if (int64_t{p.compute_slices} * 1000 < r.compute.value() * g.compute_slices) continue;
    if (best == nullptr || p.memory_slices < best->memory_slices ||
        (p.memory_slices == best->memory_slices && p.compute_slices < best->compute_slices)) {
      best = &p;
    }
  }
  return best;
}

}  // namespace

std::string SharingMode::ToString() const {
  switch (kind) {
    case SharingModeKind::kExclusive: return "exclusive";
    case SharingModeKind::kMig: return "mig:" + profile;
    case SharingModeKind::kMps: return "mps(" + std::to_string(thread_pct) + "," + MiBText(memory_limit) + ")";
    case SharingModeKind::kTimeslice:
      return "timeslice(" + std::to_string(weight) + "," + MiBText(memory_limit) + ")";
    case SharingModeKind::kVgpu: return "vgpu:" + profile;
    case SharingModeKind::kFraction:
      return "fraction(" + std::to_string(milli.value()) + "," + MiBText(memory_limit) + ")";
  }
  return "exclusive";
}

StatusOr<ModeChoice> ChooseModeWithoutModel(const ModeRequest& r) {
  if (r.isolation == Isolation::kHardware || r.latency_slo) {
    return FailedPreconditionError(std::string(r.latency_slo ? "a latency SLO" : "hardware isolation") +
                                   " is met by a MIG instance or MPS of a GPU model: name the model");
  }
  // No model: no memory bound and no MIG; the rules below that read the model do not apply.
  GpuModelInfo any;
  any.name = "any GPU";
  return ChooseMode(any, r);
}

StatusOr<ModeChoice> ChooseMode(const GpuModelInfo& model, const ModeRequest& r) {
  if (r.memory.value() < 0) return InvalidArgumentError("memory: negative (" + MiBText(r.memory) + ")");
  if (r.compute.value() < 1 || r.compute.value() > 1000) {
    return InvalidArgumentError("compute: " + std::to_string(r.compute.value()) +
                                " milli-GPU is outside 1..1000 (ask for several GPUs instead)");
  }
  if (r.latency_slo && r.latency_slo->count() <= 0) return InvalidArgumentError("latency_slo: must be positive");
  if (model.memory.value() > 0 && r.memory > model.memory) {
    return InvalidArgumentError("memory: " + MiBText(r.memory) + " is more than one " + model.name + " has (" +
                                MiBText(model.memory) + ")");
  }
  ModeChoice c;
  const bool whole = r.compute.value() >= 1000 || (model.memory.value() > 0 && r.memory == model.memory);
  if (whole) {
    c.mode.kind = SharingModeKind::kExclusive;
    c.reason = "the request needs the whole GPU";
    return c;
  }
  const MigProfile* mig = SmallestMigProfile(model, r);
  if (r.isolation == Isolation::kHardware) {
    if (mig != nullptr) {
      c.mode = {SharingModeKind::kMig, mig->name};
      c.reason = "hardware isolation: " + mig->name + " is the smallest MIG instance with enough memory and SMs";
    } else {
      c.mode.kind = SharingModeKind::kExclusive;
      c.reason = model.mig ? "hardware isolation: no MIG instance of " + model.name + " is large enough"
                           : "hardware isolation: " + model.name + " has no MIG, only a whole GPU isolates in hardware";
    }
    return c;
  }
  if (r.latency_slo) {
    if (mig != nullptr) {
      c.mode = {SharingModeKind::kMig, mig->name};
      c.reason = "latency SLO: dedicated SMs (" + mig->name + ") never wait behind other tenants' time slices";
      return c;
    }
    if (r.isolation == Isolation::kNone) {
      c.mode.kind = SharingModeKind::kMps;
      c.mode.thread_pct = static_cast<int>(std::min<int64_t>(100, (r.compute.value() + 9) / 10));
      c.mode.memory_limit = r.memory;
      c.reason = "latency SLO without MIG: MPS runs kernels concurrently on a capped share of SMs";
      return c;
    }
    c.mode.kind = SharingModeKind::kExclusive;
    c.reason = "latency SLO with process isolation and no fitting MIG instance: MPS shares faults between "
               "clients and time slicing adds waits, so only a whole GPU meets both";
    return c;
  }
  if (r.isolation == Isolation::kProcess) {
    c.mode.kind = SharingModeKind::kTimeslice;
    c.mode.weight = static_cast<int>(r.compute.value());
    c.mode.memory_limit = r.memory;
    c.reason = "process isolation: own CUDA context (faults stay inside), memory limit and weighted time slices";
    return c;
  }
  c.mode.kind = SharingModeKind::kFraction;
  c.mode.milli = r.compute;
  c.mode.memory_limit = r.memory;
  c.reason = "no isolation or latency need: the cheapest fractional share";
  return c;
}

}  // namespace tessera::partition
