// Gpu: the MeasureDevice backed by one real GPU through the CUDA driver API (no cudart).
//
// Contract:
// - Open initialises the driver, retains the device's primary context (as missiled does) and
//   makes it current on the calling thread; every later call must come from that thread.
// - Chunks are allocated exactly as the daemon's pool does (daemon/cuda_device.cc): cuMemCreate
//   of one granularity-sized block (CU_MEM_ALLOC_GRANULARITY_RECOMMENDED, POSIX FD handle type
//   where supported), its own cuMemAddressReserve, cuMemMap, cuMemSetAccess read/write.
// - The kernels come from PTX (kernels.cu, compute_90) JIT-compiled by cuModuleLoadDataEx; a
//   device below compute capability 9.0 is FAILED_PRECONDITION.
// - The victim and the aggressor run in this one context on two non-blocking streams, so they
//   run concurrently (kernels of different processes would time-slice: docs/hardware/h200.md,
//   "Compute partitioning").
// - No call waits longer than wait_timeout_s for the GPU: a stuck kernel is DEADLINE_EXCEEDED
//   (the process should then exit). No driver / no device is UNAVAILABLE; a bad ordinal is
//   INVALID_ARGUMENT; out of memory is RESOURCE_EXHAUSTED; other driver errors INTERNAL, all
//   naming the failed call and the CUDA error.
// - Not thread-safe (see MeasureDevice).

#ifndef MISSILE_COLORER_CALIBRATE_GPU_H_
#define MISSILE_COLORER_CALIBRATE_GPU_H_

#include <memory>
#include <vector>

#include "absl/strings/string_view.h"
#include "measure_device.h"

namespace missile::calibrate {

class Gpu final : public MeasureDevice {
 public:
  static absl::StatusOr<std::unique_ptr<Gpu>> Open(int ordinal, double wait_timeout_s);
  ~Gpu() override;
  Gpu(const Gpu&) = delete;
  Gpu& operator=(const Gpu&) = delete;

  // Loads the kernels (PTX text) and sizes the grids from their occupancy.
  absl::Status LoadKernels(absl::string_view ptx);
  // Allocates `count` chunks (after LoadKernels) and fills them with a pattern.
  absl::Status AllocateChunks(uint32_t count);
  // Host time of cuMemCreate + reserve + map + access, per chunk, in microseconds.
  double allocate_us_per_chunk() const;

  const DeviceInfo& info() const override;
  int blocks_per_sm() const override;
  uint32_t chunk_count() const override;
  uint64_t chunk_address(uint32_t chunk) const override;
  absl::Status SetList(int list, const ChunkList& chunks) override;
  absl::StatusOr<double> TimeRead(const ReadLaunch& reader) override;
  absl::StatusOr<double> TimeReadUnder(const ReadLaunch& victim,
                                       const ReadLaunch& aggressor) override;
  absl::StatusOr<std::vector<uint64_t>> ChaseCycles(const std::vector<uint64_t>& probes,
                                                    uint32_t iters) override;

 private:
  struct State;
  explicit Gpu(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace missile::calibrate

#endif  // MISSILE_COLORER_CALIBRATE_GPU_H_
