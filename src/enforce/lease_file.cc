#include "tessera/enforce/lease_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <iterator>
#include <cstring>
#include <utility>

#include "tessera/enforce/fault_guard.h"

namespace tessera::enforce {
namespace {

std::string Errno() { return std::strerror(errno); }

std::size_t Bytes(int num_gpus) { return sizeof(LeaseBoard) * static_cast<std::size_t>(num_gpus); }

// The pages are split at 4 KiB; a kernel with larger pages cannot map one tenant's page alone.
Status CheckPageSize(const std::string& path) {
  const long page = ::sysconf(_SC_PAGESIZE);
  if (page <= 0 || kLeasePage % static_cast<std::size_t>(page) != 0) {
    return FailedPreconditionError("lease file '" + path + "': the system page size " + std::to_string(page) +
                                   " does not divide the board's " + std::to_string(kLeasePage) + "-byte pages");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<LeaseFile> LeaseFile::Create(const std::string& path, int num_gpus, const std::string& counters_dir) {
  if (num_gpus < 1 || num_gpus > kMaxGpus) {
    return InvalidArgumentError("lease file: num_gpus " + std::to_string(num_gpus) + " is not 1.." +
                                std::to_string(kMaxGpus));
  }
  TESSERA_RETURN_IF_ERROR(CheckPageSize(path));
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return InternalError("lease file '" + path + "': open: " + Errno());
  // 0644 whatever the umask: tenants read it; only the node side writes it.
  if (::fchmod(fd, 0644) != 0 || ::ftruncate(fd, static_cast<off_t>(Bytes(num_gpus))) != 0) {
    std::string err = Errno();
    ::close(fd);
    return InternalError("lease file '" + path + "': " + err);
  }
  void* p = ::mmap(nullptr, Bytes(num_gpus), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  std::string err = Errno();
  ::close(fd);
  if (p == MAP_FAILED) return InternalError("lease file '" + path + "': mmap: " + err);
  LeaseFile file;
  file.boards_ = static_cast<LeaseBoard*>(p);
  file.num_gpus_ = num_gpus;
  file.path_ = path;
  // The tenant pages are never the file's: zero pages in their place before the boards are
  // initialised, so that the file keeps its holes (2 of its 66 pages per board are written).
  for (int t = 0; t < kMaxTenants; ++t) TESSERA_RETURN_IF_ERROR(file.MapZeroPages(t));
  const uint64_t now = MonotonicNowNs();
  for (int g = 0; g < num_gpus; ++g) {
    LeaseBoard* out = nullptr;
    const LeaseBoardCheck check =
        InitLeaseBoard(&file.boards_[g], sizeof(LeaseBoard), static_cast<uint32_t>(g), now, &out);
    if (check != LeaseBoardCheck::kOk) {
      return InternalError("lease file '" + path + "': GPU " + std::to_string(g) + ": " +
                           LeaseBoardCheckName(check));
    }
  }
  if (!counters_dir.empty()) {
    file.counters_dir_ = counters_dir;
    TESSERA_RETURN_IF_ERROR(file.GuardTenantPages());
    for (int t = 0; t < kMaxTenants; ++t) TESSERA_RETURN_IF_ERROR(file.RemapTenant(t));
  }
  return file;
}

Status LeaseFile::GuardTenantPages() {
  // The tenants' pages are their counters files', which they may truncate (fault_guard.h): the
  // whole mapping is guarded, so that the node side reads zeros there instead of dying of SIGBUS.
  const int id = FaultGuard::Register(boards_, Bytes(num_gpus_), 0);
  if (id < 0) {
    return ResourceExhaustedError("lease file '" + path_ + "': no room to guard the tenants' pages against truncation");
  }
  guard_plus_one_ = id + 1;
  return Status::Ok();
}

void LeaseFile::Unmap() {
  FaultGuard::Unregister(guard_plus_one_ - 1);
  guard_plus_one_ = 0;
  // One munmap covers the lease file's mapping and every page mapped over it.
  if (boards_ != nullptr) ::munmap(boards_, Bytes(num_gpus_));
  boards_ = nullptr;
}

StatusOr<LeaseFile> LeaseFile::Map(const std::string& path, bool writable) {
  TESSERA_RETURN_IF_ERROR(CheckPageSize(path));
  int fd = ::open(path.c_str(), (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    std::string msg = "lease file '" + path + "': open: " + std::strerror(e);
    if (e == EACCES || e == EPERM) return Status(StatusCode::kPermissionDenied, msg);
    return NotFoundError(msg);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    std::string err = Errno();
    ::close(fd);
    return InternalError("lease file '" + path + "': fstat: " + err);
  }
  const auto size = static_cast<std::size_t>(st.st_size);
  if (size == 0 || size % sizeof(LeaseBoard) != 0 || size / sizeof(LeaseBoard) > kMaxGpus) {
    ::close(fd);
    return FailedPreconditionError("lease file '" + path + "': size " + std::to_string(size) +
                                   " is not 1.." + std::to_string(kMaxGpus) + " boards of " +
                                   std::to_string(sizeof(LeaseBoard)) + " bytes (lease ABI version " +
                                   std::to_string(kLeaseAbiVersion) + ")");
  }
  void* p = ::mmap(nullptr, size, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
  std::string err = Errno();
  ::close(fd);
  if (p == MAP_FAILED) return InternalError("lease file '" + path + "': mmap: " + err);
  LeaseFile file;
  file.boards_ = static_cast<LeaseBoard*>(p);
  file.num_gpus_ = static_cast<int>(size / sizeof(LeaseBoard));
  file.path_ = path;
  for (int g = 0; g < file.num_gpus_; ++g) {
    LeaseBoard* out = nullptr;
    const LeaseBoardCheck check = AttachLeaseBoard(&file.boards_[g], sizeof(LeaseBoard), &out);
    if (check != LeaseBoardCheck::kOk) {
      return FailedPreconditionError("lease file '" + path + "': GPU " + std::to_string(g) + ": " +
                                     LeaseBoardCheckName(check));
    }
    if (out->header.gpu_index != static_cast<uint32_t>(g)) {
      return FailedPreconditionError("lease file '" + path + "': board " + std::to_string(g) +
                                     " says gpu_index " + std::to_string(out->header.gpu_index));
    }
  }
  return file;
}

StatusOr<LeaseFile> LeaseFile::Open(const std::string& path, const std::string& counters_dir, int only_gpu) {
  TESSERA_ASSIGN_OR_RETURN(LeaseFile file, Map(path, /*writable=*/true));
  if (only_gpu >= file.num_gpus_) {
    return InvalidArgumentError("lease file '" + path + "': GPU " + std::to_string(only_gpu) + " is not 0.." +
                                std::to_string(file.num_gpus_ - 1));
  }
  if (!counters_dir.empty()) {
    file.counters_dir_ = counters_dir;
    file.only_gpu_ = only_gpu;
    TESSERA_RETURN_IF_ERROR(file.GuardTenantPages());
    for (int t = 0; t < kMaxTenants; ++t) TESSERA_RETURN_IF_ERROR(file.RemapTenant(t));
  }
  return file;
}

StatusOr<LeaseFile> LeaseFile::OpenNodeLines(const std::string& path) { return Map(path, /*writable=*/false); }

StatusOr<LeaseFile> LeaseFile::OpenTenant(const std::string& path, const std::string& counters_path, int tenant) {
  if (tenant < 0 || tenant >= kMaxTenants) {
    return InvalidArgumentError("lease file '" + path + "': tenant " + std::to_string(tenant) + " is not 0.." +
                                std::to_string(kMaxTenants - 1));
  }
  TESSERA_ASSIGN_OR_RETURN(LeaseFile file, Map(path, /*writable=*/false));
  TESSERA_RETURN_IF_ERROR(file.MapTenantPages(tenant, counters_path, /*missing_is_zero=*/false));
  return file;
}

Status LeaseFile::RemapTenant(int tenant) {
  if (tenant < 0 || tenant >= kMaxTenants) {
    return InvalidArgumentError("lease file '" + path_ + "': tenant " + std::to_string(tenant) + " is not 0.." +
                                std::to_string(kMaxTenants - 1));
  }
  if (counters_dir_.empty()) {
    return FailedPreconditionError("lease file '" + path_ + "': opened without a counters folder");
  }
  return MapTenantPages(tenant, CountersFilePath(counters_dir_, tenant), /*missing_is_zero=*/true);
}

StatusOr<int> LeaseFile::RefreshTenants() {
  if (counters_dir_.empty()) {
    return FailedPreconditionError("lease file '" + path_ + "': opened without a counters folder");
  }
  int remapped = 0;
  for (int t = 0; t < kMaxTenants; ++t) {
    struct stat st {};
    const unsigned long long ino =
        ::stat(CountersFilePath(counters_dir_, t).c_str(), &st) == 0 ? static_cast<unsigned long long>(st.st_ino) : 0;
    if (ino == mapped_ino_[t]) continue;
    TESSERA_RETURN_IF_ERROR(RemapTenant(t));
    ++remapped;
  }
  return remapped;
}

Status LeaseFile::MapZeroPages(int tenant) {
  const int first = only_gpu_ >= 0 ? only_gpu_ : 0;
  const int last = only_gpu_ >= 0 ? only_gpu_ : num_gpus_ - 1;
  for (int g = first; g <= last; ++g) {
    void* at = &boards_[g].slots[tenant];
    if (::mmap(at, kLeasePage, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED) {
      return InternalError("lease file '" + path_ + "': tenant " + std::to_string(tenant) + ": mmap: " + Errno());
    }
  }
  mapped_ino_[tenant] = 0;
  return Status::Ok();
}

Status LeaseFile::MapTenantPages(int tenant, const std::string& counters_path, bool missing_is_zero) {
  const int first = only_gpu_ >= 0 ? only_gpu_ : 0;
  const int last = only_gpu_ >= 0 ? only_gpu_ : num_gpus_ - 1;
  const int fd = ::open(counters_path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    if (e == ENOENT && missing_is_zero) {
      // No tenant on this index: fresh zero pages (not the lease file's, which tenants may read).
      return MapZeroPages(tenant);
    }
    std::string msg = "lease file '" + path_ + "': tenant " + std::to_string(tenant) + "'s counters file '" +
                      counters_path + "': open: " + std::strerror(e);
    if (e == EACCES || e == EPERM) return Status(StatusCode::kPermissionDenied, msg);
    return NotFoundError(msg);
  }
  struct stat st {};
  const bool stat_ok = ::fstat(fd, &st) == 0;
  if (stat_ok && static_cast<std::size_t>(st.st_size) < sizeof(CounterSegment) && missing_is_zero) {
    // Node side: a file its tenant truncated reads as zeros, as none would (CheckCountersFile names
    // it); the node side still opens every other tenant's pages. Not mapped again until replaced.
    ::close(fd);
    TESSERA_RETURN_IF_ERROR(MapZeroPages(tenant));
    mapped_ino_[tenant] = static_cast<unsigned long long>(st.st_ino);
    return Status::Ok();
  }
  if (!stat_ok || static_cast<std::size_t>(st.st_size) < sizeof(CounterSegment)) {
    const std::string size = std::to_string(st.st_size);
    ::close(fd);
    return FailedPreconditionError("counters file '" + counters_path + "': size " + size + " is smaller than the " +
                                   std::to_string(sizeof(CounterSegment)) + " bytes of segment ABI version " +
                                   std::to_string(kSegmentAbiVersion) + " (no lease pages)");
  }
  for (int g = first; g <= last; ++g) {
    void* at = &boards_[g].slots[tenant];
    const off_t offset = static_cast<off_t>(kCounterLeaseOffset + static_cast<std::size_t>(g) * kLeasePage);
    if (::mmap(at, kLeasePage, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, offset) == MAP_FAILED) {
      std::string err = Errno();
      ::close(fd);
      return InternalError("lease file '" + path_ + "': counters file '" + counters_path + "': mmap: " + err);
    }
  }
  ::close(fd);
  mapped_ino_[tenant] = static_cast<unsigned long long>(st.st_ino);
  return Status::Ok();
}

LeaseFile::LeaseFile(LeaseFile&& other) noexcept
    : boards_(std::exchange(other.boards_, nullptr)),
      num_gpus_(std::exchange(other.num_gpus_, 0)),
      path_(std::move(other.path_)),
      counters_dir_(std::move(other.counters_dir_)),
      only_gpu_(other.only_gpu_),
      guard_plus_one_(std::exchange(other.guard_plus_one_, 0)) {
  std::copy(std::begin(other.mapped_ino_), std::end(other.mapped_ino_), std::begin(mapped_ino_));
}

LeaseFile& LeaseFile::operator=(LeaseFile&& other) noexcept {
  if (this != &other) {
    Unmap();
    boards_ = std::exchange(other.boards_, nullptr);
    guard_plus_one_ = std::exchange(other.guard_plus_one_, 0);
    num_gpus_ = std::exchange(other.num_gpus_, 0);
    path_ = std::move(other.path_);
    counters_dir_ = std::move(other.counters_dir_);
    only_gpu_ = other.only_gpu_;
    std::copy(std::begin(other.mapped_ino_), std::end(other.mapped_ino_), std::begin(mapped_ino_));
  }
  return *this;
}

LeaseFile::~LeaseFile() { Unmap(); }

LeaseBoard* LeaseFile::Release() {
  FaultGuard::Unregister(guard_plus_one_ - 1);  // only the shim keeps its mappings: nothing guarded there
  guard_plus_one_ = 0;
  num_gpus_ = 0;
  return std::exchange(boards_, nullptr);
}

}  // namespace tessera::enforce
