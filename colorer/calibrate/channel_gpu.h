// ChannelGpu: the ChannelProbeDevice backed by a real GPU through the CUDA driver API (no
// cudart): the subset reader of channel_kernels.cu, timed with CUDA events.
//
// Contract:
// - Create needs a current context (Gpu::Open made the device's primary context current) and
//   must stay on that thread, like Gpu; it loads its own module from the embedded PTX and owns
//   its streams, events and buffers, released by the destructor.
// - The chunks it reads are owned by the caller (Gpu::AllocateChunks) and must outlive it.
// - No call waits longer than wait_timeout_s for the GPU (DEADLINE_EXCEEDED: a stuck kernel);
//   the aggressor stops on a flag the victim's stream sets, or after 2 s (an error: the two did
//   not overlap). Driver errors name the call and the CUDA error.
// - Not thread-safe.

#ifndef MISSILE_COLORER_CALIBRATE_CHANNEL_GPU_H_
#define MISSILE_COLORER_CALIBRATE_CHANNEL_GPU_H_

#include <memory>

#include "absl/strings/string_view.h"
#include "channel_scan.h"

namespace missile::calibrate {

class ChannelGpu final : public ChannelProbeDevice {
 public:
  static absl::StatusOr<std::unique_ptr<ChannelGpu>> Create(int sm_count, uint64_t chunk_bytes,
                                                            double wait_timeout_s,
                                                            absl::string_view ptx);
  ~ChannelGpu() override;
  ChannelGpu(const ChannelGpu&) = delete;
  ChannelGpu& operator=(const ChannelGpu&) = delete;

  int sm_count() const override;
  int blocks_per_sm() const override;
  uint64_t chunk_bytes() const override;
  absl::Status SetChunks(int list, const std::vector<uint64_t>& chunk_addresses) override;
  absl::StatusOr<double> TimeSubset(const SubsetLaunch& reader) override;
  absl::StatusOr<double> TimeSubsetUnder(const SubsetLaunch& victim,
                                         const SubsetLaunch& aggressor) override;

 private:
  struct State;
  explicit ChannelGpu(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace missile::calibrate

#endif  // MISSILE_COLORER_CALIBRATE_CHANNEL_GPU_H_
