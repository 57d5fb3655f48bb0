// Launcher: start a tenant's command under libtessera-shim.so, pinned to its GPU, and supervise
// it. Three layers, so that every node-side caller uses the same rules:
//   ResolveShim / PinGpu      checks before anything starts (fail closed: no shim, no run);
//   LaunchEnvironment         the variables the command needs (LD_PRELOAD, TESSERA_SHIM_*,
//                             CUDA_VISIBLE_DEVICES): what the SPANK plugin sets in the step's
//                             environment and the device plugin returns from Allocate;
//   RunTenantCommand          the whole `tessera run`: Join, wait until the GPU's arbiter has
//                             admitted the tenant, fork/exec, supervise, Leave.
//
// Callers: `tessera run` (RunTenantCommand), the agent (RunTenantCommand per workload), the SPANK
// plugin and the device plugin (ResolveShim, PinGpu, LaunchEnvironment with NodeDir::Join).
//
// GPU pinning. The command sees only its GPUs: CUDA_VISIBLE_DEVICES is the GPU's UUID when NVML
// knows it (else the index), and TESSERA_SHIM_GPUS=N tells the shim that CUDA ordinal 0 is node
// GPU N. A CUDA_VISIBLE_DEVICES the caller already set can narrow but never widen: the GPU must
// be in it (by index or UUID), else INVALID_ARGUMENT. A tenant of several GPUs (a pod's,
// TenantRequest::gpus = {1, 3}) sees them all, in that order: CUDA_VISIBLE_DEVICES=<uuid 1>,
// <uuid 3> and TESSERA_SHIM_GPUS=1,3 (ordinal 0 is GPU 1, ordinal 1 is GPU 3); the supervisor
// waits until each GPU's arbiter has admitted it and keeps an arbiter duty per GPU (one thread
// each beyond the first, started after the command is).
//
// Identity. With `tenant.uid` set (>= 0) the command runs under that uid (no supplementary
// groups; the gid is the uid's primary group, else the uid's number) and its tenant's counters
// file is chown'ed to it (NodeDir::Join), so it can write its own counters and no other tenant's
// (docs/security.md). Needs root; the supervisor itself keeps its uid. A shim the uid cannot read
// (the dynamic loader would skip it and run the command unconfined) ends the child with 126.
//
// Supervision. The command runs in a process group of its own (given the terminal's foreground
// when the supervisor had it) with PR_SET_PDEATHSIG = SIGKILL, so a SIGKILLed supervisor takes
// its command with it; SIGINT, SIGTERM and SIGHUP are forwarded to the group; when the command
// exits, what is left of its group is killed. The group is recorded in the registry, so the
// tenant's slot stays taken while any process of it lives.
//
// Worked example: RunTenantCommand(NodeDir(DefaultNodeDir()), {.tenant = {.name = "a", .gpu = 0,
// .mem_bytes = 64 << 20, .share = 30}, .command = {"./train"}}) creates the node directory,
// registers a (index 0, limit 64 MiB on GPU 0, share 30), becomes GPU 0's arbiter and runs
// ./train with LD_PRELOAD=libtessera-shim.so, TESSERA_SHIM_TENANT=0, TESSERA_SHIM_GPUS=0 and
// CUDA_VISIBLE_DEVICES=GPU-<uuid of 0>; it returns ./train's exit code (128 + signal when it was
// killed). A second one for b with share 70 gets index 1 and its launches wait for leases the
// first process grants 30/70.
//
// Process-safety: RunTenantCommand installs handlers for SIGINT, SIGTERM and SIGHUP while it
// runs (restored afterwards) and so must be the only supervisor in its process; the other
// functions are pure or read-only and thread-safe.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tessera/core/status.h"
#include "tessera/enforce/nvml.h"
#include "tessera/node/gpu_table.h"
#include "tessera/node/node_dir.h"

namespace tessera::node {

// `requested` (e.g. $TESSERA_SHIM_PATH) when not empty, else libtessera-shim.so next to the
// running executable or in ../lib. INVALID_ARGUMENT naming the path when it is missing, not a
// regular readable file or not an ELF shared object.
StatusOr<std::string> ResolveShim(const std::string& requested);

struct GpuPin {
  std::string visible_devices;  // CUDA_VISIBLE_DEVICES for the command
  std::string uuid;             // empty where NVML is not available
  int minor = -1;               // /dev/nvidia<minor> (NVML); -1 where NVML does not say
  // One MIG instance (uuid and visible_devices its MIG device UUID): isolated by the hardware, so
  // the launch environment does not gate its launches on the GPU's lease board (node_dir.h,
  // TenantRequest::mig_instance).
  bool mig = false;
};
// `nvml_library`: what DlopenNvml loads ("libnvidia-ml.so.1"); when it cannot be loaded the GPU is
// pinned by index. `caller_visible_devices`: the caller's CUDA_VISIBLE_DEVICES, if set.
// INVALID_ARGUMENT when NVML counts fewer GPUs or the caller's list does not contain the GPU.
StatusOr<GpuPin> PinGpu(int gpu, const std::string& nvml_library,
                        const std::optional<std::string>& caller_visible_devices);
// The same from facts already known (the node's GPU table, gpu_table.h): no NVML is loaded.
StatusOr<GpuPin> PinGpuFromFacts(const NodeGpuFacts& facts, const std::optional<std::string>& caller_visible_devices);
// The MIG instance of `gpu` whose GPU instance starts at memory slice `start`: the command sees
// only that instance, by its MIG device's UUID (CUDA_VISIBLE_DEVICES=MIG-..., the only way CUDA
// selects one instance of a MIG GPU; the GPU's index or UUID would give the command whichever
// instance CUDA enumerates first). pin.uuid is the MIG device's UUID, pin.minor the GPU's.
// FAILED_PRECONDITION when NVML cannot be loaded or read (fail closed: a MIG instance cannot be
// pinned without it); NOT_FOUND naming the GPU's instances when none starts at `start`, or when it
// has no compute instance yet. Example: an H100 with 3g.40gb@0 (GI 1) and 3g.40gb@4 (GI 2):
// PinMigInstance(0, 4, ...) -> visible_devices "MIG-<uuid of GI 2's compute instance>".
StatusOr<GpuPin> PinMigInstance(int gpu, int start, const std::string& nvml_library);
// The MIG device UUID of that instance, through an NVML already open (the agent's); the errors
// of PinMigInstance, without its NVML prefix for a library that cannot be loaded.
StatusOr<std::string> MigInstanceUuid(const enforce::NvmlApi& nvml, int gpu, int start);
// Every GPU of a multi-GPU tenant, in the order given: visible_devices and uuid are the GPUs'
// lists, comma-separated ({1, 3} -> "GPU-<uuid 1>,GPU-<uuid 3>"; uuid empty unless NVML knows
// every one). The errors of PinGpu for the first GPU that fails.
StatusOr<GpuPin> PinGpus(const std::vector<int>& gpus, const std::string& nvml_library,
                         const std::optional<std::string>& caller_visible_devices);
// The pin of a tenant of several GPUs from each GPU's pin, in order (what PinGpus returns; for a
// caller that keeps each GPU's pin, e.g. the DRA driver): lists joined by commas, uuid empty unless
// every pin has one, minor -1 (a device node is one GPU's).
GpuPin JoinPins(const std::vector<GpuPin>& pins);

struct LaunchOptions {
  NodePaths paths{""};
  std::string shim_path;        // from ResolveShim
  GpuPin pin;                   // from PinGpu / PinGpus
  std::vector<int> gpus = {0};  // node GPU of each CUDA ordinal (TESSERA_SHIM_GPUS)
  int tenant_index = 0;
  std::string caller_ld_preload;  // kept after the shim
};
// The shim's environment for the tenant's processes. Without TESSERA_SHIM_LEASES for a MIG pin
// (pin.mig): its launches are not gated. Example: {LD_PRELOAD=<shim>, TESSERA_SHIM_POLICY=<dir>/policy,
// TESSERA_SHIM_COUNTERS=<dir>/counters, TESSERA_SHIM_LEASES=<dir>/leases, TESSERA_SHIM_TENANT=3,
// TESSERA_SHIM_GPUS=0, CUDA_VISIBLE_DEVICES=GPU-...}.
std::vector<std::pair<std::string, std::string>> LaunchEnvironment(const LaunchOptions& options);

struct RunOptions {
  TenantRequest tenant;
  std::vector<std::string> command;
  std::string shim_path;  // for ResolveShim ("" = next to the executable)
  std::string nvml_library = "libnvidia-ml.so.1";
  std::optional<std::string> caller_visible_devices;
  std::string caller_ld_preload;
  // >= 0: run on the MIG instance of the (one) GPU whose GPU instance starts at this memory slice
  // (PinMigInstance); -1: the whole GPU(s). `mig_uuid`, when set instead: that MIG device (its
  // UUID as the caller read it from NVML, e.g. the agent), taken as given.
  int mig_start = -1;
  std::string mig_uuid;
  // How long the GPU's arbiter may take to put the tenant on its board. A launch without an
  // active slot would not be gated, so past it the command is not started (FAILED_PRECONDITION).
  std::chrono::milliseconds admit_timeout = std::chrono::seconds(5);
  std::string log_prefix = "tessera run";  // of the line the child prints when exec fails
};

struct RunResult {
  // The command's (128 + signal when it was killed; 127 when it could not be executed).
  int exit_code = 0;
  // Non-empty: the run killed the command (137) because the tenant's counters file was broken
  // (truncated, grown or overwritten: enforce::CheckCountersFile, checked once a second), so that
  // its memory was no longer accounted (fail closed); says what was wrong with the file.
  std::string violation;
  // Leaving the registry after the command ended (the caller reports it; the code stands).
  Status cleanup;
};
// INVALID_ARGUMENT for bad options (empty command or tenant, shim, GPU pin); other errors when
// the node cannot be joined or the tenant is not admitted. Nothing runs unless it returns a result.
StatusOr<RunResult> RunTenantCommand(const NodeDir& node, const RunOptions& options);

}  // namespace tessera::node
