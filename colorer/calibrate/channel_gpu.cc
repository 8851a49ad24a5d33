#include "channel_gpu.h"

#include <cuda.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "missile/common/cuda_status.h"
#include "missile/common/status_macros.h"

namespace missile::calibrate {
namespace {

// The aggressor's own bound; victim launches last milliseconds (channel_scan.h), so reaching it
// means the two kernels did not overlap.
constexpr double kAggressorMaxSeconds = 2.0;
// Control block: stop flag (int) at 0, aggressor time-out counter (unsigned) at 4, sink at 64.
constexpr size_t kControlBytes = 256;
constexpr size_t kSinkOffset = 64;
// Chunks a list may hold.
constexpr size_t kMaxListChunks = 1024;

absl::Status CudaError(absl::string_view what, CUresult r) {
  return CudaStatus(std::string_view(what.data(), what.size()), r,
                    {.describe = true, .name_stub_library = true, .unavailable_when_no_gpu = true});
}

absl::Status Check(CUresult r, absl::string_view what) {
  return r == CUDA_SUCCESS ? absl::OkStatus() : CudaError(what, r);
}

}  // namespace

struct ChannelGpu::State {
  int sm_count = 0;
  uint64_t chunk_bytes = 0;
  double wait_timeout_s = 10;
  CUmodule module = nullptr;
  CUfunction read = nullptr, set_flag = nullptr;
  CUstream victim_stream = nullptr, aggressor_stream = nullptr;
  CUevent start = nullptr, stop = nullptr, ready = nullptr;
  int blocks_per_sm = 0;
  CUdeviceptr lists[kLists] = {0, 0};
  uint32_t list_size[kLists] = {0, 0};
  CUdeviceptr control = 0;

  absl::Status Wait(CUstream stream, absl::string_view what) const {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_timeout_s);
    for (;;) {
      const CUresult r = cuStreamQuery(stream);
      if (r == CUDA_SUCCESS) return absl::OkStatus();
      if (r != CUDA_ERROR_NOT_READY) return CudaError(what, r);
      if (std::chrono::steady_clock::now() > deadline) {
        return absl::DeadlineExceededError(absl::StrCat(what, ": the GPU did not finish within ",
                                                        wait_timeout_s, " s (a stuck kernel?)"));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  absl::Status WaitAll(absl::string_view what) const {
    MISSILE_RETURN_IF_ERROR(Wait(victim_stream, what));
    return Wait(aggressor_stream, what);
  }

  absl::StatusOr<SubsetParams> Params(const SubsetLaunch& r) const {
    if (r.list < 0 || r.list >= kLists || list_size[r.list] == 0) {
      return absl::InvalidArgumentError(absl::StrCat("chunk list ", r.list, " is not loaded"));
    }
    if (r.blocks < 1 || r.rounds < 1) {
      return absl::InvalidArgumentError("a reader needs at least one block and one round");
    }
    if (r.granule_shift < 7 || r.granule_shift > 12) {
      return absl::InvalidArgumentError("granules must be 128 B..4 KiB");
    }
    SubsetParams p{};
    if (absl::Status s =
            FillSubsetConstraints(r.subset, std::countr_zero(chunk_bytes) - r.granule_shift, p);
        !s.ok()) {
      return s;
    }
    p.chunk_list = lists[r.list];
    p.rounds = r.rounds;
    p.sink = control + kSinkOffset;
    p.log2_chunks = static_cast<unsigned>(std::countr_zero(list_size[r.list]));
    p.granule_shift = static_cast<unsigned>(r.granule_shift);
    p.discard = r.discard ? 1 : 0;
    return p;
  }

  absl::Status Launch(unsigned blocks, CUstream stream, SubsetParams* params,
                      absl::string_view what) const {
    void* args[] = {params};
    return Check(
        cuLaunchKernel(read, blocks, 1, 1, kSubsetBlockThreads, 1, 1, 0, stream, args, nullptr),
        what);
  }

  absl::StatusOr<double> Elapsed() const {
    float ms = 0;
    if (absl::Status e = Check(cuEventElapsedTime(&ms, start, stop), "cuEventElapsedTime");
        !e.ok()) {
      return e;
    }
    return static_cast<double>(ms);
  }
};

ChannelGpu::ChannelGpu(std::unique_ptr<State> state) : state_(std::move(state)) {}

absl::StatusOr<std::unique_ptr<ChannelGpu>> ChannelGpu::Create(int sm_count, uint64_t chunk_bytes,
                                                               double wait_timeout_s,
                                                               absl::string_view ptx) {
  if (sm_count < 1 || !std::has_single_bit(chunk_bytes) || chunk_bytes < (uint64_t{1} << 11) ||
      chunk_bytes > (uint64_t{1} << 24)) {
    return absl::InvalidArgumentError(
        absl::StrCat("channel map: ", sm_count, " SMs, chunk of ", chunk_bytes,
                     " bytes (needs a power of two in 2 KiB..16 MiB)"));
  }
  auto st = std::make_unique<State>();
  st->sm_count = sm_count;
  st->chunk_bytes = chunk_bytes;
  st->wait_timeout_s = wait_timeout_s;
  std::unique_ptr<ChannelGpu> gpu(new ChannelGpu(std::move(st)));  // destructor cleans up
  State& g = *gpu->state_;
  const std::string text(ptx);
  char log[8192] = {};
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* values[] = {log, reinterpret_cast<void*>(static_cast<uintptr_t>(sizeof(log) - 1))};
  if (CUresult r = cuModuleLoadDataEx(&g.module, text.c_str(), 2, options, values);
      r != CUDA_SUCCESS) {
    absl::Status s = CudaError("cuModuleLoadDataEx (channel-map PTX)", r);
    return absl::Status(s.code(), absl::StrCat(s.message(), log[0] != 0 ? ": " : "", log));
  }
  absl::Status s = Check(cuModuleGetFunction(&g.read, g.module, "missile_subset_read"),
                         "cuModuleGetFunction(missile_subset_read)");
  if (s.ok()) {
    s = Check(cuModuleGetFunction(&g.set_flag, g.module, "missile_channel_set_flag"),
              "cuModuleGetFunction(missile_channel_set_flag)");
  }
  if (s.ok()) {
    s = Check(cuOccupancyMaxActiveBlocksPerMultiprocessor(&g.blocks_per_sm, g.read,
                                                          kSubsetBlockThreads, 0),
              "cuOccupancyMaxActiveBlocksPerMultiprocessor");
  }
  if (s.ok() && g.blocks_per_sm < 1) {
    s = absl::FailedPreconditionError("the subset reader cannot be resident on an SM");
  }
  if (s.ok()) s = Check(cuStreamCreate(&g.victim_stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  if (s.ok()) {
    s = Check(cuStreamCreate(&g.aggressor_stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  }
  if (s.ok()) s = Check(cuEventCreate(&g.start, CU_EVENT_DEFAULT), "cuEventCreate");
  if (s.ok()) s = Check(cuEventCreate(&g.stop, CU_EVENT_DEFAULT), "cuEventCreate");
  if (s.ok()) s = Check(cuEventCreate(&g.ready, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  if (s.ok()) s = Check(cuMemAlloc(&g.control, kControlBytes), "cuMemAlloc(control)");
  if (s.ok()) s = Check(cuMemsetD8(g.control, 0, kControlBytes), "cuMemsetD8(control)");
  for (CUdeviceptr& list : g.lists) {
    if (s.ok()) s = Check(cuMemAlloc(&list, kMaxListChunks * 8), "cuMemAlloc(chunk list)");
  }
  if (s.ok()) s = Check(cuCtxSynchronize(), "cuCtxSynchronize");
  if (!s.ok()) return s;
  return gpu;
}

ChannelGpu::~ChannelGpu() {
  State& g = *state_;
  // Best effort: after a stuck kernel the waits fail and the driver reclaims at exit.
  const bool idle = g.victim_stream == nullptr || g.aggressor_stream == nullptr ||
                    g.WaitAll("releasing the channel probe").ok();
  if (!idle) return;
  for (CUdeviceptr p : {g.lists[0], g.lists[1], g.control}) {
    if (p != 0) cuMemFree(p);
  }
  for (CUevent e : {g.start, g.stop, g.ready}) {
    if (e != nullptr) cuEventDestroy(e);
  }
  for (CUstream st : {g.victim_stream, g.aggressor_stream}) {
    if (st != nullptr) cuStreamDestroy(st);
  }
  if (g.module != nullptr) cuModuleUnload(g.module);
}

int ChannelGpu::sm_count() const { return state_->sm_count; }
int ChannelGpu::blocks_per_sm() const { return state_->blocks_per_sm; }
uint64_t ChannelGpu::chunk_bytes() const { return state_->chunk_bytes; }

absl::Status ChannelGpu::SetChunks(int list, const std::vector<uint64_t>& chunk_addresses) {
  State& g = *state_;
  if (list < 0 || list >= kLists) return absl::InvalidArgumentError("list slot out of range");
  if (chunk_addresses.empty() || chunk_addresses.size() > kMaxListChunks ||
      !std::has_single_bit(chunk_addresses.size())) {
    return absl::InvalidArgumentError(absl::StrCat("a chunk list needs a power-of-two count up to ",
                                                   kMaxListChunks, ", got ",
                                                   chunk_addresses.size()));
  }
  for (uint64_t a : chunk_addresses) {
    if (a == 0 || a % g.chunk_bytes != 0) {
      return absl::InvalidArgumentError(absl::StrCat("0x", absl::Hex(a), " is not a chunk base"));
    }
  }
  MISSILE_RETURN_IF_ERROR(g.WaitAll("SetChunks"));
  if (absl::Status s = Check(cuMemcpyHtoDAsync(g.lists[list], chunk_addresses.data(),
                                               chunk_addresses.size() * 8, g.victim_stream),
                             "cuMemcpyHtoDAsync(chunk list)");
      !s.ok()) {
    return s;
  }
  g.list_size[list] = static_cast<uint32_t>(chunk_addresses.size());
  return g.Wait(g.victim_stream, "copying a chunk list");
}

absl::StatusOr<double> ChannelGpu::TimeSubset(const SubsetLaunch& reader) {
  State& g = *state_;
  MISSILE_ASSIGN_OR_RETURN(SubsetParams p, g.Params(reader));
  absl::Status s = Check(cuEventRecord(g.start, g.victim_stream), "cuEventRecord");
  if (s.ok()) {
    s = g.Launch(static_cast<unsigned>(reader.blocks), g.victim_stream, &p,
                 "cuLaunchKernel(missile_subset_read)");
  }
  if (s.ok()) s = Check(cuEventRecord(g.stop, g.victim_stream), "cuEventRecord");
  if (s.ok()) s = g.Wait(g.victim_stream, "missile_subset_read");
  if (!s.ok()) return s;
  return g.Elapsed();
}

absl::StatusOr<double> ChannelGpu::TimeSubsetUnder(const SubsetLaunch& victim,
                                                   const SubsetLaunch& aggressor) {
  State& g = *state_;
  MISSILE_ASSIGN_OR_RETURN(SubsetParams v, g.Params(victim));
  MISSILE_ASSIGN_OR_RETURN(SubsetParams a, g.Params(aggressor));
  a.aggressor = 1;
  a.stop_flag = g.control;
  a.timed_out = g.control + 4;
  a.max_ns = static_cast<unsigned long long>(kAggressorMaxSeconds * 1e9);
  // A round bound far beyond max_ns at any bandwidth (20 TB/s), so the loop is bounded twice.
  const uint64_t pass_bytes =
      SubsetBytes(g.chunk_bytes, g.list_size[aggressor.list], aggressor.subset);
  a.rounds = static_cast<unsigned long long>(kAggressorMaxSeconds * 20e12 /
                                             static_cast<double>(pass_bytes)) +
             1;
  CUdeviceptr flag = g.control;
  // Order: reset the control words, start the aggressor, then (on the other stream, after the
  // reset) the timed victim and the kernel that sets the aggressor's stop flag.
  absl::Status s = Check(cuMemsetD32Async(g.control, 0, 2, g.aggressor_stream), "cuMemsetD32Async");
  if (s.ok()) s = Check(cuEventRecord(g.ready, g.aggressor_stream), "cuEventRecord");
  if (s.ok()) {
    s = g.Launch(static_cast<unsigned>(aggressor.blocks), g.aggressor_stream, &a,
                 "cuLaunchKernel(missile_subset_read aggressor)");
  }
  if (s.ok()) s = Check(cuStreamWaitEvent(g.victim_stream, g.ready, 0), "cuStreamWaitEvent");
  if (s.ok()) s = Check(cuEventRecord(g.start, g.victim_stream), "cuEventRecord");
  if (s.ok()) {
    s = g.Launch(static_cast<unsigned>(victim.blocks), g.victim_stream, &v,
                 "cuLaunchKernel(missile_subset_read victim)");
  }
  if (s.ok()) s = Check(cuEventRecord(g.stop, g.victim_stream), "cuEventRecord");
  if (s.ok()) {
    void* args[] = {&flag};
    s = Check(cuLaunchKernel(g.set_flag, 1, 1, 1, 32, 1, 1, 0, g.victim_stream, args, nullptr),
              "cuLaunchKernel(missile_channel_set_flag)");
  }
  if (s.ok()) s = g.WaitAll("victim under aggression");
  if (!s.ok()) return s;
  unsigned timed_out = 0;
  if (absl::Status e = Check(cuMemcpyDtoH(&timed_out, g.control + 4, sizeof(timed_out)),
                             "cuMemcpyDtoH(control)");
      !e.ok()) {
    return e;
  }
  if (timed_out != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(timed_out, " aggressor block(s) stopped on their ", kAggressorMaxSeconds,
                     " s bound before the victim ended: the two readers did not run concurrently"));
  }
  return g.Elapsed();
}

}  // namespace missile::calibrate
