// FaultGuard: the node side survives a tenant that truncates a file the node side maps.
//
// A tenant writes its own counters file (tessera/enforce/segment.h: its counters, its processes'
// slots, its pages of the lease boards), so its uid may also ftruncate it. The node side (the
// agent, a GPU's arbiter, `tessera run`'s supervisor, the Slurm arbiter) maps every tenant's file,
// and a load or store to a page past the file's new end raises SIGBUS there: without a guard one
// tenant ends the enforcement of every tenant on the node (docs/security.md, "What remains").
//
// FaultGuard::Register(base, length, ino) names a mapping of such a file. On SIGBUS at an address
// inside a registered range, the handler maps a private zero page over the faulting page
// (mmap MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS), counts the fault on the range and returns: the
// access is retried on the zero page and the process goes on, reading zeros there from then on. A
// SIGBUS anywhere else goes to the disposition in place before the guard was installed (by default
// the process dies of it, as it would have without the guard). The same technique keeps display
// servers alive when a client truncates a shared-memory buffer they read.
//
// The fault is not the end of it: a tenant that broke its file broke the accounting of its own
// memory, and enforcement fails closed. The node side learns of it in two ways, both behind
// CheckCountersFile (segment.h): the file is shorter than the ABI's size now, or InodeFaulted(its
// inode) (a page vanished under the node side, even if the tenant grew the file back
// since; asked while the node side still maps it, so the inode cannot have been reused). The agent
// then kills the tenant's workloads (violated_limit, docs/security.md).
//
// Worked example: the agent maps counters/3 (inode 812, 151,552 bytes) at 0x7f0000000000 and
// registers it; the tenant truncates the file to 0 bytes; the arbiter's reconcile loads slot 0's
// state at 0x7f0000000440 -> SIGBUS -> the handler maps a zero page at 0x7f0000000000 and the load
// returns 0 (a free slot); Faults() is 1 and InodeFaulted(812) is true; the agent's next check
// finds counters/3 at 0 bytes and kills tenant 3's workloads. The index's next tenant gets a new
// file (a new inode), which the node side maps afresh.
//
// Limits: 4,096 ranges registered at once per process (Register returns -1 beyond that, and the
// caller refuses to map the file: a file the node side cannot guard is a file it does not read).
// The handler is process-wide, installed at the first Register and never removed.
// Thread-safety: Register, Unregister and the readers may be called from any thread; the handler
// reads the table lock-free. A range must be unregistered before it is unmapped.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera::enforce {

class FaultGuard {
 public:
  // Guards [base, base + length) (base page-aligned), a mapping of the file with inode `ino` (0:
  // unknown). Installs the SIGBUS handler on first use. Returns the range's id, or -1 when the
  // table is full or the handler could not be installed.
  static int Register(const void* base, std::size_t length, std::uint64_t ino);
  // Forgets the range (id from Register; -1 is ignored). Call it before munmap.
  static void Unregister(int id);
  // SIGBUS faults the guard absorbed in the range `id` / in every range since the process started.
  static std::uint64_t Faults(int id);
  static std::uint64_t TotalFaults();
  // True while a registered range of the file with inode `ino` (!= 0) has taken a fault. A
  // registered range keeps the file mapped, so its inode cannot be reused by another file meanwhile.
  static bool InodeFaulted(std::uint64_t ino);
};

}  // namespace tessera::enforce
