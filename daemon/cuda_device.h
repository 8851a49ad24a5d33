// One GPU as the daemon sees it: its identity, and the physical VRAM blocks the daemon creates
// on it (the BlockSource behind the VRAM pool).
//
// Each block is made with cuMemCreate (pinned device memory, exportable as a POSIX file
// descriptor) and exported once. The daemon maps it read-write into its own address space the
// first time it scrubs (zeroes) it, on its way back from a tenant: mapping it at creation would
// put a map and an access change on the allocating tenant's time. Tenants receive a duplicate of the
// exported descriptor over the side channel, import it and map it themselves; the physical
// memory lives until every handle and mapping (the daemon's and the tenants') is gone.
// Thread-safety: every method may be called from any thread; the device's primary context is
// made current on the calling thread as needed.
#ifndef MISSILE_DAEMON_CUDA_DEVICE_H_
#define MISSILE_DAEMON_CUDA_DEVICE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "missile/colorer/channel_set.h"
#include "gpu.h"
#include "vram_pool.h"

namespace missile::daemon {

// Initialises the driver once; the number of devices.
absl::StatusOr<int> CudaDeviceCount();

class CudaDevice : public BlockSource {
 public:
  // The colours of a new block, given the block's handle and size. Defaults to colour 0.
  using ColourFn = std::function<colorer::ColourSet(uint64_t handle, uint64_t bytes)>;

  static absl::StatusOr<std::unique_ptr<CudaDevice>> Open(int ordinal, ColourFn colours = {});
  ~CudaDevice() override;

  const DeviceInfo& info() const { return info_; }
  // Replaces the colour function; call before the first Create.
  void set_colours(ColourFn colours) { colours_ = std::move(colours); }

  absl::StatusOr<PhysicalBlock> Create(uint64_t bytes) override;
  void Destroy(const PhysicalBlock& block) override;
  absl::Status Scrub(const PhysicalBlock& block) override;

  // A duplicate of a live block's exported descriptor (the caller closes it).
  absl::StatusOr<int> DuplicateDescriptor(const PhysicalBlock& block) override;

 private:
  struct Mapped {
    int fd = -1;
    uint64_t va = 0;  // the daemon's mapping, 0 until the block is first scrubbed
    uint64_t bytes = 0;
  };

  CudaDevice() = default;
  absl::Status MakeCurrent() const;
  void DestroyLocked(uint64_t handle, const Mapped& m);
  // Maps the block read-write into the daemon's address space, for scrubbing.
  absl::StatusOr<uint64_t> MapForScrub(uint64_t handle, uint64_t bytes) const;

  DeviceInfo info_;
  void* context_ = nullptr;  // CUcontext of the primary context
  void* stream_ = nullptr;   // CUstream for scrubbing
  ColourFn colours_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, Mapped> blocks_ ABSL_GUARDED_BY(mu_);
};

}  // namespace missile::daemon

#endif  // MISSILE_DAEMON_CUDA_DEVICE_H_
