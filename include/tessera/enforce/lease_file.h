// The node's lease file: one compute LeaseBoard (enforce/lease.h) per GPU, next to the memory
// segment's policy and counters files (enforce/segment.h). The node side creates it; the shim
// maps it read-write (tenants write their own slot's tenant line and wait on its futexes).
//
// Layout: board g at byte offset g * sizeof(LeaseBoard) (12480, a multiple of 64), nothing else;
// the file size says how many GPUs it covers (1..kMaxGpus). Each board carries its own magic,
// kLeaseAbiVersion, size and gpu_index, so the file is versioned board by board and the
// memory segment's ABI (kSegmentAbiVersion) is unchanged by it. Tenant t of the memory segment
// uses lease slot t on every board (kLeaseMaxTenants == kMaxTenants).
//
// Worked example: Create("/run/tessera/leases", 2) makes a 16768-byte file; board(1) is at
// offset 12480 with header.gpu_index == 1; a LeaseArbiter for GPU 1 is created on &board(1); the
// shim of tenant 5 launching on node GPU 1 gates on board(1).slots[5].
//
// Ownership: LeaseFile owns its mapping (munmap on destruction); boards stay valid while it lives.
#pragma once

#include <cstddef>
#include <string>

#include "tessera/core/status.h"
#include "tessera/enforce/lease.h"
#include "tessera/enforce/segment.h"

namespace tessera::enforce {

static_assert(kLeaseMaxTenants == static_cast<uint32_t>(kMaxTenants),
              "lease slot t is memory-segment tenant t");
static_assert(sizeof(LeaseBoard) % kCacheLine == 0);

class LeaseFile {
 public:
  // Creates (truncates) `path` with `num_gpus` initialised boards, mode 0666.
  static StatusOr<LeaseFile> Create(const std::string& path, int num_gpus);
  // Maps an existing file read-write and validates every board (errors name the file, the GPU
  // and the check that failed, e.g. "version-mismatch").
  static StatusOr<LeaseFile> Open(const std::string& path);

  LeaseFile(LeaseFile&& other) noexcept;
  LeaseFile& operator=(LeaseFile&& other) noexcept;
  LeaseFile(const LeaseFile&) = delete;
  LeaseFile& operator=(const LeaseFile&) = delete;
  ~LeaseFile();

  int num_gpus() const { return num_gpus_; }
  LeaseBoard& board(int gpu) const { return boards_[gpu]; }
  // Leaks the mapping (the shim keeps it for the life of the process) and returns it.
  LeaseBoard* Release();

 private:
  LeaseFile() = default;
  LeaseBoard* boards_ = nullptr;
  int num_gpus_ = 0;
};

}  // namespace tessera::enforce
