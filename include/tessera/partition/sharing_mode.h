// Sharing modes — how one workload gets (part of) a GPU — and the choice of the cheapest mode
// that meets a request's isolation and latency needs. The table of what each mode isolates and
// costs is docs/partitioning.md.
//
//   exclusive                 the whole GPU
//   mig:<profile>             a MIG GPU instance (hardware-isolated memory, SMs, faults)
//   mps(thread_pct, mem)      an MPS client: concurrent SMs capped at thread_pct %, memory limit;
//                             faults are shared with the other clients of the MPS server
//   timeslice(weight, mem)    own CUDA context, weighted time slices and a memory limit enforced
//                             by tessera's shim; faults stay in the process
//   vgpu:<profile>            an NVIDIA vGPU (virtual machines only; never chosen automatically)
//   fraction(milli, mem)      the trace's fractional share: memory limit + work-conserving
//                             compute share, no latency promise
//
// ChooseMode, cheapest first (fraction < timeslice < mps < mig < exclusive):
//   1. memory above the model's memory                  -> INVALID_ARGUMENT (never fits)
//   2. compute >= 1000 milli or memory = all of the GPU  -> exclusive
//   3. hardware isolation: the smallest MIG profile covering memory and compute, else exclusive
//   4. a latency SLO: no time slicing. Spatial sharing: MIG if a profile fits; else MPS unless
//      process isolation is needed (MPS shares faults); else exclusive
//   5. process isolation                                 -> timeslice(weight = milli, mem)
//   6. otherwise                                         -> fraction(milli, mem)
//
// Worked examples (H100-80GB): {8 GiB, 300 milli, none} -> fraction(300, 8192MiB);
// {8 GiB, 300 milli, process} -> timeslice(300, 8192MiB); {8 GiB, 100 milli, hardware} ->
// mig:1g.10gb (1/7 of the SMs covers 100 milli, 9.75 GiB covers 8 GiB); {30 GiB, 400 milli,
// hardware} -> mig:3g.40gb; {8 GiB, 300 milli, none, SLO 50 ms} -> mig:3g.40gb (300 milli needs
// 3 of the 7 compute slices). On a T4 (no MIG) the same SLO request -> mps(30, 8192MiB).
//
// Thread-safety: pure functions.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "tessera/core/gpu_model.h"
#include "tessera/core/quantity.h"
#include "tessera/core/status.h"

namespace tessera::partition {

enum class SharingModeKind { kExclusive, kMig, kMps, kTimeslice, kVgpu, kFraction };

struct SharingMode {
  SharingModeKind kind = SharingModeKind::kExclusive;
  std::string profile;          // kMig, kVgpu
  int thread_pct = 100;         // kMps: CUDA_MPS_ACTIVE_THREAD_PERCENTAGE
  int weight = 0;               // kTimeslice
  GpuMilli milli{0};            // kFraction
  MiB memory_limit{0};          // kMps, kTimeslice, kFraction

  // "exclusive", "mig:3g.40gb", "mps(30,8192MiB)", "timeslice(300,8192MiB)", "vgpu:H100-20C",
  // "fraction(300,8192MiB)".
  std::string ToString() const;
};

enum class Isolation { kNone, kProcess, kHardware };

struct ModeRequest {
  MiB memory{0};                                           // device memory the workload needs
  GpuMilli compute{0};                                     // share of one GPU's compute, 1..1000
  Isolation isolation = Isolation::kNone;
  std::optional<std::chrono::milliseconds> latency_slo;    // a per-request latency target
};

struct ModeChoice {
  SharingMode mode;
  std::string reason;  // one sentence a user can read
};

// INVALID_ARGUMENT names the field for a request that cannot be met on `model` at all.
StatusOr<ModeChoice> ChooseMode(const GpuModelInfo& model, const ModeRequest& request);
// The same rules before any GPU model is known (a control plane no node has registered with, a
// request that names none): 2 by compute alone, 5 and 6. Rules 3 and 4 depend on the model's MIG
// profiles: a request with hardware isolation or a latency SLO is FAILED_PRECONDITION (name a
// model). Examples: {1000 milli} -> exclusive; {8 GiB, 300, process} -> timeslice(300, 8192MiB);
// {8 GiB, 300, none} -> fraction(300, 8192MiB).
StatusOr<ModeChoice> ChooseModeWithoutModel(const ModeRequest& request);

}  // namespace tessera::partition
