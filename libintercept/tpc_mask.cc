#include "tpc_mask.h"

#include <cstring>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace missile::shim {
namespace {

// The mask the calling thread's launches carry now (TpcMasker::Scope).
thread_local const pacing::TpcMask* t_mask = nullptr;

// The probe: thread 0 of every block records the SM the block runs on; every thread then spins
// until `spin_ns` have passed since it started, so the blocks of one launch overlap and spread
// over every SM they may use. PTX for sm_70, JIT-compiled by the driver for the GPU at hand.
constexpr char kProbePtx[] = R"(.version 7.0
.target sm_70
.address_size 64

.visible .entry missile_sm_probe(.param .u64 out, .param .u64 spin_ns)
{
  .reg .pred %p<3>;
  .reg .b32 %r<4>;
  .reg .b64 %rd<9>;
  mov.u64 %rd1, %globaltimer;
  ld.param.u64 %rd2, [out];
  ld.param.u64 %rd3, [spin_ns];
  mov.u32 %r1, %tid.x;
  setp.ne.u32 %p1, %r1, 0;
  @%p1 bra WAIT;
  mov.u32 %r2, %smid;
  mov.u32 %r3, %ctaid.x;
  cvta.to.global.u64 %rd4, %rd2;
  mul.wide.u32 %rd5, %r3, 4;
  add.s64 %rd6, %rd4, %rd5;
  st.global.u32 [%rd6], %r2;
WAIT:
  mov.u64 %rd7, %globaltimer;
  sub.s64 %rd8, %rd7, %rd1;
  setp.lt.u64 %p2, %rd8, %rd3;
  @%p2 bra WAIT;
  ret;
}
)";
constexpr char kProbeName[] = "missile_sm_probe";
// 1024-thread blocks: at most 2 resident per SM (2048 threads per SM on Hopper), so 4 blocks
// per SM run in two waves and every SM the mask allows gets at least one block.
constexpr unsigned kProbeThreads = 1024;
constexpr unsigned kProbeBlocksPerSm = 4;
constexpr uint64_t kProbeSpinNs = 50'000;

// The export table's entries used (pointer-sized slots).
using SubscribeFn = int (*)(uint32_t* handle, void (*cb)(void*, int, int, const void*), void*);
using EnableFn = int (*)(uint32_t on, uint32_t handle, int domain, int cbid);
constexpr size_t kSubscribeSlot = 3;
constexpr size_t kEnableSlot = 6;

}  // namespace

bool PatchLaunchDescriptor(const void* params, const pacing::TpcMask& mask, uint8_t* version) {
  *version = 0;
  if (params == nullptr) return false;
  uint32_t size = 0;
  std::memcpy(&size, params, sizeof(size));
  if (size < kLaunchParamsMinSize) return false;
  const char* holder = nullptr;
  std::memcpy(&holder, static_cast<const char*>(params) + kLaunchParamsDescriptorAt,
              sizeof(holder));
  if (holder == nullptr) return false;
  char* descriptor = nullptr;
  std::memcpy(&descriptor, holder, sizeof(descriptor));
  if (descriptor == nullptr) return false;
  *version = static_cast<uint8_t>(descriptor[kDescriptorVersionAt]);
  if (*version != kDescriptorVersion) return false;
  for (size_t i = 0; i < mask.words.size(); ++i) {
    uint32_t word = 0;
    char* at = descriptor + kDescriptorMaskAt + 4 * i;
    std::memcpy(&word, at, sizeof(word));
    word |= mask.words[i];
    std::memcpy(at, &word, sizeof(word));
  }
  return true;
}

TpcMasker::Scope::Scope(const pacing::TpcMask* mask) : previous_(t_mask) { t_mask = mask; }
TpcMasker::Scope::~Scope() { t_mask = previous_; }

void TpcMasker::OnLaunch(void* self, int domain, int cbid, const void* params) {
  const pacing::TpcMask* mask = t_mask;
  if (mask == nullptr || domain != kLaunchCallbackDomain || cbid != kLaunchCallbackId) return;
  auto* masker = static_cast<TpcMasker*>(self);
  uint8_t version = 0;
  if (PatchLaunchDescriptor(params, *mask, &version)) {
    masker->applied_.fetch_add(1, std::memory_order_relaxed);
  } else {
    masker->refused_.fetch_add(1, std::memory_order_relaxed);
    masker->refused_version_.store(version, std::memory_order_relaxed);
  }
}

absl::Status TpcMasker::InstallLocked() {
  if (installed_) return install_status_;
  installed_ = true;
  const void* table = nullptr;
  if (api_.GetExportTable == nullptr ||
      api_.GetExportTable(&table, &kLaunchCallbackTableId) != CUDA_SUCCESS || table == nullptr) {
    install_status_ = absl::UnavailableError("the driver has no launch callback table");
    return install_status_;
  }
  const auto* slots = static_cast<void* const*>(table);
  auto subscribe = reinterpret_cast<SubscribeFn>(slots[kSubscribeSlot]);
  auto enable = reinterpret_cast<EnableFn>(slots[kEnableSlot]);
  uint32_t handle = 0;
  int rc = subscribe == nullptr || enable == nullptr ? -1 : subscribe(&handle, &OnLaunch, this);
  if (rc == 0) rc = enable(1, handle, kLaunchCallbackDomain, kLaunchCallbackId);
  if (rc != 0) {
    install_status_ = absl::UnavailableError(
        absl::StrCat("the driver refused the launch callback (", rc, ")"));
  }
  return install_status_;
}

absl::StatusOr<const pacing::TpcMap*> TpcMasker::MapFor(CUdevice device) {
  absl::MutexLock lock(&mu_);
  auto& slot = maps_[device];
  if (slot == nullptr) {
    absl::Status installed = InstallLocked();
    slot = std::make_unique<absl::StatusOr<pacing::TpcMap>>(
        installed.ok() ? Probe(device) : absl::StatusOr<pacing::TpcMap>(installed));
    if (slot->ok()) {
      log_->info("GPU {}: TPC masks work: {}", device, pacing::DescribeTpcMap(**slot));
    } else {
      log_->warn("GPU {}: no LS reserve of TPCs: {}", device, std::string(slot->status().message()));
    }
  }
  if (!slot->ok()) return slot->status();
  return &**slot;
}

absl::StatusOr<pacing::TpcMap> TpcMasker::Probe(CUdevice device) {
  const DriverApi& a = api_;
  for (const void* fn : {reinterpret_cast<const void*>(a.ThreadExchangeStreamCaptureMode),
                         reinterpret_cast<const void*>(a.ModuleLoadData),
                         reinterpret_cast<const void*>(a.ModuleGetFunction),
                         reinterpret_cast<const void*>(a.LaunchKernel),
                         reinterpret_cast<const void*>(a.MemAlloc),
                         reinterpret_cast<const void*>(a.MemcpyDtoH),
                         reinterpret_cast<const void*>(a.StreamCreate)}) {
    if (fn == nullptr) return absl::UnavailableError("the driver lacks a call the probe needs");
  }
  // Relaxed: this thread's module load and allocation must not break a capture elsewhere.
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  a.ThreadExchangeStreamCaptureMode(&mode);
  absl::Cleanup restore_mode = [&] { a.ThreadExchangeStreamCaptureMode(&mode); };
  int sms = 0;
  if (CUresult r = a.DeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device);
      r != CUDA_SUCCESS || sms <= 0) {
    return DriverStatus(a, "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)", r);
  }
  CUmodule module = nullptr;
  if (CUresult r = a.ModuleLoadData(&module, kProbePtx); r != CUDA_SUCCESS) {
    return DriverStatus(a, "cuModuleLoadData(probe)", r);
  }
  absl::Cleanup unload = [&] { a.ModuleUnload(module); };
  CUfunction fn = nullptr;
  if (CUresult r = a.ModuleGetFunction(&fn, module, kProbeName); r != CUDA_SUCCESS) {
    return DriverStatus(a, "cuModuleGetFunction(probe)", r);
  }
  const unsigned blocks = kProbeBlocksPerSm * static_cast<unsigned>(sms);
  CUdeviceptr out = 0;
  if (CUresult r = a.MemAlloc(&out, blocks * sizeof(uint32_t)); r != CUDA_SUCCESS) {
    return DriverStatus(a, "cuMemAlloc(probe)", r);
  }
  absl::Cleanup free_out = [&] { a.MemFree(out); };
  CUstream stream = nullptr;
  if (CUresult r = a.StreamCreate(&stream, CU_STREAM_NON_BLOCKING); r != CUDA_SUCCESS) {
    return DriverStatus(a, "cuStreamCreate(probe)", r);
  }
  absl::Cleanup destroy_stream = [&] { a.StreamDestroy(stream); };

  std::vector<uint32_t> host(blocks);
  uint64_t spin = kProbeSpinNs;
  void* args[] = {&out, &spin};
  // One probe launch under `mask` (null: none): the SM of every block.
  auto run = [&](const pacing::TpcMask* mask) -> absl::StatusOr<std::vector<uint32_t>> {
    const uint64_t applied = applied_.load(std::memory_order_relaxed);
    CUresult r;
    {
      Scope scope(mask);
      r = a.LaunchKernel(fn, blocks, 1, 1, kProbeThreads, 1, 1, 0, stream, args, nullptr);
    }
    if (r != CUDA_SUCCESS) return DriverStatus(a, "cuLaunchKernel(probe)", r);
    if (mask != nullptr && applied_.load(std::memory_order_relaxed) == applied) {
      const uint8_t v = refused_version_.load(std::memory_order_relaxed);
      return absl::UnavailableError(
          v != 0 && v != kDescriptorVersion
              ? absl::StrCat("launch descriptor version 0x", absl::Hex(v),
                             " is not the one verified (0x40)")
              : std::string("the launch callback did not patch the probe's launch"));
    }
    if (r = a.StreamSynchronize(stream); r != CUDA_SUCCESS) {
      return DriverStatus(a, "cuStreamSynchronize(probe)", r);
    }
    if (r = a.MemcpyDtoH(host.data(), out, blocks * sizeof(uint32_t)); r != CUDA_SUCCESS) {
      return DriverStatus(a, "cuMemcpyDtoH(probe)", r);
    }
    return host;
  };
  pacing::TpcProbeResult probe;
  absl::StatusOr<std::vector<uint32_t>> all = run(nullptr);
  if (!all.ok()) return all.status();
  probe.all = *std::move(all);
  for (uint32_t bit : pacing::ProbeBits()) {
    const pacing::TpcMask mask = pacing::DisableMask({bit});
    absl::StatusOr<std::vector<uint32_t>> used = run(&mask);
    if (!used.ok()) return used.status();
    probe.with_bit_disabled.push_back(*std::move(used));
  }
  return pacing::DeriveTpcMap(probe);
}

}  // namespace missile::shim
