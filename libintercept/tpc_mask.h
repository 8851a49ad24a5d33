// The LS reserve of TPCs on MPS: a best-effort (BE) tenant's kernels are launched with a TPC
// disable mask, so an arriving latency-sensitive (LS) request finds SMs no BE block holds.
//
// Mechanism (undocumented driver interface): cuGetExportTable with the UUID below returns a
// table of callback functions; entry 3 subscribes a function, entry 6 enables it for a domain
// and callback id. Domain 0xb, id 1 is called on the launching thread inside every kernel
// launch, and at a graph's upload for each of its kernel nodes, before the launch descriptor
// goes to the GPU. Its parameter block starts with its size (at least 40 bytes); the pointer at
// byte 32 points to the launch descriptor. In a descriptor of version 0x40 (byte 72), the
// 128-bit TPC disable mask is the four 32-bit words at 304, 308, 312 and 316 (pacing/tpc_map.h),
// in force when bit 31 of the descriptor's first word is set. Verified on an H200 with driver
// 580.159.04 (CUDA 13.0), time-sliced and as an MPS client; libsmctrl documents the same
// callback. Any other layout is refused: the launch goes unmasked and is counted, never patched
// blindly.
//
// A kernel of a graph keeps the mask it got when the graph was uploaded (explicitly or at its
// first launch), whatever the reserve is later.
// Thread-safety: every member may be called from any thread; the mask applies to the calling
// thread's launches only (Scope).
#ifndef MISSILE_LIBINTERCEPT_TPC_MASK_H_
#define MISSILE_LIBINTERCEPT_TPC_MASK_H_

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "driver_api.h"
#include "missile/pacing/tpc_map.h"
#include "spdlog/logger.h"

namespace missile::shim {

inline constexpr CUuuid kLaunchCallbackTableId = {
    {0x2c, static_cast<char>(0x8e), 0x0a, static_cast<char>(0xd8), 0x07, 0x10,
     static_cast<char>(0xab), 0x4e, static_cast<char>(0x90), static_cast<char>(0xdd), 0x54,
     0x71, static_cast<char>(0x9f), static_cast<char>(0xe5), static_cast<char>(0xf7), 0x4b}};
inline constexpr int kLaunchCallbackDomain = 0xb;
inline constexpr int kLaunchCallbackId = 1;  // before the launch descriptor is uploaded
inline constexpr uint32_t kLaunchParamsMinSize = 40;
inline constexpr size_t kLaunchParamsDescriptorAt = 32;
inline constexpr size_t kDescriptorVersionAt = 72;
inline constexpr uint8_t kDescriptorVersion = 0x40;
inline constexpr size_t kDescriptorMaskAt = 304;
inline constexpr uint32_t kDescriptorMaskEnable = 0x80000000u;  // of the descriptor's word 0

// ORs `mask` into the launch descriptor the callback parameters `params` lead to and sets its
// enable bit (an empty mask writes nothing), if they have the verified layout; returns false
// and writes nothing otherwise. `version` receives the
// descriptor's version byte when one was found (0 if not). Pure over the memory it is given.
bool PatchLaunchDescriptor(const void* params, const pacing::TpcMask& mask, uint8_t* version);

// The probe kernel on one device (a PTX kernel recording the SM of each block), its output
// buffer and a stream of its own; the masker's probe and tools use it. Not thread-safe.
class SmProbe {
 public:
  static constexpr uint64_t kProbeSpinNs = 20'000;  // each block's run: blocks overlap
  static absl::StatusOr<std::unique_ptr<SmProbe>> Open(const DriverApi& api, CUdevice device);
  ~SmProbe();
  SmProbe(const SmProbe&) = delete;
  SmProbe& operator=(const SmProbe&) = delete;

  // One launch of 16 blocks per SM, under the calling thread's mask (TpcMasker::Scope), waited
  // for: the SM of each block.
  absl::StatusOr<std::vector<uint32_t>> Run();
  // One launch of `blocks` blocks (at most 16 per SM) spinning `spin_ns`, not waited for.
  CUresult Launch(unsigned blocks, uint64_t spin_ns);
  CUstream stream() const { return stream_; }

 private:
  explicit SmProbe(const DriverApi& api) : api_(api) {}
  const DriverApi& api_;
  unsigned blocks_ = 0;
  CUmodule module_ = nullptr;
  CUfunction fn_ = nullptr;
  CUdeviceptr out_ = 0;
  CUstream stream_ = nullptr;
};

class TpcMasker {
 public:
  // Never destroyed while the process runs: the driver keeps calling the subscribed callback.
  TpcMasker(const DriverApi& api, spdlog::logger* log) : api_(api), log_(log) {}
  TpcMasker(const TpcMasker&) = delete;
  TpcMasker& operator=(const TpcMasker&) = delete;

  // While a Scope lives, the calling thread's launches carry `mask` (null: none). Nests.
  class Scope {
   public:
    explicit Scope(const pacing::TpcMask* mask);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    const pacing::TpcMask* previous_;
  };

  // The live mask bits of `device`, probed on the first call for it (the current context must
  // be on it): subscribes the launch callback (once per process), then runs the probe kernel
  // twice for each of 129 masks on a stream of its own, with capture interactions relaxed for the thread so a
  // capture elsewhere is neither broken nor recorded into. The answer, or why the mechanism
  // does not work here, is kept for later calls.
  absl::StatusOr<const pacing::TpcMap*> MapFor(CUdevice device) ABSL_LOCKS_EXCLUDED(mu_);

  // Launches whose descriptor the callback patched, and those it refused (unknown layout).
  uint64_t applied() const { return applied_.load(std::memory_order_relaxed); }
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }

 private:
  static void OnLaunch(void* self, int domain, int cbid, const void* params);
  absl::Status InstallLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<pacing::TpcMap> Probe(CUdevice device) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const DriverApi& api_;
  spdlog::logger* log_;
  absl::Mutex mu_;
  bool installed_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status install_status_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<CUdevice, std::unique_ptr<absl::StatusOr<pacing::TpcMap>>> maps_
      ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> applied_{0};
  std::atomic<uint64_t> refused_{0};
  std::atomic<uint8_t> refused_version_{0};
};

}  // namespace missile::shim

#endif  // MISSILE_LIBINTERCEPT_TPC_MASK_H_
