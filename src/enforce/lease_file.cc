#include "tessera/enforce/lease_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace tessera::enforce {
namespace {

std::string Errno() { return std::strerror(errno); }

}  // namespace

StatusOr<LeaseFile> LeaseFile::Create(const std::string& path, int num_gpus) {
  if (num_gpus < 1 || num_gpus > kMaxGpus) {
    return InvalidArgumentError("lease file: num_gpus " + std::to_string(num_gpus) + " is not 1.." +
                                std::to_string(kMaxGpus));
  }
  const std::size_t bytes = sizeof(LeaseBoard) * static_cast<std::size_t>(num_gpus);
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) return InternalError("lease file '" + path + "': open: " + Errno());
  if (::fchmod(fd, 0666) != 0 || ::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    std::string err = Errno();
    ::close(fd);
    return InternalError("lease file '" + path + "': " + err);
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  std::string err = Errno();
  ::close(fd);
  if (p == MAP_FAILED) return InternalError("lease file '" + path + "': mmap: " + err);
  LeaseFile file;
  file.boards_ = static_cast<LeaseBoard*>(p);
  file.num_gpus_ = num_gpus;
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
  return file;
}

StatusOr<LeaseFile> LeaseFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return NotFoundError("lease file '" + path + "': open: " + Errno());
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
                                   std::to_string(sizeof(LeaseBoard)) + " bytes");
  }
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  std::string err = Errno();
  ::close(fd);
  if (p == MAP_FAILED) return InternalError("lease file '" + path + "': mmap: " + err);
  LeaseFile file;
  file.boards_ = static_cast<LeaseBoard*>(p);
  file.num_gpus_ = static_cast<int>(size / sizeof(LeaseBoard));
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

LeaseFile::LeaseFile(LeaseFile&& other) noexcept
    : boards_(std::exchange(other.boards_, nullptr)), num_gpus_(std::exchange(other.num_gpus_, 0)) {}

LeaseFile& LeaseFile::operator=(LeaseFile&& other) noexcept {
  if (this != &other) {
    if (boards_ != nullptr) ::munmap(boards_, sizeof(LeaseBoard) * static_cast<std::size_t>(num_gpus_));
    boards_ = std::exchange(other.boards_, nullptr);
    num_gpus_ = std::exchange(other.num_gpus_, 0);
  }
  return *this;
}

LeaseFile::~LeaseFile() {
  if (boards_ != nullptr) ::munmap(boards_, sizeof(LeaseBoard) * static_cast<std::size_t>(num_gpus_));
}

LeaseBoard* LeaseFile::Release() {
  num_gpus_ = 0;
  return std::exchange(boards_, nullptr);
}

}  // namespace tessera::enforce
