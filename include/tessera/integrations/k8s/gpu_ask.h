// How a pod states its GPU ask to the scheduler extender (docs/kubernetes.md, "Scheduler
// extender"): annotations in the driver's domain, read from the pod that kube-scheduler sends.
//
//   gpu.tessera.io/mode        whole | share | mig            (default: mig if a profile is given,
//                                                              share if compute < 1000, else whole)
//   gpu.tessera.io/count       GPUs per pod, 1..16            (whole only; default 1)
//   gpu.tessera.io/compute     milli-GPU of one GPU, 1..1000  (share: required, < 1000)
//   gpu.tessera.io/memory      GPU memory per GPU, a Kubernetes quantity ("10Gi", "512Mi",
//                              "16G", "1073741824"); share: optional (default: the compute's
//                              share of the GPU's memory); whole: ignored (the GPU is whole)
//   gpu.tessera.io/mig-profile a MIG profile name, e.g. "3g.40gb"  (mig: required)
//   gpu.tessera.io/model       restrict to one GPU model (catalog or NVML name), optional
//
// A pod with none of these annotations asks for no GPU (ParseGpuAsk gives nullopt): the
// extender lets it pass everywhere and scores it neutrally.
//
//   {"gpu.tessera.io/compute": "300", "gpu.tessera.io/memory": "10Gi"}
//     -> GpuAsk{.mode = kShare, .count = 1, .compute_milli = 300, .memory_mib = 10240}
//   {"gpu.tessera.io/count": "2"}            -> GpuAsk{.mode = kWhole, .count = 2, .compute_milli = 1000}
//   {"gpu.tessera.io/mig-profile": "1g.10gb"} -> GpuAsk{.mode = kMig, .mig_profile = "1g.10gb"}
//   {"gpu.tessera.io/compute": "1500"}       -> INVALID_ARGUMENT
//       "gpu.tessera.io/compute: 1500 is out of range 1..1000 (milli-GPU)"
//
// Errors name the annotation. Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "tessera/core/status.h"

namespace tessera::k8s {

inline constexpr std::string_view kModeAnnotation = "gpu.tessera.io/mode";
inline constexpr std::string_view kCountAnnotation = "gpu.tessera.io/count";
inline constexpr std::string_view kComputeAnnotation = "gpu.tessera.io/compute";
inline constexpr std::string_view kMemoryAnnotation = "gpu.tessera.io/memory";
inline constexpr std::string_view kMigProfileAnnotation = "gpu.tessera.io/mig-profile";
inline constexpr std::string_view kModelAnnotation = "gpu.tessera.io/model";

enum class AskMode { kWhole, kShare, kMig };
std::string_view AskModeName(AskMode mode);  // "whole", "share", "mig"

struct GpuAsk {
  AskMode mode = AskMode::kWhole;
  int32_t count = 1;            // GPUs (whole); 1 for share and mig
  int32_t compute_milli = 1000; // per GPU; 1000 for whole
  int64_t memory_mib = 0;       // per GPU; 0: not stated (share: proportional to compute)
  std::string mig_profile;      // mig only
  std::string model;            // "" = any model
  // Milli-GPU the ask counts against a tenant's quota: count x compute (a MIG instance counts
  // as the share of the GPU it blocks, which depends on the model; see Extender).
  int64_t QuotaMilli() const { return static_cast<int64_t>(count) * compute_milli; }
  friend bool operator==(const GpuAsk&, const GpuAsk&) = default;
};

// The ask the annotations state, nullopt when the pod has none of them.
StatusOr<std::optional<GpuAsk>> ParseGpuAsk(const std::map<std::string, std::string, std::less<>>& annotations);

// A Kubernetes resource quantity (k8s.io/apimachinery resource.Quantity's forms) in bytes:
// a decimal number (integer or with a fraction) and an optional suffix Ki Mi Gi Ti Pi Ei
// (powers of 1024), k M G T P E (powers of 1000), or an exponent "e6"/"E6". "10Gi" ->
// 10737418240; "1.5G" -> 1500000000; "128974848" -> 128974848. Negative values, "m"
// (milli) and values over 2^62 are refused, naming the text.
StatusOr<int64_t> ParseQuantityBytes(std::string_view text);

}  // namespace tessera::k8s
