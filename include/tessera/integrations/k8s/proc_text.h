// What the NVML backstop (dra_backstop.h) reads about a process from /proc: its pod, from the
// cgroup the kubelet put it in (/proc/<pid>/cgroup), and its device-plugin slot, from the tenant
// file mounted into its container (/proc/<pid>/mountinfo). Pure functions over the kernel's text,
// apart from the rest of the module (no gRPC, no NVML) so that tests/fuzz/mountinfo_fuzzer can
// compile them alone. Thread-safe (no state).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tessera::k8s {

// The pod uid in a /proc/<pid>/cgroup text (any line, cgroup v1 or v2), with '-' separators;
// nullopt when the process is in no pod's cgroup. Examples:
//   "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1b2c3d4e_0000_4000_8000_
//    000000000001.slice/cri-containerd-ab12.scope" -> "1b2c3d4e-0000-4000-8000-000000000001"
//   "12:memory:/kubepods/besteffort/pod1b2c3d4e-0000-4000-8000-000000000001/ab12" -> the same uid
//   "0::/user.slice/user-1000.slice/session-2.scope" -> nullopt
std::optional<std::string> PodUidOfCgroup(std::string_view cgroup_text);

// The last path component of the root of the (last, i.e. topmost) mount at `mount_point` in a
// /proc/<pid>/mountinfo text, with mountinfo's octal escapes undone and the "//deleted" mark of a
// file replaced since it was mounted dropped (a restarted plugin rewrites the tenant files: the
// containers' mounts still name them); nullopt when nothing is mounted there. Fields are split at
// ' ' only, as the kernel writes them (it escapes ' ', '\t', '\n' and '\\' in a path as \ooo;
// a '\v' or '\r' is part of the path). Example:
//   "812 790 259:1 /tessera/device-plugin/tenants/GPU-aa__0 /run/tessera/node/tenant ro,relatime
//    - ext4 /dev/nvme0n1p1 rw", mount point "/run/tessera/node/tenant" -> "GPU-aa__0"
std::optional<std::string> SlotFileOfMountinfo(std::string_view mountinfo, std::string_view mount_point);

}  // namespace tessera::k8s
