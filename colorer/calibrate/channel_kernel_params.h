// The parameter block of the channel-map kernel (channel_kernels.cu), shared by the device code
// (nvcc) and the host code that launches it (g++), like kernel_params.h.
//
// Contract:
// - A plain C struct of 64-bit and 32-bit fields, passed by value as the only kernel parameter;
//   identical layout on x86-64 and nvptx64 (static_assert below). No CUDA headers here.
// - The subset a reader streams: in every chunk of its list, the granules (2^granule_shift bytes
//   each) whose index g in [0, 2^log2_granules) has parity(g & masks[j]) == bit j of `parities`
//   for every j < num_constraints. masks[j] must have bit pivots[j] set, no other mask may have
//   that bit, and pivots must ascend (a reduced basis, ordered by pivot): the kernel then
//   enumerates the subset directly, 2^(log2_granules - num_constraints) granules per chunk.

#ifndef MISSILE_COLORER_CALIBRATE_CHANNEL_KERNEL_PARAMS_H_
#define MISSILE_COLORER_CALIBRATE_CHANNEL_KERNEL_PARAMS_H_

namespace missile::calibrate {

inline constexpr unsigned kSubsetBlockThreads = 256;
inline constexpr unsigned kMaxSubsetConstraints = 4;
// 16-byte loads each thread keeps in flight per step.
inline constexpr unsigned kSubsetUnroll = 4;

struct SubsetParams {
  unsigned long long chunk_list;  // device array of 2^log2_chunks chunk base addresses
  unsigned long long rounds;      // passes over the subset (the aggressor's upper bound)
  unsigned long long zero;        // always 0; opaque to the compiler
  unsigned long long stop_flag;   // aggressor: int, non-zero = stop (0 for a plain reader)
  unsigned long long timed_out;   // aggressor: unsigned counter of blocks stopped by max_ns
  unsigned long long sink;        // written only to defeat dead-code removal
  unsigned long long max_ns;      // aggressor: per-block run time bound (globaltimer)
  unsigned masks[kMaxSubsetConstraints];
  unsigned pivots[kMaxSubsetConstraints];
  unsigned parities;
  unsigned num_constraints;
  unsigned log2_chunks;
  unsigned log2_granules;  // granules per chunk, log2 (13: 2 MiB of 256 B)
  unsigned granule_shift;  // bytes per granule, log2 (>= 7: whole 128-byte lines)
  int discard;             // 1: discard each line from L2 after reading it (forces DRAM)
  int aggressor;           // 1: poll stop_flag and max_ns
  unsigned pad;
};

#ifdef __CUDACC__
#define MISSILE_HOST_DEVICE __host__ __device__
#else
#define MISSILE_HOST_DEVICE
#endif

// The granule index of the subset's n-th granule in a chunk (n in [0, 2^(log2_granules -
// num_constraints))): zeros are inserted at the pivots (ascending), then each pivot bit is set
// so that the parity of its mask comes out as wanted (no other mask sees a pivot bit). Shared
// by the kernel and the unit test that checks it enumerates exactly the subset.
MISSILE_HOST_DEVICE inline unsigned SubsetGranule(const SubsetParams& p, unsigned n) {
  unsigned g = n;
  for (unsigned j = 0; j < kMaxSubsetConstraints; ++j) {
    if (j < p.num_constraints) {
      const unsigned pv = p.pivots[j];
      g = ((g >> pv) << (pv + 1)) | (g & ((1u << pv) - 1u));
    }
  }
  for (unsigned j = 0; j < kMaxSubsetConstraints; ++j) {
    if (j < p.num_constraints) {
#ifdef __CUDA_ARCH__
      const unsigned parity = static_cast<unsigned>(__popc(g & p.masks[j])) & 1u;
#else
      const unsigned parity = static_cast<unsigned>(__builtin_parity(g & p.masks[j]));
#endif
      if (parity != ((p.parities >> j) & 1u)) g ^= 1u << p.pivots[j];
    }
  }
  return g;
}

static_assert(sizeof(SubsetParams) == 7 * 8 + 2 * 4 * kMaxSubsetConstraints + 8 * 4,
              "SubsetParams layout");

}  // namespace missile::calibrate

#endif  // MISSILE_COLORER_CALIBRATE_CHANNEL_KERNEL_PARAMS_H_
