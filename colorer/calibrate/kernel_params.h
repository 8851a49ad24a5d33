// The parameter blocks of the calibration kernels (kernels.cu), shared by the device code (nvcc)
// and the host code that launches them (g++): one definition, so the layouts cannot drift.
//
// Contract:
// - Plain C structs of 64-bit and 32-bit fields only, passed by value as the single kernel
//   parameter; identical layout on x86-64 and nvptx64 (checked by the static_asserts below).
// - Device addresses travel as unsigned long long (CUdeviceptr on the host).
// - No CUDA headers here: this file is included by pure host code too.

#ifndef MISSILE_COLORER_CALIBRATE_KERNEL_PARAMS_H_
#define MISSILE_COLORER_CALIBRATE_KERNEL_PARAMS_H_

namespace missile::calibrate {

// Threads per block of the streaming kernels.
inline constexpr unsigned kBlockThreads = 256;
// Independent 16-byte loads each thread keeps in flight per step.
inline constexpr unsigned kUnroll = 4;
inline constexpr unsigned kVecBytes = 16;
// The L2 line the discard instruction works on (PTX ISA: discard.global.L2 size must be 128).
inline constexpr unsigned kLineBytes = 128;

// A reader streams an endless cyclic sequence over a chunk list: the flattened index space is
// chunk-major (chunk k's 16-byte vector j is index k * vecs_per_chunk + j); thread t starts at
// index t and advances by the grid's thread count, kUnroll loads per step.
struct StreamParams {
  unsigned long long chunk_list;  // device array of num_chunks chunk base addresses
  unsigned long long steps;       // victim: steps to run; aggressor: upper bound (0 = none)
  unsigned long long zero;        // always 0; opaque to the compiler (orders discard after use)
  unsigned long long stop_flag;   // aggressor: int, non-zero = stop (0 for the victim)
  unsigned long long timed_out;   // aggressor: unsigned counter of blocks stopped by max_ns
  unsigned long long sink;        // unsigned long long; written only to defeat dead-code removal
  unsigned long long max_ns;      // aggressor: per-block run time bound (globaltimer)
  unsigned num_chunks;
  unsigned log2_vecs_per_chunk;  // chunk bytes = 16 << log2_vecs_per_chunk
  unsigned stride_chunks_mod;    // ((grid threads) >> log2_vecs_per_chunk) % num_chunks
  int discard;                   // 1: discard each line from L2 after reading it (forces DRAM)
};

// One thread chases self-pointing words: probe i's word holds its own address, so each load
// depends on the one before and hits the same L2 line (ld.global.cg skips L1).
struct ChaseParams {
  unsigned long long probes;  // device array of num_probes word addresses (8-byte aligned)
  unsigned long long cycles;  // device array of num_probes: clock64 cycles for `iters` loads
  unsigned long long sink;
  unsigned num_probes;
  unsigned iters;
};

static_assert(sizeof(StreamParams) == 7 * 8 + 4 * 4, "StreamParams layout");
static_assert(sizeof(ChaseParams) == 3 * 8 + 2 * 4, "ChaseParams layout");

}  // namespace missile::calibrate

#endif  // MISSILE_COLORER_CALIBRATE_KERNEL_PARAMS_H_
