// The node's lease file: one compute LeaseBoard (enforce/lease.h) per GPU, next to the memory
// segment's policy and counters files (enforce/segment.h), and the mappings that put each board
// together from the files of whoever writes its parts.
//
// Files (lease ABI version 3):
//   * `leases` (this file), mode 0644, written by the node side only: board g at byte offset
//     g * sizeof(LeaseBoard) (270336, a multiple of the 4 KiB page); the file size says how many
//     GPUs it covers (1..kMaxGpus). Only each board's first two pages (header, lease word, arbiter
//     line, node lines) are ever written; the tenant pages of the file stay holes.
//   * each tenant's counters file (`counters/<index>`, mode 0600, the tenant's uid when it has one):
//     page g of its lease pages (CounterSegment::lease_slots) is the tenant's page of board g.
// A LeaseFile maps the whole lease file and then, with MAP_FIXED, each tenant's page of each board
// from that tenant's counters file over slots[tenant], so every process sees one contiguous
// LeaseBoard and the enforce/lease.h functions work on it unchanged. The node side maps the lease
// file read-write and every tenant's pages; a tenant (the shim, OpenTenant) maps the lease file
// read-only from an O_RDONLY descriptor (so mprotect cannot make it writable; FUTEX_WAIT on
// `wake_seq` works on it) and only its own pages read-write: it can neither take the lease word
// nor touch another tenant's lines.
//
// Each board carries its own magic, kLeaseAbiVersion, size and gpu_index. Tenant t of the memory
// segment uses lease slot t on every board (kLeaseMaxTenants == kMaxTenants).
//
// Worked example: Create("/run/tessera/leases", 2) makes a 540672-byte file; board(1) is at
// offset 270336 with header.gpu_index == 1. OpenTenant(leases, "counters/5", 5) in the shim of
// tenant 5 maps counters/5 bytes [86016 + 4096, 86016 + 8192) at &board(1).slots[5]; a launch on
// node GPU 1 gates on board(1) and counts on board(1).slots[5].tenant, i.e. in counters/5. A write
// to board(1).lease.word from that process faults (SIGSEGV): the page is PROT_READ.
//
// Ownership: LeaseFile owns its mappings (munmap on destruction); boards stay valid while it lives.
// Not thread-safe: RemapTenant must not run while another thread reads that tenant's pages.
#pragma once

#include <cstddef>
#include <string>

#include "tessera/core/status.h"
#include "tessera/enforce/lease.h"
#include "tessera/enforce/segment.h"

namespace tessera::enforce {

static_assert(kLeaseMaxTenants == static_cast<uint32_t>(kMaxTenants),
              "lease slot t is memory-segment tenant t");
static_assert(sizeof(LeaseBoard) % kLeasePage == 0 && offsetof(LeaseBoard, slots) % kLeasePage == 0);

class LeaseFile {
 public:
  // Node side. Creates (truncates) `path` with `num_gpus` initialised boards, mode 0644. With
  // `counters_dir`, maps the tenants' pages as Open does.
  static StatusOr<LeaseFile> Create(const std::string& path, int num_gpus, const std::string& counters_dir = "");
  // Node side. Maps an existing file read-write and validates every board (errors name the file, the
  // GPU and the check that failed, e.g. "ABI version mismatch"). With `counters_dir`, maps each
  // tenant's pages from its counters file there (of every board, or of board `only_gpu` alone when
  // >= 0; a tenant without a file, or with one too short for them, reads as zeros), and guards the
  // mapping (fault_guard.h: a tenant that truncates its file later leaves zeros there, not a
  // SIGBUS); without, the tenant pages read as zeros (enough to read the node lines).
  static StatusOr<LeaseFile> Open(const std::string& path, const std::string& counters_dir = "", int only_gpu = -1);
  // Any process that only reads the node lines (state, charged time, heartbeat: status, the
  // launcher): the file read-only; the tenant pages read as zeros, and writing a board faults.
  static StatusOr<LeaseFile> OpenNodeLines(const std::string& path);
  // Tenant side (the shim): `path` read-only and `counters_path`, the counters file of `tenant`,
  // read-write at slots[tenant] of every board. A counters file the caller may not open read-write
  // is PERMISSION_DENIED; one too small for ABI version 3, FAILED_PRECONDITION.
  static StatusOr<LeaseFile> OpenTenant(const std::string& path, const std::string& counters_path, int tenant);

  LeaseFile(LeaseFile&& other) noexcept;
  LeaseFile& operator=(LeaseFile&& other) noexcept;
  LeaseFile(const LeaseFile&) = delete;
  LeaseFile& operator=(const LeaseFile&) = delete;
  ~LeaseFile();

  // Node side (opened with a counters folder): maps `tenant`'s pages again from its counters file,
  // e.g. after NodeSegment::RecreateTenantCounters gave the index a new file (new inode).
  Status RemapTenant(int tenant);
  // Node side: RemapTenant for each tenant whose counters file is not the one mapped (another
  // inode, or appeared or gone). Returns how many were mapped again, or the first error.
  StatusOr<int> RefreshTenants();

  int num_gpus() const { return num_gpus_; }
  LeaseBoard& board(int gpu) const { return boards_[gpu]; }
  // Leaks the mappings (the shim keeps them for the life of the process) and returns them.
  LeaseBoard* Release();

 private:
  LeaseFile() = default;
  static StatusOr<LeaseFile> Map(const std::string& path, bool writable);
  Status MapTenantPages(int tenant, const std::string& counters_path, bool missing_is_zero);
  Status MapZeroPages(int tenant);
  Status GuardTenantPages();  // node side: the mapping under FaultGuard (fault_guard.h)
  void Unmap();
  LeaseBoard* boards_ = nullptr;
  int num_gpus_ = 0;
  std::string path_;
  std::string counters_dir_;
  int only_gpu_ = -1;
  int guard_plus_one_ = 0;  // FaultGuard range of the mapping, + 1 (0: none)
  unsigned long long mapped_ino_[kMaxTenants] = {};  // inode of each tenant's mapped counters file; 0 = none
};

}  // namespace tessera::enforce
