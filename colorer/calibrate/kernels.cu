// The calibration kernels, compiled to PTX for compute_90 at build time (nvcc -ptx), embedded in
// missile-calibrate and JIT-compiled by the driver (cuModuleLoadDataEx). Driver API only: the
// entry points are extern "C" so the host finds them by name; each takes one parameter block
// from kernel_params.h.
//
// - missile_stream_read: the timed reader (a victim, or a bandwidth probe): `steps` steps.
// - missile_aggressor:   the same stream, until *stop_flag != 0 or max_ns have passed.
// - missile_set_flag:    sets *stop_flag = 1 (stream-ordered after the victim).
// - missile_chase_init / missile_chase: the single-thread L2 latency probe.

#include "kernel_params.h"

using missile::calibrate::ChaseParams;
using missile::calibrate::kUnroll;
using missile::calibrate::StreamParams;

namespace {

__device__ __forceinline__ unsigned long long GlobalTimerNs() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Invalidates the 128-byte L2 line at `line` without writing it back. Semantically a weak write
// of an indeterminate value (PTX ISA, "discard"): the readers never look at the values they
// load, and the next read of the line must come from DRAM. This is what lets a set of one or
// a few 2 MiB chunks (far smaller than the 60 MB L2, docs/hardware/h200.md, "The machine")
// load the memory channels instead of the L2.
__device__ __forceinline__ void DiscardL2(const void* line) {
  asm volatile("discard.global.L2 [%0], 128;" ::"l"(line) : "memory");
}

// Reads the SM clock only once `dep` has arrived: the xor with the runtime zero needs `dep`,
// and the clock read follows it in the same asm statement.
__device__ __forceinline__ long long ClockAfter(unsigned long long& dep, unsigned long long zero) {
  long long t;
  asm volatile(
      "xor.b64 %1, %1, %2;\n\t"
      "mov.u64 %0, %%clock64;"
      : "=l"(t), "+l"(dep)
      : "l"(zero)
      : "memory");
  return t;
}

__device__ __forceinline__ unsigned long long LoadCg(unsigned long long address) {
  unsigned long long v;
  asm volatile("ld.global.cg.u64 %0, [%1];" : "=l"(v) : "l"(address) : "memory");
  return v;
}

template <bool kAggressor>
__device__ __forceinline__ void Stream(const StreamParams& p) {
  const unsigned long long* __restrict__ chunks =
      reinterpret_cast<const unsigned long long*>(p.chunk_list);
  const unsigned long long threads = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  const unsigned long long t =
      static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const unsigned long long mask = (1ull << p.log2_vecs_per_chunk) - 1;
  const unsigned long long stride_off = threads & mask;
  unsigned chunk = static_cast<unsigned>((t >> p.log2_vecs_per_chunk) % p.num_chunks);
  unsigned long long off = t & mask;
  // Lanes whose vector starts a 128-byte line (grid strides are multiples of 256 threads, so
  // off % 8 == threadIdx.x % 8 throughout).
  const bool discarder = p.discard != 0 && (threadIdx.x % 8) == 0;
  uint4 acc = make_uint4(0, 0, 0, 0);
  const unsigned long long start = kAggressor ? GlobalTimerNs() : 0;
  bool stopped = !kAggressor;
  for (unsigned long long step = 0; step < p.steps; ++step) {
    if (kAggressor && (step & 15) == 0) {
      if (*reinterpret_cast<const volatile int*>(p.stop_flag) != 0) {
        stopped = true;
        break;
      }
      if (GlobalTimerNs() - start > p.max_ns) break;
    }
    const uint4* address[kUnroll];
#pragma unroll
    for (unsigned j = 0; j < kUnroll; ++j) {
      address[j] = reinterpret_cast<const uint4*>(__ldg(&chunks[chunk])) + off;
      off += stride_off;
      chunk += p.stride_chunks_mod + static_cast<unsigned>(off >> p.log2_vecs_per_chunk);
      off &= mask;
      if (chunk >= p.num_chunks) chunk -= p.num_chunks;
    }
    uint4 v[kUnroll];
#pragma unroll
    for (unsigned j = 0; j < kUnroll; ++j) v[j] = __ldcg(address[j]);
#pragma unroll
    for (unsigned j = 0; j < kUnroll; ++j) {
      acc.x ^= v[j].x;
      acc.y ^= v[j].y;
      acc.z ^= v[j].z;
      acc.w ^= v[j].w;
    }
    if (discarder) {
      // The address depends on the loaded data (through the runtime zero), so the discard
      // cannot overtake its own load.
#pragma unroll
      for (unsigned j = 0; j < kUnroll; ++j) {
        DiscardL2(reinterpret_cast<const char*>(address[j]) + (v[j].x & p.zero));
      }
    }
  }
  if (kAggressor && !stopped && threadIdx.x == 0) {
    atomicAdd(reinterpret_cast<unsigned*>(p.timed_out), 1u);
  }
  if ((acc.x ^ acc.y ^ acc.z ^ acc.w) == 0x9e3779b9u && p.zero == 1) {
    *reinterpret_cast<unsigned long long*>(p.sink) = acc.x;
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(missile::calibrate::kBlockThreads)
    missile_stream_read(StreamParams p) {
  Stream<false>(p);
}

extern "C" __global__ void __launch_bounds__(missile::calibrate::kBlockThreads)
    missile_aggressor(StreamParams p) {
  Stream<true>(p);
}

extern "C" __global__ void missile_set_flag(unsigned long long flag) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    atomicExch(reinterpret_cast<int*>(flag), 1);
    __threadfence_system();
  }
}

extern "C" __global__ void missile_chase_init(ChaseParams p) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < p.num_probes) {
    const unsigned long long address = reinterpret_cast<const unsigned long long*>(p.probes)[i];
    *reinterpret_cast<unsigned long long*>(address) = address;
  }
}

// One thread. Per probe: 4 warm-up loads (the line is then in L2), then `iters` dependent
// loads timed with clock64; cycles[i] = the elapsed cycles.
extern "C" __global__ void missile_chase(ChaseParams p) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  const unsigned long long* probes = reinterpret_cast<const unsigned long long*>(p.probes);
  unsigned long long* cycles = reinterpret_cast<unsigned long long*>(p.cycles);
  const unsigned long long zero = p.num_probes == 0xffffffffu ? 1 : 0;  // opaque zero
  unsigned long long sink = 0;
  for (unsigned i = 0; i < p.num_probes; ++i) {
    unsigned long long q = probes[i];
    for (int w = 0; w < 4; ++w) q = LoadCg(q);
    const long long t0 = ClockAfter(q, zero);
    for (unsigned k = 0; k < p.iters; ++k) q = LoadCg(q);
    const long long t1 = ClockAfter(q, zero);
    cycles[i] = static_cast<unsigned long long>(t1 - t0);
    sink += q;
  }
  if (sink == 1) *reinterpret_cast<unsigned long long*>(p.sink) = sink;
}
