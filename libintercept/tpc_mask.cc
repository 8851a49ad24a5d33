#include "tpc_mask.h"

#include <algorithm>
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
// 1024-thread blocks: at most 2 resident per SM (2048 threads per SM on Hopper), so 16 blocks
// per SM run in about 8 waves and every SM the mask allows gets blocks. (With 4 per SM, as an
// MPS client on the H200, an SM now and then got none.)
constexpr unsigned kProbeThreads = 1024;
constexpr unsigned kProbeBlocksPerSm = 16;

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
  char* descriptor = nullptr;
  std::memcpy(&descriptor, static_cast<const char*>(params) + kLaunchParamsDescriptorAt,
              sizeof(descriptor));
  if (descriptor == nullptr) return false;
  *version = static_cast<uint8_t>(descriptor[kDescriptorVersionAt]);
  if (*version != kDescriptorVersion) return false;
  if (mask.empty()) return true;
  auto set = [descriptor](size_t at, uint32_t bits) {
    uint32_t word = 0;
    std::memcpy(&word, descriptor + at, sizeof(word));
    word |= bits;
    std::memcpy(descriptor + at, &word, sizeof(word));
  };
  for (size_t i = 0; i < mask.words.size(); ++i) set(kDescriptorMaskAt + 4 * i, mask.words[i]);
  set(0, kDescriptorMaskEnable);
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
      log_->warn("GPU {}: no LS reserve of TPCs: {}", device,
                 std::string(slot->status().message()));
    }
  }
  if (!slot->ok()) return slot->status();
  return &**slot;
}

absl::StatusOr<std::unique_ptr<SmProbe>> SmProbe::Open(const DriverApi& api, CUdevice device) {
  for (const void* fn : {reinterpret_cast<const void*>(api.ModuleLoadData),
                         reinterpret_cast<const void*>(api.ModuleGetFunction),
                         reinterpret_cast<const void*>(api.ModuleUnload),
                         reinterpret_cast<const void*>(api.LaunchKernel),
                         reinterpret_cast<const void*>(api.MemAlloc),
                         reinterpret_cast<const void*>(api.MemFree),
                         reinterpret_cast<const void*>(api.MemcpyDtoH),
                         reinterpret_cast<const void*>(api.StreamCreate),
                         reinterpret_cast<const void*>(api.StreamDestroy)}) {
    if (fn == nullptr) return absl::UnavailableError("the driver lacks a call the probe needs");
  }
  std::unique_ptr<SmProbe> p(new SmProbe(api));
  int sms = 0;
  if (CUresult r = api.DeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device);
      r != CUDA_SUCCESS || sms <= 0) {
    return DriverStatus(api, "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)", r);
  }
  p->blocks_ = kProbeBlocksPerSm * static_cast<unsigned>(sms);
  if (CUresult r = api.ModuleLoadData(&p->module_, kProbePtx); r != CUDA_SUCCESS) {
    return DriverStatus(api, "cuModuleLoadData(probe)", r);
  }
  if (CUresult r = api.ModuleGetFunction(&p->fn_, p->module_, kProbeName); r != CUDA_SUCCESS) {
    return DriverStatus(api, "cuModuleGetFunction(probe)", r);
  }
  if (CUresult r = api.MemAlloc(&p->out_, p->blocks_ * sizeof(uint32_t)); r != CUDA_SUCCESS) {
    return DriverStatus(api, "cuMemAlloc(probe)", r);
  }
  if (CUresult r = api.StreamCreate(&p->stream_, CU_STREAM_NON_BLOCKING); r != CUDA_SUCCESS) {
    return DriverStatus(api, "cuStreamCreate(probe)", r);
  }
  return p;
}

SmProbe::~SmProbe() {
  if (stream_ != nullptr) api_.StreamDestroy(stream_);
  if (out_ != 0) api_.MemFree(out_);
  if (module_ != nullptr) api_.ModuleUnload(module_);
}

CUresult SmProbe::Launch(unsigned blocks, uint64_t spin_ns) {
  void* args[] = {&out_, &spin_ns};
  return api_.LaunchKernel(fn_, std::min(blocks, blocks_), 1, 1, kProbeThreads, 1, 1, 0, stream_,
                           args, nullptr);
}

absl::StatusOr<std::vector<uint32_t>> SmProbe::Run() {
  if (CUresult r = Launch(blocks_, kProbeSpinNs); r != CUDA_SUCCESS) {
    return DriverStatus(api_, "cuLaunchKernel(probe)", r);
  }
  if (CUresult r = api_.StreamSynchronize(stream_); r != CUDA_SUCCESS) {
    return DriverStatus(api_, "cuStreamSynchronize(probe)", r);
  }
  std::vector<uint32_t> sms(blocks_);
  if (CUresult r = api_.MemcpyDtoH(sms.data(), out_, blocks_ * sizeof(uint32_t));
      r != CUDA_SUCCESS) {
    return DriverStatus(api_, "cuMemcpyDtoH(probe)", r);
  }
  return sms;
}

absl::StatusOr<pacing::TpcMap> TpcMasker::Probe(CUdevice device) {
  if (api_.ThreadExchangeStreamCaptureMode == nullptr) {
    return absl::UnavailableError("the driver lacks cuThreadExchangeStreamCaptureMode");
  }
  // Relaxed: this thread's module load and allocation must not break a capture elsewhere.
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  api_.ThreadExchangeStreamCaptureMode(&mode);
  absl::Cleanup restore_mode = [&] { api_.ThreadExchangeStreamCaptureMode(&mode); };
  absl::StatusOr<std::unique_ptr<SmProbe>> probe = SmProbe::Open(api_, device);
  if (!probe.ok()) return probe.status();
  // Two probe launches under `mask` (null: none): the SMs their blocks ran on, so an SM that
  // got no block of one launch by chance still counts.
  auto run = [&](const pacing::TpcMask* mask) -> absl::StatusOr<std::vector<uint32_t>> {
    const uint64_t applied = applied_.load(std::memory_order_relaxed);
    absl::StatusOr<std::vector<uint32_t>> sms;
    {
      Scope scope(mask);
      sms = (*probe)->Run();
      if (sms.ok()) {
        absl::StatusOr<std::vector<uint32_t>> again = (*probe)->Run();
        if (!again.ok()) return again.status();
        sms->insert(sms->end(), again->begin(), again->end());
      }
    }
    if (sms.ok() && mask != nullptr && applied_.load(std::memory_order_relaxed) == applied) {
      const uint8_t v = refused_version_.load(std::memory_order_relaxed);
      return absl::UnavailableError(
          v != 0 && v != kDescriptorVersion
              ? absl::StrCat("launch descriptor version 0x", absl::Hex(v),
                             " is not the one verified (0x40)")
              : std::string("the launch callback did not patch the probe's launch"));
    }
    return sms;
  };
  pacing::TpcProbeResult result;
  absl::StatusOr<std::vector<uint32_t>> all = run(nullptr);
  if (!all.ok()) return all.status();
  result.all = *std::move(all);
  for (uint32_t bit : pacing::ProbeBits()) {
    const pacing::TpcMask mask = pacing::DisableMask({bit});
    absl::StatusOr<std::vector<uint32_t>> used = run(&mask);
    if (!used.ok()) return used.status();
    result.with_bit_disabled.push_back(*std::move(used));
  }
  return pacing::DeriveTpcMap(result);
}

}  // namespace missile::shim
