// MeasureDevice: the seam between the calibration measurements (pure logic: which chunks, how
// often, what the numbers mean) and the GPU that runs the reader kernels (gpu.h, the CUDA
// driver). Tests drive the measurements with a model device instead.
//
// Contract:
// - Chunks are numbered 0..chunk_count()-1 in allocation order; a chunk list names chunks by
//   these indices. Two list slots (0 and 1) hold the sets the readers stream over.
// - A reader launch streams its list's chunks cyclically with `blocks` blocks of kBlockThreads
//   threads for `steps` steps; it reads exactly BytesRead(launch) bytes (kernel_params.h).
// - Times are GPU milliseconds measured by the device (CUDA events on a real GPU).
// - Every call returns an error instead of hanging; after a DEADLINE_EXCEEDED or INTERNAL error
//   the device may be unusable and the caller should stop.
// - Not thread-safe: one thread drives a device.

#ifndef MISSILE_COLORER_CALIBRATE_MEASURE_DEVICE_H_
#define MISSILE_COLORER_CALIBRATE_MEASURE_DEVICE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "chunk_sets.h"
#include "kernel_params.h"
#include "report.h"

namespace missile::calibrate {

struct DeviceInfo {
  GpuIdentity identity;
  int ordinal = 0;
  int sm_count = 0;
  int cc_major = 0;
  int cc_minor = 0;
  uint64_t l2_bytes = 0;
  uint64_t total_bytes = 0;
  int clock_khz = 0;  // SM clock (cycles of the latency probe)
};

struct ReadLaunch {
  int list = 0;  // 0 or 1
  int blocks = 1;
  uint64_t steps = 1;    // the victim's steps (the aggressor runs until the victim ends)
  bool discard = false;  // discard each line from L2 after reading it (forces DRAM reads)
};

inline uint64_t BytesRead(const ReadLaunch& r) {
  return r.steps * kUnroll * kVecBytes * kBlockThreads * static_cast<uint64_t>(r.blocks);
}

class MeasureDevice {
 public:
  static constexpr int kLists = 2;
  virtual ~MeasureDevice() = default;

  virtual const DeviceInfo& info() const = 0;
  // Resident blocks of kBlockThreads per SM for both stream kernels (the smaller occupancy).
  virtual int blocks_per_sm() const = 0;
  virtual uint32_t chunk_count() const = 0;
  // The chunk's device (virtual) address; chunk_bytes() = info().identity.granularity_bytes.
  virtual uint64_t chunk_address(uint32_t chunk) const = 0;

  // Loads `chunks` (non-empty, valid indices) into list slot `list`.
  virtual absl::Status SetList(int list, const ChunkList& chunks) = 0;
  // One launch of the reader alone; its GPU time in ms.
  virtual absl::StatusOr<double> TimeRead(const ReadLaunch& reader) = 0;
  // The victim's GPU time in ms while the aggressor (on the other list) streams concurrently
  // from before the victim starts until after it ends. FAILED_PRECONDITION when the two did not
  // overlap (the aggressor stopped on its time bound).
  virtual absl::StatusOr<double> TimeReadUnder(const ReadLaunch& victim,
                                               const ReadLaunch& aggressor) = 0;
  // Per probe address (8-byte aligned, inside a chunk): SM cycles for `iters` dependent L2-hit
  // loads of that word, by one thread.
  virtual absl::StatusOr<std::vector<uint64_t>> ChaseCycles(const std::vector<uint64_t>& probes,
                                                            uint32_t iters) = 0;
};

}  // namespace missile::calibrate

#endif  // MISSILE_COLORER_CALIBRATE_MEASURE_DEVICE_H_
