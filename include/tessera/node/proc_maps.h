// /proc/<pid>/maps text: whether a process has the shim mapped (the agent's backstop, node/agent.h:
// a compute process of a time-sliced workload without it launches outside the GPU's time slices).
// Kept apart from the agent so that the fuzz tree compiles it alone (tests/fuzz/maps_fuzzer.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace tessera::node {

// Whether a maps text maps the shim: a line whose path (from its first '/') has a file name that
// starts with "libtessera-shim", wherever TESSERA_SHIM_PATH put it ("(deleted)" after it is fine),
// or whose inode (the fifth field) is `shim_inode` when that is not 0 (the shim the agent resolved,
// under whatever name); nullopt for an empty text (a process being torn down, or a kernel thread).
// It tells a process that dropped LD_PRELOAD (re-exec, a static binary) from one that did not; a
// process that maps a file of that name or inode itself passes (a naive bypass is what it catches).
// Example: "7f1c2a000000-7f1c2a020000 r-xp 00000000 fd:01 4242 /opt/x/lib/libtessera-shim.so\n"
// -> true; "55d0c0000000-55d0c0001000 r--p 00000000 fd:01 17 /usr/bin/python3.11\n" -> false.
std::optional<bool> MapsHoldTheShim(std::string_view maps, uint64_t shim_inode = 0);

}  // namespace tessera::node
