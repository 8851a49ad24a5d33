#include "missile/common/shm_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

namespace missile::shm {
namespace {

constexpr int kSizeSeals = F_SEAL_SHRINK | F_SEAL_GROW;
constexpr int kWriteSeals = F_SEAL_FUTURE_WRITE | F_SEAL_SEAL;

absl::Status Errno(const std::string& what) {
  return absl::InternalError(what + ": " + strerror(errno));
}

}  // namespace

ShmRegion::ShmRegion(ShmRegion&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

ShmRegion& ShmRegion::operator=(ShmRegion&& other) noexcept {
  if (this != &other) {
    Reset();
    fd_ = std::exchange(other.fd_, -1);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

ShmRegion::~ShmRegion() { Reset(); }

void ShmRegion::Reset() {
  if (data_ != nullptr) munmap(data_, size_);
  if (fd_ >= 0) close(fd_);
  data_ = nullptr;
  fd_ = -1;
  size_ = 0;
}

absl::StatusOr<ShmRegion> ShmRegion::Create(const char* name, size_t bytes, Access access) {
  if (bytes == 0) return absl::InvalidArgumentError("a shared region needs a size");
  ShmRegion r;
  r.fd_ = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (r.fd_ < 0) return Errno(std::string("memfd_create ") + name);
  if (ftruncate(r.fd_, static_cast<off_t>(bytes)) != 0) {
    return Errno(std::string("sizing ") + name);
  }
  if (fcntl(r.fd_, F_ADD_SEALS, kSizeSeals) != 0) return Errno(std::string("sealing ") + name);
  const int prot = access == Access::kReadWrite ? PROT_READ | PROT_WRITE : PROT_READ;
  void* p = mmap(nullptr, bytes, prot, MAP_SHARED, r.fd_, 0);
  if (p == MAP_FAILED) return Errno(std::string("mapping ") + name);
  r.data_ = p;
  r.size_ = bytes;
  return r;
}

absl::StatusOr<ShmRegion> ShmRegion::Attach(int fd, size_t bytes, Access access) {
  ShmRegion r;
  r.fd_ = fd;
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) return absl::InvalidArgumentError("not a descriptor");
  if (!S_ISREG(st.st_mode) || static_cast<size_t>(st.st_size) != bytes) {
    return absl::InvalidArgumentError("shared region of " + std::to_string(st.st_size) +
                                      " bytes, expected " + std::to_string(bytes));
  }
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & kSizeSeals) != kSizeSeals) {
    return absl::FailedPreconditionError("shared region can still change size");
  }
  const int prot = access == Access::kReadWrite ? PROT_READ | PROT_WRITE : PROT_READ;
  void* p = mmap(nullptr, bytes, prot, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return Errno("mapping a shared region");
  r.data_ = p;
  r.size_ = bytes;
  return r;
}

absl::Status ShmRegion::SealWrites() {
  if (fd_ < 0) return absl::FailedPreconditionError("no region");
  if (WritesSealed(fd_)) return absl::OkStatus();
  if (fcntl(fd_, F_ADD_SEALS, kWriteSeals) != 0) return Errno("sealing a shared region");
  return absl::OkStatus();
}

absl::Status ShmRegion::FreezeSeals() {
  if (fd_ < 0) return absl::FailedPreconditionError("no region");
  if (fcntl(fd_, F_ADD_SEALS, F_SEAL_SEAL) != 0) return Errno("sealing a shared region");
  return absl::OkStatus();
}

bool ShmRegion::WritesSealed(int fd) {
  const int seals = fcntl(fd, F_GET_SEALS);
  constexpr int kAll = kSizeSeals | kWriteSeals;
  return seals >= 0 && (seals & kAll) == kAll;
}

absl::StatusOr<int> ShmRegion::Dup() const {
  const int fd = fcntl(fd_, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return Errno("duplicating a shared region's descriptor");
  return fd;
}

}  // namespace missile::shm
