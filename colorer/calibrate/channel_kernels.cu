// The channel-map kernel of missile-calibrate --channel-map, compiled to PTX for compute_90 at
// build time (nvcc -ptx), embedded and JIT-compiled by the driver like kernels.cu.
//
// missile_subset_read streams the subset of granules that channel_kernel_params.h describes, in
// every chunk of its list, `rounds` times, 16-byte ld.global.cg loads (L1 bypassed), optionally
// discarding every line from L2 after reading it so the next read goes to DRAM. As an aggressor
// it polls a stop flag and a time bound every 16 steps. Every loop is bounded by `rounds`.

#include "channel_kernel_params.h"

using missile::calibrate::kSubsetUnroll;
using missile::calibrate::SubsetGranule;
using missile::calibrate::SubsetParams;

namespace {

__device__ __forceinline__ unsigned long long GlobalTimerNs() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// See kernels.cu: a weak write of an indeterminate value; the readers never use the values.
__device__ __forceinline__ void DiscardL2(const void* line) {
  asm volatile("discard.global.L2 [%0], 128;" ::"l"(line) : "memory");
}

}  // namespace

extern "C" __global__ void __launch_bounds__(missile::calibrate::kSubsetBlockThreads)
    missile_subset_read(SubsetParams p) {
  const unsigned long long* __restrict__ chunks =
      reinterpret_cast<const unsigned long long*>(p.chunk_list);
  const unsigned vec_shift = p.granule_shift - 4;  // 16-byte vectors per granule, log2
  const unsigned free_bits = p.log2_granules - p.num_constraints;
  const unsigned long long per_pass = 1ull << (p.log2_chunks + free_bits + vec_shift);
  const unsigned long long total = per_pass * p.rounds;
  const unsigned long long threads = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  unsigned long long idx = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  // Grid strides are multiples of 256 threads and a granule has 8..2^k vectors, so a thread
  // always reads the same vector slot of its granules: slot % 8 == 0 starts a 128-byte line.
  const bool discarder = p.discard != 0 && ((idx & ((1ull << vec_shift) - 1)) % 8) == 0;
  const unsigned long long start = p.aggressor ? GlobalTimerNs() : 0;
  bool stopped = p.aggressor == 0;
  uint4 acc = make_uint4(0, 0, 0, 0);
  for (unsigned long long step = 0; idx < total; ++step) {
    if (p.aggressor && (step & 15) == 0) {
      if (*reinterpret_cast<const volatile int*>(p.stop_flag) != 0) {
        stopped = true;
        break;
      }
      if (GlobalTimerNs() - start > p.max_ns) break;
    }
    const uint4* address[kSubsetUnroll];
    bool valid[kSubsetUnroll];
#pragma unroll
    for (unsigned j = 0; j < kSubsetUnroll; ++j) {
      const unsigned long long i = idx + j * threads;
      valid[j] = i < total;
      const unsigned long long v = i & (per_pass - 1);
      const unsigned slot = static_cast<unsigned>(v & ((1ull << vec_shift) - 1));
      const unsigned long long rest = v >> vec_shift;
      const unsigned g = SubsetGranule(p, static_cast<unsigned>(rest & ((1ull << free_bits) - 1)));
      const unsigned c = static_cast<unsigned>(rest >> free_bits);
      address[j] = reinterpret_cast<const uint4*>(
          __ldg(&chunks[c]) + (static_cast<unsigned long long>(g) << p.granule_shift) +
          static_cast<unsigned long long>(slot) * 16);
    }
    uint4 v[kSubsetUnroll];
#pragma unroll
    for (unsigned j = 0; j < kSubsetUnroll; ++j) {
      v[j] = valid[j] ? __ldcg(address[j]) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (unsigned j = 0; j < kSubsetUnroll; ++j) {
      acc.x ^= v[j].x;
      acc.y ^= v[j].y;
      acc.z ^= v[j].z;
      acc.w ^= v[j].w;
    }
    if (discarder) {
      // The address depends on the loaded data (through the runtime zero), so the discard
      // cannot overtake its own load.
#pragma unroll
      for (unsigned j = 0; j < kSubsetUnroll; ++j) {
        if (valid[j]) DiscardL2(reinterpret_cast<const char*>(address[j]) + (v[j].x & p.zero));
      }
    }
    idx += kSubsetUnroll * threads;
  }
  if (p.aggressor && !stopped && threadIdx.x == 0) {
    atomicAdd(reinterpret_cast<unsigned*>(p.timed_out), 1u);
  }
  if ((acc.x ^ acc.y ^ acc.z ^ acc.w) == 0x9e3779b9u && p.zero == 1) {
    *reinterpret_cast<unsigned long long*>(p.sink) = acc.x;
  }
}

// Sets *flag = 1 (stream-ordered after the victim): the aggressor's stop signal.
extern "C" __global__ void missile_channel_set_flag(unsigned long long flag) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    atomicExch(reinterpret_cast<int*>(flag), 1);
    __threadfence_system();
  }
}
