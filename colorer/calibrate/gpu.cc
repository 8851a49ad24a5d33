#include "gpu.h"

#include <cuda.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "missile/common/cuda_status.h"
#include "missile/common/status_macros.h"

namespace missile::calibrate {
namespace {

// The aggressor's own bound: it stops after this long even if nobody sets its flag. Victim
// runs last milliseconds (measure.h), so reaching it means the two kernels did not overlap.
constexpr double kAggressorMaxSeconds = 2.0;
// Probes per chase launch: 4096 probes x 36 loads x ~300 cycles (H200 L2 hit,
// docs/hardware/h200.md, "VRAM channels") is about 25 ms at 1.98 GHz.
constexpr size_t kChaseBatch = 4096;
// Control block: stop flag (int) at 0, aggressor time-out counter (unsigned) at 4, sink at 64.
constexpr size_t kControlBytes = 256;
constexpr size_t kSinkOffset = 64;

// A tool run by hand: the driver's description of the error, the stub library named, and "no
// usable GPU here" told apart from a failure.
absl::Status CudaError(absl::string_view what, CUresult r) {
  return CudaStatus(std::string_view(what.data(), what.size()), r,
                    {.describe = true, .name_stub_library = true, .unavailable_when_no_gpu = true});
}

absl::Status Check(CUresult r, absl::string_view what) {
  return r == CUDA_SUCCESS ? absl::OkStatus() : CudaError(what, r);
}

std::string ReadSmallFile(const char* path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

struct Gpu::State {
  struct Chunk {
    CUmemGenericAllocationHandle handle = 0;
    CUdeviceptr va = 0;
  };

  DeviceInfo info;
  double wait_timeout_s = 10;
  CUdevice device = 0;
  CUcontext context = nullptr;
  CUmodule module = nullptr;
  CUfunction read = nullptr, aggressor = nullptr, set_flag = nullptr;
  CUfunction chase_init = nullptr, chase = nullptr;
  CUstream victim_stream = nullptr, aggressor_stream = nullptr;
  CUevent start = nullptr, stop = nullptr, ready = nullptr;
  int blocks_per_sm = 0;
  unsigned log2_vecs_per_chunk = 0;
  bool fd_handles = false;
  std::vector<Chunk> chunks;
  double allocate_us_per_chunk = 0;
  CUdeviceptr lists[kLists] = {0, 0};
  uint32_t list_size[kLists] = {0, 0};
  CUdeviceptr control = 0;
  CUdeviceptr probes = 0, cycles = 0;  // kChaseBatch entries each

  // Polls until `stream` is idle, at most wait_timeout_s.
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
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  absl::Status WaitAll(absl::string_view what) const {
    MISSILE_RETURN_IF_ERROR(Wait(victim_stream, what));
    return Wait(aggressor_stream, what);
  }

  absl::StatusOr<StreamParams> Params(const ReadLaunch& r) const {
    if (r.list < 0 || r.list >= kLists || list_size[r.list] == 0) {
      return absl::InvalidArgumentError(absl::StrCat("reader list ", r.list, " is not loaded"));
    }
    if (r.blocks < 1) return absl::InvalidArgumentError("reader needs at least one block");
    StreamParams p{};
    p.chunk_list = lists[r.list];
    p.steps = r.steps;
    p.zero = 0;
    p.sink = control + kSinkOffset;
    p.num_chunks = list_size[r.list];
    p.log2_vecs_per_chunk = log2_vecs_per_chunk;
    const uint64_t threads = static_cast<uint64_t>(r.blocks) * kBlockThreads;
    p.stride_chunks_mod = static_cast<unsigned>((threads >> log2_vecs_per_chunk) % p.num_chunks);
    p.discard = r.discard ? 1 : 0;
    return p;
  }

  absl::Status Launch(CUfunction f, unsigned blocks, unsigned threads, CUstream stream,
                      void* params, absl::string_view what) const {
    void* args[] = {params};
    return Check(cuLaunchKernel(f, blocks, 1, 1, threads, 1, 1, 0, stream, args, nullptr), what);
  }
};

Gpu::Gpu(std::unique_ptr<State> state) : state_(std::move(state)) {}

// long: the driver set-up in the order the driver requires (init, device, identity, memory
// granularity, context, streams, events, buffers), each step a check with its own error.
absl::StatusOr<std::unique_ptr<Gpu>> Gpu::Open(int ordinal, double wait_timeout_s) {
  if (CUresult r = cuInit(0); r != CUDA_SUCCESS) {
    absl::Status s = CudaError("cuInit", r);
    return absl::UnavailableError(absl::StrCat("no usable CUDA driver or GPU: ", s.message()));
  }
  int count = 0;
  MISSILE_RETURN_IF_ERROR(Check(cuDeviceGetCount(&count), "cuDeviceGetCount"));
  if (count == 0) return absl::UnavailableError("no CUDA device found");
  if (ordinal < 0 || ordinal >= count) {
    return absl::InvalidArgumentError(
        absl::StrCat("no CUDA device ", ordinal, " (there are ", count, ")"));
  }
  auto st = std::make_unique<State>();
  st->wait_timeout_s = wait_timeout_s;
  DeviceInfo& info = st->info;
  info.ordinal = ordinal;
  MISSILE_RETURN_IF_ERROR(Check(cuDeviceGet(&st->device, ordinal), "cuDeviceGet"));
  const CUdevice dev = st->device;

  char name[256] = {};
  if (absl::Status s = Check(cuDeviceGetName(name, sizeof(name) - 1, dev), "cuDeviceGetName");
      !s.ok()) {
    return s;
  }
  info.identity.name = name;
  CUuuid uuid{};
  MISSILE_RETURN_IF_ERROR(Check(cuDeviceGetUuid(&uuid, dev), "cuDeviceGetUuid"));
  std::array<uint8_t, 16> bytes{};
  std::memcpy(bytes.data(), uuid.bytes, bytes.size());
  info.identity.uuid = FormatUuid(bytes);
  int cuda_version = 0;
  MISSILE_RETURN_IF_ERROR(Check(cuDriverGetVersion(&cuda_version), "cuDriverGetVersion"));
  info.identity.driver_version = FormatDriverVersion(
      cuda_version, KernelModuleVersion(ReadSmallFile("/proc/driver/nvidia/version")));

  struct {
    CUdevice_attribute attribute;
    int* out;
    const char* what;
  } attributes[] = {
      {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &info.sm_count, "SM count"},
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &info.cc_major, "compute capability"},
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &info.cc_minor, "compute capability"},
  };
  for (const auto& a : attributes) {
    if (absl::Status s = Check(cuDeviceGetAttribute(a.out, a.attribute, dev),
                               absl::StrCat("cuDeviceGetAttribute(", a.what, ")"));
        !s.ok()) {
      return s;
    }
  }
  // Informational attributes: a driver that no longer reports one leaves it 0.
  int l2 = 0, vmm = 0, fd = 0;
  if (cuDeviceGetAttribute(&info.clock_khz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, dev) != CUDA_SUCCESS) {
    info.clock_khz = 0;
  }
  cuDeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev);
  cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev);
  cuDeviceGetAttribute(&fd, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, dev);
  info.l2_bytes = static_cast<uint64_t>(std::max(l2, 0));
  st->fd_handles = fd != 0;
  size_t total = 0;
  MISSILE_RETURN_IF_ERROR(Check(cuDeviceTotalMem(&total, dev), "cuDeviceTotalMem"));
  info.total_bytes = total;
  if (!vmm) {
    return absl::FailedPreconditionError(absl::StrCat("GPU ", ordinal, " (", info.identity.name,
                                                      ") lacks virtual memory management"));
  }
  if (info.cc_major < 9) {
    return absl::FailedPreconditionError(absl::StrCat(
        "GPU ", ordinal, " (", info.identity.name, ") has compute capability ", info.cc_major, ".",
        info.cc_minor, "; the calibration kernels are PTX for compute_90"));
  }

  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = ordinal;
  prop.requestedHandleTypes =
      st->fd_handles ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
  size_t granularity = 0;
  if (absl::Status s = Check(
          cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
          "cuMemGetAllocationGranularity");
      !s.ok()) {
    return s;
  }
  if (!std::has_single_bit(granularity) || granularity < 4096) {
    return absl::FailedPreconditionError(
        absl::StrCat("allocation granularity ", granularity, " is not a power of two >= 4 KiB"));
  }
  info.identity.granularity_bytes = granularity;
  st->log2_vecs_per_chunk = static_cast<unsigned>(std::countr_zero(granularity / kVecBytes));

  if (absl::Status s =
          Check(cuDevicePrimaryCtxRetain(&st->context, dev), "cuDevicePrimaryCtxRetain");
      !s.ok()) {
    return s;
  }
  std::unique_ptr<Gpu> gpu(new Gpu(std::move(st)));  // from here the destructor cleans up
  State& g = *gpu->state_;
  absl::Status s = Check(cuCtxSetCurrent(g.context), "cuCtxSetCurrent");
  if (s.ok()) s = Check(cuStreamCreate(&g.victim_stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  if (s.ok()) {
    s = Check(cuStreamCreate(&g.aggressor_stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  }
  if (s.ok()) s = Check(cuEventCreate(&g.start, CU_EVENT_DEFAULT), "cuEventCreate");
  if (s.ok()) s = Check(cuEventCreate(&g.stop, CU_EVENT_DEFAULT), "cuEventCreate");
  if (s.ok()) s = Check(cuEventCreate(&g.ready, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  if (s.ok()) s = Check(cuMemAlloc(&g.control, kControlBytes), "cuMemAlloc(control)");
  if (s.ok()) s = Check(cuMemsetD8(g.control, 0, kControlBytes), "cuMemsetD8(control)");
  if (s.ok()) s = Check(cuMemAlloc(&g.probes, kChaseBatch * 8), "cuMemAlloc(probes)");
  if (s.ok()) s = Check(cuMemAlloc(&g.cycles, kChaseBatch * 8), "cuMemAlloc(cycles)");
  if (s.ok()) s = Check(cuCtxSynchronize(), "cuCtxSynchronize");
  if (!s.ok()) return s;
  return gpu;
}

Gpu::~Gpu() {
  State& g = *state_;
  if (g.context == nullptr) return;
  if (cuCtxSetCurrent(g.context) == CUDA_SUCCESS) {
    // Best effort: after a stuck kernel the waits fail and the driver reclaims at exit.
    const bool idle = g.victim_stream == nullptr || g.aggressor_stream == nullptr ||
                      g.WaitAll("releasing the GPU").ok();
    if (idle) {
      for (const State::Chunk& c : g.chunks) {
        cuMemUnmap(c.va, g.info.identity.granularity_bytes);
        cuMemAddressFree(c.va, g.info.identity.granularity_bytes);
        cuMemRelease(c.handle);
      }
      for (CUdeviceptr p : {g.lists[0], g.lists[1], g.control, g.probes, g.cycles}) {
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
  }
  cuDevicePrimaryCtxRelease(g.device);
}

absl::Status Gpu::LoadKernels(absl::string_view ptx) {
  State& g = *state_;
  const std::string text(ptx);  // cuModuleLoadDataEx wants a NUL-terminated image
  char log[8192] = {};
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* values[] = {log, reinterpret_cast<void*>(static_cast<uintptr_t>(sizeof(log) - 1))};
  if (CUresult r = cuModuleLoadDataEx(&g.module, text.c_str(), 2, options, values);
      r != CUDA_SUCCESS) {
    absl::Status s = CudaError("cuModuleLoadDataEx (JIT of the compute_90 PTX)", r);
    return absl::Status(s.code(), absl::StrCat(s.message(), log[0] != 0 ? ": " : "", log));
  }
  struct {
    CUfunction* out;
    const char* name;
  } functions[] = {{&g.read, "missile_stream_read"},
                   {&g.aggressor, "missile_aggressor"},
                   {&g.set_flag, "missile_set_flag"},
                   {&g.chase_init, "missile_chase_init"},
                   {&g.chase, "missile_chase"}};
  for (const auto& f : functions) {
    if (absl::Status s = Check(cuModuleGetFunction(f.out, g.module, f.name),
                               absl::StrCat("cuModuleGetFunction(", f.name, ")"));
        !s.ok()) {
      return s;
    }
  }
  int read_blocks = 0, aggressor_blocks = 0;
  absl::Status s =
      Check(cuOccupancyMaxActiveBlocksPerMultiprocessor(&read_blocks, g.read, kBlockThreads, 0),
            "cuOccupancyMaxActiveBlocksPerMultiprocessor");
  if (s.ok()) {
    s = Check(cuOccupancyMaxActiveBlocksPerMultiprocessor(&aggressor_blocks, g.aggressor,
                                                          kBlockThreads, 0),
              "cuOccupancyMaxActiveBlocksPerMultiprocessor");
  }
  if (!s.ok()) return s;
  g.blocks_per_sm = std::min(read_blocks, aggressor_blocks);
  if (g.blocks_per_sm < 1) {
    return absl::FailedPreconditionError("the stream kernels cannot be resident on an SM");
  }
  return absl::OkStatus();
}

absl::Status Gpu::AllocateChunks(uint32_t count) {
  State& g = *state_;
  if (!g.chunks.empty()) return absl::FailedPreconditionError("chunks already allocated");
  const size_t bytes = g.info.identity.granularity_bytes;
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = g.info.ordinal;
  prop.requestedHandleTypes =
      g.fd_handles ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  const auto begin = std::chrono::steady_clock::now();
  g.chunks.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    State::Chunk c;
    auto failed = [&](CUresult r, const char* call) {
      absl::Status s = CudaError(call, r);
      return absl::Status(
          s.code(), absl::StrCat("chunk ", i, " of ", count, ": ", s.message(),
                                 r == CUDA_ERROR_OUT_OF_MEMORY ? "; try a smaller --chunks" : ""));
    };
    if (CUresult r = cuMemCreate(&c.handle, bytes, &prop, 0); r != CUDA_SUCCESS) {
      return failed(r, "cuMemCreate");
    }
    if (CUresult r = cuMemAddressReserve(&c.va, bytes, bytes, 0, 0); r != CUDA_SUCCESS) {
      cuMemRelease(c.handle);
      return failed(r, "cuMemAddressReserve");
    }
    CUresult r = cuMemMap(c.va, bytes, 0, c.handle, 0);
    if (r == CUDA_SUCCESS) {
      r = cuMemSetAccess(c.va, bytes, &access, 1);
      if (r != CUDA_SUCCESS) cuMemUnmap(c.va, bytes);
    }
    if (r != CUDA_SUCCESS) {
      cuMemAddressFree(c.va, bytes);
      cuMemRelease(c.handle);
      return failed(r, "cuMemMap/cuMemSetAccess");
    }
    g.chunks.push_back(c);
  }
  const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - begin;
  g.allocate_us_per_chunk = count > 0 ? took.count() / count : 0;
  for (const State::Chunk& c : g.chunks) {
    if (absl::Status s = Check(cuMemsetD32Async(c.va, 0x5a5a5a5a, bytes / 4, g.victim_stream),
                               "cuMemsetD32Async(chunk)");
        !s.ok()) {
      return s;
    }
  }
  for (CUdeviceptr& list : g.lists) {
    if (absl::Status s = Check(cuMemAlloc(&list, sizeof(uint64_t) * std::max(count, 1u)),
                               "cuMemAlloc(chunk list)");
        !s.ok()) {
      return s;
    }
  }
  return g.WaitAll("filling the chunks");
}

double Gpu::allocate_us_per_chunk() const { return state_->allocate_us_per_chunk; }
const DeviceInfo& Gpu::info() const { return state_->info; }
int Gpu::blocks_per_sm() const { return state_->blocks_per_sm; }
uint32_t Gpu::chunk_count() const { return static_cast<uint32_t>(state_->chunks.size()); }
uint64_t Gpu::chunk_address(uint32_t chunk) const {
  return chunk < state_->chunks.size() ? state_->chunks[chunk].va : 0;
}

absl::Status Gpu::SetList(int list, const ChunkList& chunks) {
  State& g = *state_;
  if (list < 0 || list >= kLists) return absl::InvalidArgumentError("list slot out of range");
  if (chunks.empty() || chunks.size() > g.chunks.size()) {
    return absl::InvalidArgumentError(absl::StrCat("chunk list of ", chunks.size(), " entries"));
  }
  std::vector<uint64_t> addresses;
  addresses.reserve(chunks.size());
  for (uint32_t c : chunks) {
    if (c >= g.chunks.size()) {
      return absl::InvalidArgumentError(absl::StrCat("chunk ", c, " was not allocated"));
    }
    addresses.push_back(g.chunks[c].va);
  }
  // Nothing may still read the list; the copy is ordered before later kernels by the wait.
  MISSILE_RETURN_IF_ERROR(g.WaitAll("SetList"));
  if (absl::Status s =
          Check(cuMemcpyHtoDAsync(g.lists[list], addresses.data(),
                                  addresses.size() * sizeof(uint64_t), g.victim_stream),
                "cuMemcpyHtoDAsync(chunk list)");
      !s.ok()) {
    return s;
  }
  g.list_size[list] = static_cast<uint32_t>(chunks.size());
  return g.Wait(g.victim_stream, "copying a chunk list");
}

absl::StatusOr<double> Gpu::TimeRead(const ReadLaunch& reader) {
  State& g = *state_;
  MISSILE_ASSIGN_OR_RETURN(StreamParams p, g.Params(reader));
  absl::Status s = Check(cuEventRecord(g.start, g.victim_stream), "cuEventRecord");
  if (s.ok()) {
    s = g.Launch(g.read, static_cast<unsigned>(reader.blocks), kBlockThreads, g.victim_stream, &p,
                 "cuLaunchKernel(missile_stream_read)");
  }
  if (s.ok()) s = Check(cuEventRecord(g.stop, g.victim_stream), "cuEventRecord");
  if (s.ok()) s = g.Wait(g.victim_stream, "missile_stream_read");
  if (!s.ok()) return s;
  float ms = 0;
  if (absl::Status e = Check(cuEventElapsedTime(&ms, g.start, g.stop), "cuEventElapsedTime");
      !e.ok()) {
    return e;
  }
  return static_cast<double>(ms);
}

absl::StatusOr<double> Gpu::TimeReadUnder(const ReadLaunch& victim, const ReadLaunch& aggressor) {
  State& g = *state_;
  if (victim.list == aggressor.list) {
    return absl::InvalidArgumentError("victim and aggressor must read different lists");
  }
  MISSILE_ASSIGN_OR_RETURN(StreamParams v, g.Params(victim));
  MISSILE_ASSIGN_OR_RETURN(StreamParams a, g.Params(aggressor));
  a.stop_flag = g.control;
  a.timed_out = g.control + 4;
  a.max_ns = static_cast<unsigned long long>(kAggressorMaxSeconds * 1e9);
  // A step bound far beyond max_ns at any bandwidth (20 TB/s), so the loop is bounded twice.
  a.steps = static_cast<unsigned long long>(
                kAggressorMaxSeconds * 20e12 /
                static_cast<double>(BytesRead({1, aggressor.blocks, 1, false}))) +
            1;
  CUdeviceptr flag = g.control;
  // Order: reset the control words, start the aggressor, then (on the other stream, after the
  // reset) the timed victim and the flag that stops the aggressor.
  absl::Status s = Check(cuMemsetD32Async(g.control, 0, 2, g.aggressor_stream), "cuMemsetD32Async");
  if (s.ok()) s = Check(cuEventRecord(g.ready, g.aggressor_stream), "cuEventRecord");
  if (s.ok()) {
    s = g.Launch(g.aggressor, static_cast<unsigned>(aggressor.blocks), kBlockThreads,
                 g.aggressor_stream, &a, "cuLaunchKernel(missile_aggressor)");
  }
  if (s.ok()) s = Check(cuStreamWaitEvent(g.victim_stream, g.ready, 0), "cuStreamWaitEvent");
  if (s.ok()) s = Check(cuEventRecord(g.start, g.victim_stream), "cuEventRecord");
  if (s.ok()) {
    s = g.Launch(g.read, static_cast<unsigned>(victim.blocks), kBlockThreads, g.victim_stream, &v,
                 "cuLaunchKernel(missile_stream_read)");
  }
  if (s.ok()) s = Check(cuEventRecord(g.stop, g.victim_stream), "cuEventRecord");
  if (s.ok()) {
    s = g.Launch(g.set_flag, 1, 32, g.victim_stream, &flag, "cuLaunchKernel(missile_set_flag)");
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
  float ms = 0;
  if (absl::Status e = Check(cuEventElapsedTime(&ms, g.start, g.stop), "cuEventElapsedTime");
      !e.ok()) {
    return e;
  }
  return static_cast<double>(ms);
}

absl::StatusOr<std::vector<uint64_t>> Gpu::ChaseCycles(const std::vector<uint64_t>& probes,
                                                       uint32_t iters) {
  State& g = *state_;
  const uint64_t chunk_bytes = g.info.identity.granularity_bytes;
  std::vector<uint64_t> bases;
  for (const State::Chunk& c : g.chunks) bases.push_back(c.va);
  std::sort(bases.begin(), bases.end());
  for (uint64_t p : probes) {
    // Chunk VAs are reserved granularity-aligned, so a probe's chunk base is p rounded down.
    if (p % 8 != 0 || !std::binary_search(bases.begin(), bases.end(), p - p % chunk_bytes)) {
      return absl::InvalidArgumentError(
          absl::StrCat("latency probe 0x", absl::Hex(p), " is not an aligned word of a chunk"));
    }
  }
  std::vector<uint64_t> out(probes.size());
  for (size_t at = 0; at < probes.size(); at += kChaseBatch) {
    const size_t n = std::min(kChaseBatch, probes.size() - at);
    ChaseParams p{};
    p.probes = g.probes;
    p.cycles = g.cycles;
    p.sink = g.control + kSinkOffset;
    p.num_probes = static_cast<unsigned>(n);
    p.iters = iters;
    absl::Status s = g.WaitAll("latency probe");
    if (s.ok()) {
      s = Check(cuMemcpyHtoDAsync(g.probes, probes.data() + at, n * 8, g.victim_stream),
                "cuMemcpyHtoDAsync(probes)");
    }
    if (s.ok()) {
      s = g.Launch(g.chase_init, static_cast<unsigned>((n + 255) / 256), 256, g.victim_stream, &p,
                   "cuLaunchKernel(missile_chase_init)");
    }
    if (s.ok()) s = g.Launch(g.chase, 1, 1, g.victim_stream, &p, "cuLaunchKernel(missile_chase)");
    if (s.ok()) {
      s = Check(cuMemcpyDtoHAsync(out.data() + at, g.cycles, n * 8, g.victim_stream),
                "cuMemcpyDtoHAsync(cycles)");
    }
    if (s.ok()) s = g.Wait(g.victim_stream, "missile_chase");
    if (!s.ok()) return s;
  }
  return out;
}

}  // namespace missile::calibrate
