// Shared-memory regions between missiled and tenant processes: memfds of a fixed size that
// no holder of a descriptor can resize (a file that shrinks under a mapping makes every process
// that reads it die of SIGBUS), optionally made read-only for every later mapping.
//
// Who may write what is decided by seals on the file, not by trust in the processes that hold
// descriptors of it:
//   F_SEAL_SHRINK | F_SEAL_GROW  set by Create: the size never changes again.
//   F_SEAL_FUTURE_WRITE          set by SealWrites once the writer has its one writable mapping:
//                                from then on every new mapping is read-only, write(2) and
//                                hole punching fail, whoever holds a descriptor. The writer's
//                                mapping stays writable.
//   F_SEAL_SEAL                  set with the write seal: nothing can be added or removed after.
// Attach maps a descriptor it was given after checking the file's size, so a file of another
// size (a peer's mistake or malice) is refused rather than read past its end.
// Thread-safety: a ShmRegion is owned by one object; its methods are not synchronised, but the
// mapped memory is shared and its words are read and written as atomics by their users.
#ifndef MISSILE_COMMON_SHM_REGION_H_
#define MISSILE_COMMON_SHM_REGION_H_

#include <cstddef>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace missile::shm {

enum class Access { kReadOnly, kReadWrite };

class ShmRegion {
 public:
  ShmRegion() = default;
  ShmRegion(ShmRegion&& other) noexcept;
  ShmRegion& operator=(ShmRegion&& other) noexcept;
  ShmRegion(const ShmRegion&) = delete;
  ShmRegion& operator=(const ShmRegion&) = delete;
  // Unmaps and closes.
  ~ShmRegion();

  // A new zero-filled memfd named `name` (shown in /proc/PID/fd as /memfd:NAME) of `bytes`,
  // sealed against resizing, mapped with `access` (read-only: the creator reads what the one it
  // hands a writable descriptor to writes).
  static absl::StatusOr<ShmRegion> Create(const char* name, size_t bytes,
                                          Access access = Access::kReadWrite);
  // Maps `fd` (taken: closed on failure too) with `access`, after checking that the file is
  // exactly `bytes` long and can no longer change size (F_SEAL_SHRINK and F_SEAL_GROW), so no
  // other holder can make this mapping fault.
  static absl::StatusOr<ShmRegion> Attach(int fd, size_t bytes, Access access);

  // Makes every later mapping read-only and freezes the seals (F_SEAL_FUTURE_WRITE |
  // F_SEAL_SEAL); this object's own mapping keeps its access.
  absl::Status SealWrites();
  // Freezes the seals as they are (F_SEAL_SEAL): a region every holder may write, at its size.
  absl::Status FreezeSeals();
  // Whether `fd`'s file has the seals SealWrites sets (and the size seals).
  static bool WritesSealed(int fd);

  // A new descriptor of the same file (close-on-exec), the caller's to close.
  absl::StatusOr<int> Dup() const;

  void* data() const { return data_; }
  size_t size() const { return size_; }
  int fd() const { return fd_; }
  bool valid() const { return data_ != nullptr; }

 private:
  void Reset();

  int fd_ = -1;
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace missile::shm

#endif  // MISSILE_COMMON_SHM_REGION_H_
